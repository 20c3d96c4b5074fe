"""Parsing the sizes and times users type: 8K / 128K / 1M tokens, 20ms / 1.5s / 800us."""

from __future__ import annotations

import math
import re

from ctxplan.errors import UserInputError

# Token counts use powers of two, as context lengths are quoted: 1K = 1024, 1M = 1,048,576.
_TOKEN_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
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


def parse_seconds(value: str | float | int, field: str, usual_unit: str = "ms") -> float:
    """'20ms' -> 0.02, '1.5s' -> 1.5, '800us' -> 8e-4. Must be > 0 and carry its unit.

    A bare number ('20', 20, 0.02) is refused: read as seconds it is a 1000x trap when ms were
    meant (issue 13). The fix names the number with ``usual_unit`` (ms for a TPOT, s for a
    TTFT)."""
    if isinstance(value, bool):
        raise UserInputError(field, value, "give a time such as 20ms or 1.5s")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value <= 0:
            raise UserInputError(field, value, "give a finite time > 0, such as 20ms")
        raise UserInputError(field, value, unit_fix(value, usual_unit),
                             "a time without a unit")
    m = re.fullmatch(_NUMBER + r"\s*(s|ms|us|µs|ns)?", str(value).strip())
    if not m:
        raise UserInputError(field, value, "give a time such as 20ms, 1.5s or 800us")
    if m.group(2) is None:
        raise UserInputError(field, value, unit_fix(m.group(1), usual_unit),
                             "a time without a unit")
    x = float(m.group(1)) * _TIME_UNITS[m.group(2)]
    if not math.isfinite(x) or x <= 0:
        raise UserInputError(field, value, "give a finite time > 0, such as 20ms")
    return x


def unit_fix(number: object, usual_unit: str = "ms") -> str:
    """The fix for a time given without its unit: '20' -> 'write 20ms (or 20s, 20us)'."""
    text = str(number).strip()
    others = ", ".join(f"{text}{u}" for u in ("s", "ms", "us") if u != usual_unit)
    return f"write the unit: {text}{usual_unit} (or {others})"


# ----------------------------------------------------------------------------- formatting
# The one place numbers are written for people (tables, progress, plots, messages).


def format_tokens(n: int) -> str:
    """8192 -> '8K', 1048576 -> '1M', 3000 -> '3000' (powers of two, as contexts are quoted)."""
    for size, unit in ((2**30, "G"), (2**20, "M"), (2**10, "K")):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def format_seconds(x: float | None, missing: str = "-") -> str:
    """1.234 s, 14.239 ms, 812.000 us (``missing`` for None)."""
    if x is None:
        return missing
    if x >= 1:
        return f"{x:,.3f} s"
    if x >= 1e-3:
        return f"{x * 1e3:.3f} ms"
    return f"{x * 1e6:.3f} us"


def format_duration(x: float | None) -> str:
    """Latency as people say it: 14.239 ms, 12.345 s, 24.7 min, 1.5 h."""
    if x is None:
        return "-"
    if x < 60:
        return format_seconds(x)
    if x < 3600:
        return f"{x / 60:.1f} min"
    return f"{x / 3600:.1f} h"


def format_short(x: float | None) -> str:
    """Three significant figures, in the unit people use: 327 ms, 2.51 s, 24.7 min."""
    if x is None:
        return "-"
    if x >= 60:
        return format_duration(x)
    value, unit = (x, "s") if x >= 1 else (x * 1e3, "ms") if x >= 1e-3 else (x * 1e6, "us")
    return f"{value:.3g} {unit}"


def format_gb(n_bytes: float | None) -> str:
    """Bytes as GB (1e9), one decimal: 12,345.6."""
    return "-" if n_bytes is None else f"{n_bytes / 1e9:,.1f}"
