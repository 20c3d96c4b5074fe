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
                              # with no SLA to meet), the search step (gallop, binary, ...),
                              # or "handoff" (the pair check of solve/handoff.py)
    why: str
    handoff_to: int | None = None   # a pair check: the decode pool's CP degree (Nd)

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
            **({} if self.handoff_to is None else {"handoff_to": self.handoff_to}),
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
class HandoffCheck:
    """The KV handoff of a tier's pair of pools (solve/handoff.py, docs/handoff.md)."""

    mode: str                     # "streamed" | "after"
    simulated: bool               # False: the pools do not fit one cluster together
    prefill_s: float | None       # the prefill alone, in the pair's simulation
    handoff_s: float | None       # the part of the handoff not hidden behind it
    ttft_s: float | None          # prefill + unhidden handoff: what the TTFT target covers
    bytes_moved: int | None
    decode_kv_bytes: int | None   # what the decode pool keeps (== bytes_moved)
    stepped: str                  # "" (the per-pool answers met it), "prefill" or "decode"
    from_pair: tuple[int, int]    # (Np, Nd) the per-pool searches gave
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "simulated": self.simulated, "prefill_s": self.prefill_s,
                "handoff_s": self.handoff_s, "ttft_s": self.ttft_s,
                "bytes_moved": self.bytes_moved, "decode_kv_bytes": self.decode_kv_bytes,
                "stepped": self.stepped or None, "from": {"prefill_cp": self.from_pair[0],
                                                         "decode_cp": self.from_pair[1]},
                "reason": self.reason or None}


@dataclass(frozen=True)
class TierPlan:
    """Prefill and decode for one KV tier: N = Np + Nd (chips = Np*tp_p + Nd*tp_d)."""

    kv_tier: str
    c_kv_bytes: int
    prefill: PhasePlan
    decode: PhasePlan
    handoff: HandoffCheck | None = None   # None: --kv-handoff off, or a pool infeasible

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
            "handoff": None if self.handoff is None else self.handoff.to_dict(),
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
            "prefill": _with_handoff(best.prefill.summary(self.batch), best.handoff)
            if best else None,
            "decode": best.decode.summary(self.batch) if best else None,
            "sla": self.sla.to_dict(self.batch),
            "strategy": self.strategy,
            "candidate_set": self.candidate_set,
            "group_size": self.group_size,
            "max_chips": self.max_chips,
            "sim_calls": self.sim_calls,
            "cache_hits": self.cache_hits,
            "fallback": self.fallback,
            "infeasible_reason": self.infeasible_reason or None,
            "handoff": best.handoff.to_dict() if best and best.handoff else None,
            "tiers": [t.to_dict(self.batch) for t in self.tiers],
            "candidates": [c.to_dict() for c in self.candidates],
        }


def _with_handoff(summary: dict[str, Any] | None,
                  handoff: HandoffCheck | None) -> dict[str, Any] | None:
    """The prefill summary with the handoff's split of its TTFT (prefill_s + handoff_s)."""
    if summary is None or handoff is None or not handoff.simulated:
        return summary
    return {**summary, "prefill_s": handoff.prefill_s, "handoff_s": handoff.handoff_s}
