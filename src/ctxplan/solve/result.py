"""What a solve returns: every candidate looked at, the answer per phase and tier, the winner.

``SolveResult.to_dict()`` is the JSON of ``ctxplan solve --json`` (schema in docs/solver.md).
It is deterministic: no wall-clock figures, lists in search order, keys fixed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxplan.solve.sla import SLA

WALL = "capacity wall"


def latency_key(phase: str) -> str:
    return "ttft_s" if phase == "prefill" else "tpot_s"


@dataclass(frozen=True)
class Candidate:
    """One point of the search path: simulated, or cut by the capacity wall before simulating."""

    phase: str
    kv_tier: str
    n: int                    # CP degree (Np or Nd)
    tp: int
    latency_s: float | None   # TTFT or TPOT; None when not simulated
    per_chip_bytes: int
    capacity_bytes: int
    fits: bool
    meets_sla: bool
    simulated: bool           # has a simulated latency (freshly run or from the cache)
    cache_hit: bool           # the latency came from the cache, no simulation ran for it here
    cut_by: str | None        # "capacity wall" when pruned before simulation
    step: str                 # "memory" (a wall check), "wall" (the capacity minimum taken
                              # with no SLA to meet), or the search step (gallop, binary, ...)
    why: str

    @property
    def chips(self) -> int:
        return self.n * self.tp

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase, "kv_tier": self.kv_tier, "n": self.n, "tp": self.tp,
            "chips": self.chips, latency_key(self.phase): self.latency_s,
            "memory": {"per_chip_bytes": self.per_chip_bytes,
                       "capacity_bytes": self.capacity_bytes, "fits": self.fits},
            "meets_sla": self.meets_sla, "simulated": self.simulated,
            "cache_hit": self.cache_hit, "cut_by": self.cut_by, "step": self.step,
            "why": self.why,
        }


@dataclass(frozen=True)
class PhasePlan:
    """The answer of one sub-problem (prefill or decode) for one KV tier."""

    phase: str
    kv_tier: str
    tp: int
    n_cap: int | None             # the capacity wall (smallest N that fits); None: none fits
    bound_n: int
    limit_s: float | None         # the latency bound applied (None: no SLA for this phase)
    answer: int | None            # N*; None: infeasible
    latency_s: float | None       # latency at N*
    per_chip_bytes: int | None    # memory at N*
    strategy: str
    fallback: bool
    fallback_reason: str
    scanned: tuple[int, int] | None
    candidates: tuple[Candidate, ...]
    infeasible_reason: str
    ring: str | None = None       # prefill: the ring its full-attention layers use at N*

    @property
    def feasible(self) -> bool:
        return self.answer is not None

    @property
    def chips(self) -> int | None:
        return None if self.answer is None else self.answer * self.tp

    def summary(self, batch: int) -> dict[str, Any] | None:
        """The short form used at the top of the JSON ({cp, tp, chips, ttft_s / tpot_s ...})."""
        if self.answer is None:
            return None
        d: dict[str, Any] = {"cp": self.answer, "tp": self.tp, "chips": self.chips,
                             latency_key(self.phase): self.latency_s}
        if self.phase == "decode" and self.latency_s:
            d["tps_per_seq"] = 1.0 / self.latency_s
            d["tps_per_batch"] = batch / self.latency_s
        d["n_cap"] = self.n_cap
        d["per_chip_bytes"] = self.per_chip_bytes
        if self.phase == "prefill":
            d["ring"] = self.ring
        return d

    def to_dict(self, batch: int) -> dict[str, Any]:
        return {
            "feasible": self.feasible, "answer": self.summary(batch), "n_cap": self.n_cap,
            "bound_n": self.bound_n, "limit_s": self.limit_s, "strategy": self.strategy,
            "fallback": self.fallback, "fallback_reason": self.fallback_reason,
            "scanned": list(self.scanned) if self.scanned else None,
            "simulated_points": sum(1 for c in self.candidates if c.simulated),
            "infeasible_reason": self.infeasible_reason,
        }


@dataclass(frozen=True)
class TierPlan:
    """Prefill and decode for one KV tier: N = Np + Nd (chips = Np*tp_p + Nd*tp_d)."""

    kv_tier: str
    c_kv_bytes: int
    prefill: PhasePlan
    decode: PhasePlan

    @property
    def feasible(self) -> bool:
        return self.prefill.feasible and self.decode.feasible

    @property
    def total_chips(self) -> int | None:
        if not self.feasible:
            return None
        return (self.prefill.chips or 0) + (self.decode.chips or 0)

    @property
    def infeasible_reason(self) -> str:
        return "; ".join(r for r in (self.prefill.infeasible_reason,
                                     self.decode.infeasible_reason) if r)

    def rank(self) -> tuple[float, float, float]:
        """Fewest chips, then lower TPOT, then lower TTFT (the composition's order)."""
        inf = float("inf")
        return (self.total_chips or inf, self.decode.latency_s or inf,
                self.prefill.latency_s or inf)

    def to_dict(self, batch: int) -> dict[str, Any]:
        return {
            "kv_tier": self.kv_tier, "c_kv_bytes": self.c_kv_bytes, "feasible": self.feasible,
            "total_chips": self.total_chips, "prefill": self.prefill.to_dict(batch),
            "decode": self.decode.to_dict(batch), "infeasible_reason": self.infeasible_reason,
        }


@dataclass(frozen=True)
class SolveResult:
    context_length: int
    model: str
    chip: str
    cluster: str
    batch: int
    sla: SLA
    strategy: str
    candidate_set: str
    group_size: int
    max_chips: int
    tiers: tuple[TierPlan, ...]
    best: TierPlan | None         # the winning tier; None when no tier is feasible
    sim_calls: int                # simulations run by this solve
    cache_hits: int               # evaluations answered by the cache
    cached_fraction: float = 0.0  # prefill sized for new tokens S - floor(F S)
    prefill_ring: str = "pass-kv"  # asked for: pass-kv, pass-q or auto

    @property
    def feasible(self) -> bool:
        return self.best is not None

    @property
    def total_chips(self) -> int | None:
        return self.best.total_chips if self.best else None

    @property
    def fallback(self) -> bool:
        return any(t.prefill.fallback or t.decode.fallback for t in self.tiers)

    @property
    def infeasible_reason(self) -> str:
        if self.best is not None:
            return ""
        return "; ".join(f"{t.kv_tier}: {t.infeasible_reason}" for t in self.tiers)

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        return tuple(c for t in self.tiers for c in (*t.prefill.candidates, *t.decode.candidates))

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "context_length": self.context_length,
            "model": self.model,
            "chip": self.chip,
            "cluster": self.cluster,
            "batch": self.batch,
            "feasible": self.feasible,
            "total_chips": self.total_chips,
            "kv_tier": best.kv_tier if best else None,
            "prefill": best.prefill.summary(self.batch) if best else None,
            "decode": best.decode.summary(self.batch) if best else None,
            "sla": self.sla.to_dict(self.batch),
            "strategy": self.strategy,
            "candidate_set": self.candidate_set,
            "group_size": self.group_size,
            "max_chips": self.max_chips,
            "cached_fraction": self.cached_fraction,
            "prefill_ring": self.prefill_ring,
            "sim_calls": self.sim_calls,
            "cache_hits": self.cache_hits,
            "fallback": self.fallback,
            "infeasible_reason": self.infeasible_reason or None,
            "tiers": [t.to_dict(self.batch) for t in self.tiers],
            "candidates": [c.to_dict() for c in self.candidates],
        }
