"""Checks of single option values as files and ``--set`` give them (before pydantic's type check).

Each takes the raw value, returns it (normalised where said) or raises ``ValueError`` with the fix;
:func:`ctxplan.config.loader.validate` turns that into one line naming the field. Unions are
checked here rather than by pydantic so a wrong value gets one readable message, not one per
union member.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxplan.config.units import parse_seconds, parse_tokens
from ctxplan.errors import UserInputError

MAX_CONTEXT = 2**31          # the mapping layer's bound on S (mapping/layout.py)
MAX_CONTEXTS = 256           # context lengths in one study
DEFAULT_TIERS = "default"    # kv_tiers: default / kv_tier: default: the model's own choice


def definition(what: str, *, optional: bool = False) -> Callable[[Any], Any]:
    """A preset name, a path, or an inline mapping of a model / chip / cluster."""

    def check(value: Any) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, str):
            if not value.strip():
                raise ValueError(f"give a {what} preset name, a path, or an inline definition")
            return value
        if isinstance(value, dict):
            bad = [k for k in value if not isinstance(k, str)]
            if bad:
                raise ValueError(f"inline {what} keys must be field names; {bad[0]!r} is not")
            return value
        raise ValueError(f"give a {what} preset name, the path of a {what} file, or an inline "
                         f"{what} definition (a mapping of its fields)")

    return check


def definitions(what: str) -> Callable[[Any], Any]:
    """One definition (as :func:`definition`) or a non-empty list of them."""
    one = definition(what)

    def check(value: Any) -> Any:
        if isinstance(value, list):
            if not value:
                raise ValueError(f"give at least one {what}")
            return [one(v) for v in value]
        return one(value)

    return check


def tokens(value: Any) -> int:
    """A context length: 8K, 1M, 3000 (at most 2^31)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("give a token count such as 8K, 128K, 1M or 3000")
    try:
        n = parse_tokens(value)
    except UserInputError as exc:
        raise ValueError(exc.fix) from None
    if n > MAX_CONTEXT:
        raise ValueError("give a context length of at most 2G tokens (2^31)")
    return n


def cached_tokens(value: Any) -> Any:
    """A cached prefix: 0, or a token count such as 120K (its bound, below S, is checked with
    the context)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("give a token count such as 120K, or 0 for none")
    if value == 0 or (isinstance(value, str) and value.strip() == "0"):
        return 0
    return tokens(value)


def contexts(value: Any) -> list[int]:
    """One context length, a list, or "8K,128K,1M"."""
    items = [p for p in value.split(",") if p.strip()] if isinstance(value, str) else value
    if not isinstance(items, list):
        items = [items]
    if not items:
        raise ValueError("give at least one context length, e.g. [128K, 1M]")
    if len(items) > MAX_CONTEXTS:
        raise ValueError(f"give at most {MAX_CONTEXTS} context lengths")
    return [tokens(x) for x in items]


def time(*, optional: bool) -> Callable[[Any], Any]:
    """A time: 20ms, 1.5s, 800us, or a number of seconds."""

    def check(value: Any) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError("give a time such as 20ms, 1.5s or 800us")
        try:
            parse_seconds(value, "time")
        except UserInputError as exc:
            raise ValueError(exc.fix) from None
        return float(value) if isinstance(value, int) else value

    return check


def tier(value: Any) -> Any:
    """A KV tier name, bytes per token per layer, or 'default'."""
    if isinstance(value, bool) or not isinstance(value, int | str) or (
            isinstance(value, str) and not value.strip()):
        raise ValueError("give a KV tier name (e.g. mla-bf16, kv-fp8), a whole number of bytes "
                         "per token per layer, or 'default' for the model's own")
    return value


def tiers(value: Any) -> Any:
    """A list of KV tiers ("mla-bf16,mla-fp8" too), or 'default' for the model's."""
    if isinstance(value, str) and value.strip().lower() == DEFAULT_TIERS:
        return DEFAULT_TIERS
    items = [p.strip() for p in value.split(",") if p.strip()] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise ValueError("give a list of KV tiers, e.g. [mla-bf16, mla-fp8], or 'default'")
    return [tier(x) for x in items]


def tier_or_default(value: Any) -> Any:
    """A file's kv_tier as the API takes it: 'default' -> None (the model's first tier)."""
    return None if isinstance(value, str) and value.strip().lower() == DEFAULT_TIERS else value


def tiers_or_default(value: Any) -> tuple[Any, ...]:
    """A file's kv_tiers as the API takes it: 'default' -> () (the model's default tiers)."""
    return () if value == DEFAULT_TIERS else tuple(value)
