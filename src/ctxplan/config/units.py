"""Parsing the sizes and times users type: 8K / 128K / 1M tokens, 20ms / 1.5s / 800us."""

from __future__ import annotations

import math
import re

from ctxplan.errors import UserInputError

# Token counts use powers of two, as context lengths are quoted: 1K = 1024, 1M = 1,048,576.
_TOKEN_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "": 1.0}
_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"


def parse_tokens(value: str | int, field: str = "context_length") -> int:
    """'8K' -> 8192, '1M' -> 1048576, '3000' -> 3000. Whole numbers >= 1 only."""
    if isinstance(value, bool):
        raise UserInputError(field, value, "give a token count such as 8K, 128K or 1M")
    if isinstance(value, int):
        n = value
    else:
        m = re.fullmatch(_NUMBER + r"\s*([kKmMgG]?)", str(value).strip())
        if not m:
            raise UserInputError(field, value, "give a token count such as 8K, 128K, 1M or 3000")
        x = float(m.group(1)) * _TOKEN_UNITS[m.group(2).lower()]
        if not math.isfinite(x) or x != int(x):
            raise UserInputError(field, value, "give a whole number of tokens")
        n = int(x)
    if n < 1:
        raise UserInputError(field, value, "give at least 1 token")
    return n


def parse_token_list(value: str, field: str = "contexts") -> list[int]:
    parts = [p for p in str(value).split(",") if p.strip()]
    if not parts:
        raise UserInputError(field, value, "give a comma-separated list such as 8K,128K,1M")
    return [parse_tokens(p, field) for p in parts]


def parse_seconds(value: str | float | int, field: str) -> float:
    """'20ms' -> 0.02, '1.5s' -> 1.5, 0.02 -> 0.02 (a bare number is seconds). Must be > 0."""
    if isinstance(value, bool):
        raise UserInputError(field, value, "give a time such as 20ms or 1.5s")
    if isinstance(value, int | float):
        x = float(value)
    else:
        m = re.fullmatch(_NUMBER + r"\s*(s|ms|us|µs|ns)?", str(value).strip())
        if not m:
            raise UserInputError(field, value, "give a time such as 20ms, 1.5s or 800us")
        x = float(m.group(1)) * _TIME_UNITS[m.group(2) or ""]
    if not math.isfinite(x) or x <= 0:
        raise UserInputError(field, value, "give a finite time > 0, such as 20ms")
    return x
