"""Checks of single option values, as files, ``--set`` and the Python API give them.

Each takes the raw value, returns it (normalised where said) or raises ``ValueError`` with the fix;
:func:`ctxplan.config.loader.validate` (files, before pydantic's type check) and :func:`checked`
(the API, through ``ctxplan.config.options.complete_checked``) turn that into one line naming the
field. An option declares its check once (``Opt.check``), so a file and a keyword argument are
refused with the same words. Unions are checked here rather than by pydantic so a wrong value
gets one readable message, not one per union member.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ctxplan.config.prices import parse_prices
from ctxplan.config.units import (
    parse_context_mix,
    parse_rate_list,
    parse_seconds,
    parse_steps,
    parse_tokens,
)
from ctxplan.errors import UserInputError
from ctxplan.policy import DEFAULT_EVENT_LIMIT

MAX_CONTEXT = 2**31          # the mapping layer's bound on S (config/checks.py)
MAX_CONTEXTS = 256           # context lengths in one study
DEFAULT_TIERS = "default"    # kv_tiers: default / kv_tier: default: the model's own choice
AUTO = "auto"                # prefill_tp / decode_tp / batch: searched by the solver
MAX_BATCH = 2**20            # the mapping layer's bound on the batch (config/checks.py)


class InvalidValue(ValueError):
    """A check's refusal: the fix (its text), and what is wrong when there is more to say."""

    def __init__(self, fix: str, problem: str = "invalid value") -> None:
        super().__init__(fix)
        self.problem = problem


def _parses(parse: Callable[..., Any], value: Any, *args: Any) -> Any:
    """``parse(value, *args)`` (a parser of config.units), its UserInputError as the
    InvalidValue a check raises: the problem and the fix, the field named by the caller."""
    try:
        return parse(value, *args)
    except UserInputError as exc:
        raise InvalidValue(exc.fix, exc.problem) from None


def checked(field: str, value: Any, check: Callable[[Any], Any]) -> Any:
    """``check(value)``, its ``ValueError`` as the ``UserInputError`` naming ``field``."""
    try:
        return check(value)
    except ValueError as exc:
        problem = exc.problem if isinstance(exc, InvalidValue) else "invalid value"
        raise UserInputError(field, value, str(exc), problem) from None


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
    n = _parses(parse_tokens, value)
    if n > MAX_CONTEXT:
        raise ValueError("give a context length of at most 2G tokens (2^31)")
    return n


def output_tokens(value: Any) -> int:
    """Output tokens per request: 1000, 1K (at least 2: the first comes from prefill)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("give a token count such as 1000 or 1K")
    n = _parses(parse_tokens, value)
    if n < 2:
        raise ValueError("give at least 2 output tokens (the first comes from prefill; TPOT is "
                         "measured over the rest)")
    return n


def cached_tokens(value: Any) -> Any:
    """A cached prefix: 0, or a token count such as 120K (its bound, below S, is checked with
    the context)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("give a token count such as 120K, or 0 for none")
    if value == 0 or (isinstance(value, str) and value.strip() == "0"):
        return 0
    return tokens(value)


def prefill_chunk(value: Any) -> int | str:
    """A chunked prefill's chunk: "auto", "off", "dynamic", or a token count such as 16K (at
    least 1)."""
    if isinstance(value, str) and value.strip().lower() in ("auto", "off", "dynamic"):
        return value.strip().lower()
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("give a chunk size such as 16K, or auto, dynamic or off")
    try:
        n = _parses(parse_tokens, value)
    except InvalidValue:
        n = 0
    if n < 1:
        raise ValueError("give a chunk of at least 1 token such as 16K, or auto, dynamic or "
                         "off")
    return int(n)


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


def time(*, optional: bool, usual_unit: str = "ms") -> Callable[[Any], Any]:
    """A time with its unit: 20ms, 1.5s, 800us. A bare number is refused (issue 13: 20 read as
    seconds when 20 ms were meant is a 1000x trap); the fix writes it with ``usual_unit``."""

    def check(value: Any) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError("give a time such as 20ms, 1.5s or 800us")
        _parses(parse_seconds, value, "time", usual_unit)
        return value

    return check


def fraction(value: Any) -> Any:
    """A fraction in (0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not 0 < value <= 1:
        raise ValueError("give a fraction > 0 and <= 1, e.g. 0.9 to keep 10 % of the memory "
                         "after the reserve free")
    return float(value)


def bandwidth_gbps(value: Any) -> Any:
    """A bandwidth in GB/s, finite and > 0, or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not 0 < value < float("inf"):
        raise ValueError("give GB/s per chip per direction, a number > 0, e.g. 50 for a "
                         "400 Gb/s NIC per chip")
    return float(value)


def acceptance(value: Any) -> Any:
    """A draft token's acceptance rate in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError("give the share of draft tokens accepted, 0 to 1, e.g. 0.85")
    return float(value)


def _whole_text(value: Any) -> Any:
    """'4' -> 4: the command line passes a number-or-auto option as text."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return value


def _degree_or_auto(value: Any, what: str) -> Any:
    """A parallel degree (a whole number >= 1) or 'auto' (searched); ``what`` counts it."""
    value = _whole_text(value)
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"give a whole number of {what} >= 1, or 'auto' to search it")
    return value


def tp_choice(value: Any) -> Any:
    """A TP degree (a whole number >= 1) or 'auto' (searched)."""
    return _degree_or_auto(value, "chips per rank")


def pp_choice(value: Any) -> Any:
    """A pipeline depth (a whole number >= 1) or 'auto' (searched)."""
    return _degree_or_auto(value, "pipeline stages")


def dp_choice(value: Any) -> Any:
    """A DP degree (a whole number >= 1) or 'auto' (searched)."""
    return _degree_or_auto(value, "DP ranks")


def batch_choice(value: Any) -> Any:
    """A batch (a whole number in [1, 2^20]) or 'auto' (the largest meeting the TPOT SLA)."""
    value = _whole_text(value)
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BATCH:
        raise ValueError(f"give a whole number of sequences in [1, {MAX_BATCH:,}], or 'auto' "
                         "to search the largest that meets the TPOT SLA")
    return value


def event_limit(value: Any) -> int:
    """A simulation's event limit: a whole number >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"give a whole number of events >= 1 (default {DEFAULT_EVENT_LIMIT:,})")
    return value


_SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def host_memory_budget(value: Any) -> int | str:
    """The simulator's own memory budget: "auto" or a size with its unit (2GiB, 1.5GB, 800MB)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    text = value.strip().lower().replace(" ", "") if isinstance(value, str) else ""
    match = re.fullmatch(r"([0-9]*\.?[0-9]+)([kmgt]i?b|b)", text)
    if not match or float(match.group(1)) <= 0:
        raise ValueError("give a size with its unit such as 2GiB, 1.5GB or 800MB, or auto "
                         "(the lower of 2 GiB and half of this machine's memory)")
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2)])


def tier(value: Any) -> Any:
    """A KV tier name, bytes per token per layer, or 'default'."""
    if isinstance(value, bool) or not isinstance(value, int | str) or (
            isinstance(value, str) and not value.strip()):
        raise ValueError("give a KV tier name (e.g. mla-bf16, kv-fp8), a whole number of bytes "
                         "per token per layer, or 'default' for the model's own")
    return value


def tiers(value: Any) -> Any:
    """A list of KV tiers ("mla-bf16,mla-fp8" too), or 'default' for the model's."""
    if (isinstance(value, str) and value.strip().lower() == DEFAULT_TIERS) or value == ():
        return DEFAULT_TIERS   # () is the API's spelling of 'default'
    items = [p.strip() for p in value.split(",") if p.strip()] if isinstance(value, str) else value
    if isinstance(items, tuple):
        items = list(items)
    if not isinstance(items, list) or not items:
        raise ValueError("give a list of KV tiers, e.g. [mla-bf16, mla-fp8], or 'default'")
    return [tier(x) for x in items]


def tier_or_default(value: Any) -> Any:
    """A file's kv_tier as the API takes it: 'default' -> None (the model's first tier)."""
    return None if isinstance(value, str) and value.strip().lower() == DEFAULT_TIERS else value


def tiers_or_default(value: Any) -> tuple[Any, ...]:
    """A file's kv_tiers as the API takes it: 'default' -> () (the model's default tiers)."""
    return () if value == DEFAULT_TIERS else tuple(value)


def _optional_list(value: Any, types: Any, example: str, parse: Callable[..., Any],
                   field: str) -> Any:
    """None, or a value of ``types`` that ``parse`` reads (refused with ``example``)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, types):
        raise ValueError(example)
    _parses(parse, value, field)
    return value


def rates(value: Any) -> Any:
    """Arrival rates: "0.2/s", "0.05/s,0.2/s", a list of them (a number is per second)."""
    return _optional_list(value, int | float | str | list, "give arrival rates such as 0.2/s "
                          "or [0.05/s, 0.2/s]", parse_rate_list, "rates")


def prices(value: Any) -> Any:
    """Prices per chip-hour: "h200=3.5/h", a list of such items, or a mapping {h200: 3.5/h}."""
    return _optional_list(value, str | list | dict, "give prices such as h200=3.5/h or "
                          "{h200: 3.5/h}", parse_prices, "prices")


def context_mix(value: Any) -> Any:
    """Context lengths with shares: "128K:0.7,1M:0.3", a list of such items, or a mapping."""
    value = _optional_list(value, int | str | list | dict, "give context lengths with shares, "
                           "e.g. 128K:0.7,1M:0.3", parse_context_mix, "contexts")
    return str(value) if isinstance(value, int) else value


def percentile(value: Any) -> Any:
    """A percentile strictly between 0 and 100."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 100:
        raise ValueError("give a percentile strictly between 0 and 100, such as 90 or 99")
    return float(value)


def steps(value: Any) -> Any:
    """Relative steps: "-25%,-10%,+10%,+25%" or a list of them."""
    if isinstance(value, bool) or not isinstance(value, str | list):
        raise ValueError("give steps such as -25%,-10%,+10%,+25%")
    _parses(parse_steps, value)
    return value
