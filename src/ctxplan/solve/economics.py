"""Power and cost of a plan, from the chip's TDP and from prices the user gives.

ctxplan has no built-in prices: what a chip-hour costs depends on who buys it, when and how
(list, reserved, spot), so a cost figure exists only where ``--price CHIP=PRICE/h`` (or a study
file's ``prices:``) names the plan's chip. Power comes from the chip's ``tdp_w`` (every preset
states it with its source); a chip file without one gives "unknown".

The figures (docs/solver.md, "Power and cost"):

    watts                   = chips x tdp_w   (per pool, each at its chip's, with --decode-chip)
    joules_per_token        = watts / decode tokens/s           (tokens/s = batch / TPOT)
    cost_per_hour           = chips x price per chip-hour
    cost_per_million_tokens = cost_per_hour / (decode tokens/s x 3600) x 10^6

``chips`` is the whole plan (prefill and decode pools), as in tokens/s per chip. TDP is the
board's rated maximum, so ``watts`` is what the plan's chips may draw at most, not a measured
draw; hosts' CPUs, NICs, switches and cooling are not counted (no PUE applied). The decode rate
is the plan's token output while its decode pool is full at its batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PlanEconomics:
    """Power and cost of a plan of ``chips`` chips that decodes ``tokens_per_s``."""

    chips: int
    tokens_per_s: float | None        # decode tokens/s of the plan (batch / TPOT)
    tdp_w: float | None               # per chip; None: the chip file states none
    price_per_chip_hour: float | None  # None: no price given for the chip
    # A decode pool on another chip (solve --decode-chip): how many of ``chips`` are its,
    # and its chip's TDP and price; 0: every chip is the one above.
    decode_chips: int = 0
    decode_tdp_w: float | None = None
    decode_price_per_chip_hour: float | None = None

    def _sum(self, each: float | None, decode_each: float | None) -> float | None:
        if each is None or (self.decode_chips and decode_each is None):
            return None
        return (self.chips - self.decode_chips) * each + \
            (self.decode_chips * decode_each if self.decode_chips and decode_each else 0.0)

    @property
    def watts(self) -> float | None:
        return self._sum(self.tdp_w, self.decode_tdp_w)

    @property
    def joules_per_token(self) -> float | None:
        w = self.watts
        return None if w is None or not self.tokens_per_s else w / self.tokens_per_s

    @property
    def cost_per_hour(self) -> float | None:
        return self._sum(self.price_per_chip_hour, self.decode_price_per_chip_hour)

    @property
    def cost_per_million_tokens(self) -> float | None:
        c = self.cost_per_hour
        if c is None or not self.tokens_per_s:
            return None
        return c / (self.tokens_per_s * 3600.0) * 1e6

    def to_dict(self) -> dict[str, Any]:
        return {"watts": self.watts, "joules_per_token": self.joules_per_token,
                "tdp_w": self.tdp_w, "cost_per_hour": self.cost_per_hour,
                "cost_per_million_tokens": self.cost_per_million_tokens,
                "price_per_chip_hour": self.price_per_chip_hour,
                **({"decode_tdp_w": self.decode_tdp_w, "decode_price_per_chip_hour":
                    self.decode_price_per_chip_hour} if self.decode_chips else {})}


def economics_dict(e: PlanEconomics | None) -> dict[str, Any]:
    """A plan's power and cost figures for its JSON (None: unknown, or no plan)."""
    if e is not None:
        return e.to_dict()
    return dict.fromkeys(("watts", "joules_per_token", "tdp_w", "cost_per_hour",
                          "cost_per_million_tokens", "price_per_chip_hour"))
