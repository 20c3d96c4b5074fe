"""What a sensitivity study returns: the base plan, and per figure and step the plan and the
latencies with that figure moved. ``SensitivityStudy.to_dict()`` is the JSON of
``ctxplan sensitivity --json`` (keys in docs/sensitivity.md); deterministic."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ctxplan.solve import SolveResult


@dataclass(frozen=True)
class Outcome:
    """A solve, in short: N*, the plan, and the TTFT / TPOT it measured."""

    feasible: bool
    total_chips: int | None
    kv_tier: str | None
    prefill_cp: int | None
    prefill_tp: int | None
    decode_cp: int | None
    decode_tp: int | None
    ttft_s: float | None
    tpot_s: float | None
    reason: str

    @classmethod
    def of(cls, r: SolveResult) -> Outcome:
        b = r.best
        if b is None:
            return cls(False, None, None, None, None, None, None, None, None,
                       r.infeasible_reason)
        return cls(True, b.total_chips, b.kv_tier, b.prefill.answer, b.prefill.tp,
                   b.decode.answer, b.decode.tp, b.prefill.latency_s, b.decode.latency_s, "")

    def to_dict(self) -> dict[str, Any]:
        return {"feasible": self.feasible, "total_chips": self.total_chips,
                "kv_tier": self.kv_tier,
                "prefill": None if self.prefill_cp is None else {
                    "cp": self.prefill_cp, "tp": self.prefill_tp, "ttft_s": self.ttft_s},
                "decode": None if self.decode_cp is None else {
                    "cp": self.decode_cp, "tp": self.decode_tp, "tpot_s": self.tpot_s},
                "reason": self.reason or None}


@dataclass(frozen=True)
class Move:
    """One figure moved by one step."""

    factor: float
    value: float | None              # the moved figure (None: the move is not valid)
    outcome: Outcome | None          # the solve with it (None: not valid)
    base_plan_ttft_s: float | None   # the base plan's TTFT / TPOT with the figure moved
    base_plan_tpot_s: float | None   # (None: the base plan no longer fits)
    reason: str = ""                 # why the move is not valid

    def to_dict(self) -> dict[str, Any]:
        return {"step": round(self.factor - 1.0, 12), "factor": self.factor,
                "value": self.value,
                "solve": None if self.outcome is None else self.outcome.to_dict(),
                "base_plan": {"ttft_s": self.base_plan_ttft_s,
                              "tpot_s": self.base_plan_tpot_s},
                "reason": self.reason or None}


def _relative(new: float | None, old: float | None) -> float | None:
    if new is None or old is None or old == 0:
        return None
    return new / old - 1.0


@dataclass(frozen=True)
class FigureRow:
    """A figure and what each step of it does."""

    figure: str
    value: float                     # the preset's (or the SLA's) value
    moves: tuple[Move, ...]

    def chips_change(self, base: Outcome, move: Move) -> float | None:
        """N* with the move minus the base N* (inf when the move makes it infeasible)."""
        if move.outcome is None:
            return None
        if not move.outcome.feasible or not base.feasible:
            return math.inf if base.feasible else (-math.inf if move.outcome.feasible else 0)
        return float((move.outcome.total_chips or 0) - (base.total_chips or 0))

    def effect(self, base: Outcome) -> tuple[float, float, float]:
        """How much the answer hinges on this figure: the largest change of N*, then of the
        base plan's TPOT, then of its TTFT (relative) over the steps."""
        chips = [abs(c) for m in self.moves if (c := self.chips_change(base, m)) is not None]
        tpot = [abs(x) for m in self.moves
                if (x := _relative(m.base_plan_tpot_s, base.tpot_s)) is not None]
        ttft = [abs(x) for m in self.moves
                if (x := _relative(m.base_plan_ttft_s, base.ttft_s)) is not None]
        return (max(chips, default=0.0), max(tpot, default=0.0), max(ttft, default=0.0))

    def to_dict(self, base: Outcome) -> dict[str, Any]:
        chips, tpot, ttft = self.effect(base)
        return {"figure": self.figure, "value": self.value,
                "effect": {"chips": _finite(chips), "tpot": tpot, "ttft": ttft},
                "moves": [m.to_dict() for m in self.moves]}


def _finite(x: float) -> float | str:
    return x if math.isfinite(x) else "infeasible"


@dataclass(frozen=True)
class SensitivityStudy:
    model: str
    chip: str
    cluster: str
    context_length: int
    factors: tuple[float, ...]
    base: Outcome
    rows: tuple[FigureRow, ...]      # sorted by effect, largest first
    sim_calls: int
    cache_hits: int
    earlier_run_hits: int = 0        # of cache_hits, from earlier runs' results
    warnings: tuple[str, ...] = ()   # the base solve's (ctxplan.run_warnings)
    decode_chip: str = ""            # the decode pool's own ("": chip / cluster's)
    decode_cluster: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "chip": self.chip, "cluster": self.cluster,
                "decode_chip": self.decode_chip or self.chip,
                "decode_cluster": self.decode_cluster or self.cluster,
                "context_length": self.context_length,
                "steps": [round(f - 1.0, 12) for f in self.factors],
                "base": self.base.to_dict(),
                "figures": [r.to_dict(self.base) for r in self.rows],
                "sim_calls": self.sim_calls, "cache_hits": self.cache_hits,
                "earlier_run_hits": self.earlier_run_hits, "warnings": list(self.warnings)}
