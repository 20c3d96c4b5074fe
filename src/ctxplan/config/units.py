"""Parsing the sizes, times and rates users type: 8K / 128K / 1M tokens, 20ms / 1.5s / 800us,
0.2/s / 12/min arrival rates, 128K:0.7,1M:0.3 context mixes."""

from __future__ import annotations

import math
import re

from ctxplan.errors import UserInputError

# Token counts use powers of two, as context lengths are quoted: 1K = 1024, 1M = 1,048,576.
_TOKEN_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}
_TIME_UNITS = {"h": 3600.0, "min": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6,
               "ns": 1e-9}
_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
TIME_UNITS = "h, min, s, ms, us, ns"   # what a time may be written in (the keys above)


def parse_tokens(value: str | int, field: str = "context_length") -> int:
    """'8K' -> 8192, '1M' -> 1048576, '3000' -> 3000. Whole numbers >= 1 only."""
    if isinstance(value, bool):
        raise UserInputError(field, value, "give a token count such as 8K, 128K or 1M")
    if isinstance(value, int):
        n = value
    elif "," in str(value):
        first = str(value).split(",")[0].strip()
        raise UserInputError(field, value, f"give one context length, such as {first}; to "
                             f"solve each of several, run ctxplan sweep --context {value}",
                             "a list of context lengths")
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
    """'20ms' -> 0.02, '1.5s' -> 1.5, '800us' -> 8e-4, '30min' -> 1800, '1h' -> 3600. Must be
    > 0 and carry its unit.

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
    m = re.fullmatch(_NUMBER + r"\s*(h|min|s|ms|us|µs|ns)?", str(value).strip())
    if not m:
        other = re.fullmatch(_NUMBER + r"\s*([^\s\d.]+)", str(value).strip())
        if other:   # a number with a word that is no unit of time: "20m", "5 sec"
            n, unit = other.groups()
            raise UserInputError(field, value, f"write it with one of the units {TIME_UNITS}, "
                                 f"e.g. {n}ms for milliseconds or {n}min for minutes",
                                 f"'{unit}' is not a unit of time")
        raise UserInputError(field, value, "give a time such as 20ms, 1.5s, 800us or 30min")
    if m.group(2) is None:
        raise UserInputError(field, value, unit_fix(m.group(1), usual_unit),
                             "a time without a unit")
    x = float(m.group(1)) * _TIME_UNITS[m.group(2)]
    if not math.isfinite(x) or x <= 0:
        raise UserInputError(field, value, "give a finite time > 0, such as 20ms")
    return x


_RATE_UNITS = {"s": 1.0, "sec": 1.0, "min": 1 / 60, "h": 1 / 3600, "hr": 1 / 3600}
MAX_SHARE_ERROR = 1e-6   # shares of a context mix must sum to 1 within this


def parse_rate(value: str | float | int, field: str = "rates") -> float:
    """'0.2/s' -> 0.2, '12/min' -> 0.2, '720/h' -> 0.2 requests per second; a Python number is
    requests per second. A string needs its unit ("/s"): a bare 0.2 could be per second or per
    minute. Must be finite and > 0."""
    fix = "give a rate with its unit, such as 0.2/s, 12/min or 720/h"
    if isinstance(value, bool):
        raise UserInputError(field, value, fix)
    if isinstance(value, int | float):
        x = float(value)
    else:
        text = str(value).strip()
        m = re.fullmatch(r"([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*/\s*([a-z]+)",
                         text.lower())
        if not m or m.group(2) not in _RATE_UNITS:
            if re.fullmatch(_NUMBER, text):
                raise UserInputError(field, value, f"add the unit: {text}/s (requests per "
                                     "second), or /min, /h", "a rate without a unit")
            raise UserInputError(field, value, fix)
        x = float(m.group(1)) * _RATE_UNITS[m.group(2)]
    if not math.isfinite(x) or x <= 0:
        raise UserInputError(field, value, "give an arrival rate > 0, such as 0.2/s",
                             "not a positive rate")
    return x


def list_items(value: object) -> list[object]:
    """The items of a list option: "a,b" split at commas (blank items dropped, each stripped),
    a list or tuple as it is, anything else as one item."""
    if isinstance(value, str):
        return [p.strip() for p in value.split(",") if p.strip()]
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


def parse_rate_list(value: object, field: str = "rates") -> list[float]:
    """'0.05/s,0.2/s' or a list of rates -> requests per second, in the order given."""
    items = list_items(value)
    if not items:
        raise UserInputError(field, value, "give at least one rate, e.g. 0.2/s or "
                             "0.05/s,0.2/s,0.5/s")
    out = []
    for v in items:
        if not isinstance(v, str | int | float):
            raise UserInputError(field, value, "give rates such as 0.2/s or 0.05/s,0.2/s")
        out.append(parse_rate(v, field))
    return out


def parse_context_mix(value: object, field: str = "contexts") -> list[tuple[int, float]]:
    """'128K:0.7,1M:0.3' -> [(131072, 0.7), (1048576, 0.3)]; '128K' -> [(131072, 1.0)].
    Also a mapping {128K: 0.7, 1M: 0.3} or a list of "128K:0.7" items (files). Each share is
    > 0, no length twice, and the shares sum to 1."""
    items = ([f"{k}:{v}" for k, v in value.items()] if isinstance(value, dict)
             else list_items(value))
    if not items:
        raise UserInputError(field, value, "give context lengths with their shares, such as "
                             "128K:0.7,1M:0.3 (or one length, 128K)")
    out: list[tuple[int, float]] = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool):
            length_text, share_text = str(item), None
        else:
            length_text, sep, share_text_ = str(item).partition(":")
            share_text = share_text_ if sep else None
        length = parse_tokens(length_text.strip(), field)
        if share_text is None:
            if len(items) > 1:
                raise UserInputError(field, value, f"give each length its share, e.g. "
                                     f"{length_text.strip()}:0.5", "a length without a share")
            share = 1.0
        else:
            try:
                share = float(share_text)
            except ValueError:
                raise UserInputError(field, value, "write each share as a fraction, e.g. "
                                     "128K:0.7,1M:0.3", f"share {share_text!r} is not a "
                                     "number") from None
            if not math.isfinite(share) or not 0 < share <= 1:
                raise UserInputError(field, value, "give each share in (0, 1]; drop a length "
                                     "that has no requests", f"share {share_text.strip()}")
        if any(length == seen for seen, _ in out):
            raise UserInputError(field, value, "give each context length once",
                                 f"{length_text.strip()} appears twice")
        out.append((length, share))
    total = math.fsum(s for _, s in out)
    if abs(total - 1.0) > MAX_SHARE_ERROR:
        raise UserInputError(field, value, "make the shares sum to 1, e.g. 128K:0.7,1M:0.3",
                             f"shares sum to {total:g}")
    return out


def parse_steps(value: object) -> tuple[float, ...]:
    """Relative steps: "-25%,-10%,+10%,+25%" (or numbers, as fractions: -0.25, 0.1) ->
    factors 0.75, 0.9, 1.1, 1.25, in increasing order."""
    items = list_items(value)
    if not items:
        raise UserInputError("steps", value, "give steps such as -25%,-10%,+10%,+25%")
    factors = []
    for item in items:
        if isinstance(item, bool):
            raise UserInputError("steps", item, "give steps such as -25%,-10%,+10%,+25%")
        if isinstance(item, int | float):
            step = float(item)
        else:
            text = str(item).strip()
            if not text.endswith("%"):
                raise UserInputError("steps", item, f"write it as a percentage, e.g. {text}%",
                                     "a step without %")
            try:
                step = float(text[:-1]) / 100.0
            except ValueError:
                raise UserInputError("steps", item, "give steps such as -25%,-10%,+10%,+25%"
                                     ) from None
        if not math.isfinite(step) or step <= -1.0 or step == 0.0 or step > 100.0:
            raise UserInputError("steps", item, "give steps above -100 % and not 0, such as "
                                 "-25% or +10%", "not a perturbation")
        factors.append(1.0 + step)
    return tuple(sorted(set(factors)))


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


def format_count(n: int | None, noun: str, plural: str | None = None) -> str:
    """'1 chip', '2 chips', '1,024 chips' ('-' for None)."""
    if n is None:
        return "-"
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


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
    return f"{value:#.3g}".rstrip(".") + f" {unit}"   # 21.0 s: the third figure is kept


def format_rate(per_s: float) -> str:
    """Requests per second as typed: 0.2/s, 0.05/s (the shortest exact form)."""
    return f"{per_s:g}/s"


def format_throughput(x: float | None) -> str:
    """Tokens per second to three figures, never in e-notation (1,684 not 1.68e+03)."""
    if x is None:
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def format_gb(n_bytes: float | None) -> str:
    """Bytes as GB (1e9), one decimal: 12,345.6."""
    return "-" if n_bytes is None else f"{n_bytes / 1e9:,.1f}"


def format_bytes(n_bytes: float | None) -> str:
    """Bytes in the unit that keeps them readable (decimal, as link and memory figures are
    quoted): 512 B, 3.1 KB, 187.5 MB, 9.2 GB, 1.4 TB."""
    if n_bytes is None:
        return "-"
    for size, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
        if abs(n_bytes) >= size:
            return f"{n_bytes / size:,.1f} {unit}"
    return f"{n_bytes:,.0f} B"
