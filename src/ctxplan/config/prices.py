"""Prices per chip-hour as users give them: ``--price h200=3.5/h`` (repeatable), or a study
file's ``prices:`` mapping. ctxplan has none built in (solve/economics.py says why)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from ctxplan.config.units import list_items
from ctxplan.errors import UserInputError

# Hours per unit of a price: a chip-hour, -day, -month (730 h: 8,760 h a year over 12) or -year.
PRICE_UNITS_H = {"h": 1.0, "hr": 1.0, "hour": 1.0, "day": 24.0, "month": 730.0,
                 "year": 8760.0}
_PRICE = re.compile(r"[$€£¥]?\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*/\s*([a-z]+)")
_FIX = "give a price per chip-hour with its chip, such as h200=3.5/h (or /day, /month, /year)"

Prices = tuple[tuple[str, float], ...]   # (chip name in lower case, price per chip-hour)


def parse_price(value: object, field: str = "prices") -> float:
    """'3.5/h' -> 3.5 per chip-hour; '2555/month' -> 3.5. A bare number is refused: it could
    be per hour or per month."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise UserInputError(field, value, _FIX)
    text = str(value).strip().lower()
    m = _PRICE.fullmatch(text)
    if m is None or m.group(2) not in PRICE_UNITS_H:
        if re.fullmatch(r"[$€£¥]?\s*[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?", text):
            raise UserInputError(field, value, f"add the unit: {text}/h (per chip-hour), or "
                                 "/day, /month, /year", "a price without a unit")
        raise UserInputError(field, value, _FIX)
    price = float(m.group(1)) / PRICE_UNITS_H[m.group(2)]
    if not math.isfinite(price) or price <= 0:
        raise UserInputError(field, value, "give a price > 0, such as 3.5/h")
    return price


def parse_prices(value: object, field: str = "prices") -> Prices:
    """Prices per chip: "h200=3.5/h", "h200=3.5/h,b200=6/h", a list of such items (a repeated
    ``--price``), or a mapping {h200: 3.5/h} (study files). Chip names are matched without
    regard to case; a chip priced twice is refused. None or empty: no prices."""
    if value is None:
        return ()
    if isinstance(value, Mapping):
        pairs = [(str(k), v) for k, v in value.items()]
    else:
        pairs = []
        for item in list_items(value):
            name, eq, price = str(item).partition("=")
            if not eq or not name.strip():
                raise UserInputError(field, item, _FIX, "not CHIP=PRICE")
            pairs.append((name, price))
    out: dict[str, float] = {}
    for name, price in pairs:
        key = name.strip().lower()
        if key in out:
            raise UserInputError(field, name, f"price chip {key} once", "priced twice")
        out[key] = parse_price(price, field)
    return tuple(sorted(out.items()))


def price_of(prices: Prices, chip_name: str) -> float | None:
    """The price per chip-hour of ``chip_name``; None when not given."""
    return dict(prices).get(chip_name.lower())
