"""What a solve returns: every candidate looked at, the answer per phase and tier, the winner.

``SolveResult.to_dict()`` is the JSON of ``ctxplan solve --json`` (schema in docs/solver.md).
It is deterministic: no wall-clock figures, lists in search order, keys fixed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ctxplan.policy import Policy
from ctxplan.solve.economics import PlanEconomics, economics_dict
from ctxplan.solve.sla import SLA

WALL = "capacity wall"      # cut_by: does not fit in memory
BOUND = "TTFT bound"        # cut_by: the roofline TTFT bound already misses the target
BEST = "cannot beat"        # cut_by / status: pruned by a better plan found before
PEAK = "simulated peak"     # cut_by: simulated (its latency kept), over the memory at its peak
BOUND_BY = ("capacity", "tpot", "ttft", "tp")


def latency_key(phase: str) -> str:
    return "ttft_s" if phase == "prefill" else "tpot_s"


def label(phase: str) -> str:
    return "TTFT" if phase == "prefill" else "TPOT"


@dataclass(frozen=True)
class Candidate:
    """One point of the search path: simulated, or cut (by the capacity wall, the TTFT bound or
    a better plan) before simulating."""

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
    cut_by: str | None        # WALL, BOUND or BEST when pruned before simulation
    step: str                 # "memory" (a wall check), "bound" (the TTFT bound's cut), "wall"
                              # (the capacity minimum taken with no SLA to meet), the search step
                              # (gallop, model, binary, verify, linear, scan, fallback), "batch"
                              # (the batch search), "ladder" (--objective tokens-per-chip) or
                              # "handoff" (the pair check of solve/handoff.py)
    why: str
    batch: int = 1
    handoff_to: int | None = None   # a pair check: the decode pool's CP degree (Nd)
    pp: int = 1                     # pipeline stages (chips = pp x dp x n x tp)
    dp: int = 1                     # decode DP attention ranks of n x tp chips each

    @property
    def chips(self) -> int:
        return self.n * self.tp * self.pp * self.dp

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase, "kv_tier": self.kv_tier, "n": self.n, "tp": self.tp,
            "pp": self.pp, "dp": self.dp, "chips": self.chips, "batch": self.batch,
            latency_key(self.phase): self.latency_s,
            "memory": {"per_chip_bytes": self.per_chip_bytes,
                       "capacity_bytes": self.capacity_bytes, "fits": self.fits},
            "meets_sla": self.meets_sla, "simulated": self.simulated,
            "cache_hit": self.cache_hit, "cut_by": self.cut_by, "step": self.step,
            "why": self.why,
            **({} if self.handoff_to is None else {"handoff_to": self.handoff_to}),
        }


@dataclass(frozen=True)
class TPOption:
    """What one TP degree gave a pool: its answer, or why it lost or was never searched."""

    tp: int
    status: str                  # "chosen" | "more chips" | "slower" | "cut" | "infeasible"
                                 # | "excluded"
    why: str
    n_cap: int | None = None     # the capacity wall at this TP
    bound_n: int = 0             # the largest N searched (the bound, or less after pruning)
    answer: int | None = None
    latency_s: float | None = None
    per_chip_bytes: int | None = None
    fallback: bool = False
    fallback_reason: str = ""
    scanned: tuple[int, int] | None = None
    first_candidate: int | None = None   # the first candidate at or above the wall
    pp: int = 1                  # the pipeline depth this TP was searched at
    dp: int = 1                  # and the DP degree (decode)

    @property
    def chips(self) -> int | None:
        return None if self.answer is None else self.answer * self.tp * self.pp * self.dp

    def to_dict(self, phase: str) -> dict[str, Any]:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "status": self.status,
                "why": self.why,
                "n_cap": self.n_cap,
                "bound_n": self.bound_n, "cp": self.answer, "chips": self.chips,
                latency_key(phase): self.latency_s, "fallback": self.fallback,
                "fallback_reason": self.fallback_reason,
                "scanned": list(self.scanned) if self.scanned else None}


@dataclass(frozen=True)
class BatchPlan:
    """``--batch auto``: the largest batch the chosen decode pool serves within the TPOT SLA."""

    batch: int
    tpot_s: float
    per_chip_bytes: int
    max_fit: int                 # the largest batch whose memory fits on this pool
    bound_by: str                # "tpot" (batch + 1 misses it), "capacity" (does not fit)
                                 # or "limit" (the batch bound, 2^20)
    limit_s: float               # the TPOT limit at the chosen batch (per-batch: b * tpot_max)

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "tpot_s": self.tpot_s, "max_fit": self.max_fit,
                "bound_by": self.bound_by, "tpot_limit_s": self.limit_s,
                "per_chip_bytes": self.per_chip_bytes}


@dataclass(frozen=True)
class PhasePlan:
    """The answer of one sub-problem (prefill or decode) for one KV tier: the (TP, N) with the
    fewest chips over the TP degrees searched (ties: lower latency, then smaller TP)."""

    phase: str
    kv_tier: str
    tp: int                       # the chosen TP (infeasible: the smallest TP tried)
    n_cap: int | None             # the capacity wall at that TP; None: none fits
    bound_n: int
    limit_s: float | None         # the latency bound applied (None: no SLA for this phase)
    answer: int | None            # N*; None: infeasible
    latency_s: float | None       # latency at N* (decode: at ``batch``)
    per_chip_bytes: int | None    # memory at N*
    strategy: str
    fallback: bool
    fallback_reason: str
    scanned: tuple[int, int] | None
    candidates: tuple[Candidate, ...]
    infeasible_reason: str
    tp_options: tuple[TPOption, ...] = ()
    bound_by: str | None = None   # what decided N (BOUND_BY); None when infeasible
    batch: int = 1                # the batch ``latency_s`` is at
    batch_plan: BatchPlan | None = None   # decode under --batch auto
    cut_reason: str = ""          # bounded by a better plan (another tier) and beaten there
    tp_searched: bool = False     # TP was auto (several degrees tried)
    ring: str | None = None       # prefill: the ring its full-attention layers use at N*
    # The memory of the fullest chip at N* (the evaluation's ``memory``: simulated peak), and
    # for a prefill how the prompt entered (one pass or chunks, and why); None: infeasible.
    memory: dict[str, Any] | None = None
    prefill_chunk: dict[str, Any] | None = None
    pp: int = 1                   # the chosen pipeline depth (chips = pp x N x TP)
    stages: tuple[tuple[int, int], ...] = ()   # (first, last) layer of each stage at N*
    pp_searched: bool = False     # PP was auto (several depths tried)
    dp: int = 1                   # decode: DP attention ranks (chips = pp x dp x N x TP)
    dp_searched: bool = False     # DP was searched (several degrees tried)

    @property
    def feasible(self) -> bool:
        return self.answer is not None

    @property
    def chips(self) -> int | None:
        return None if self.answer is None else self.answer * self.tp * self.pp * self.dp

    @property
    def tokens_per_s(self) -> float | None:
        """Decode: tokens per second of the pool, batch / TPOT."""
        if self.phase != "decode" or not self.latency_s:
            return None
        return self.batch / self.latency_s

    def summary(self, batch: int | None = None) -> dict[str, Any] | None:
        """The short form used at the top of the JSON ({cp, tp, chips, ttft_s / tpot_s ...})."""
        if self.answer is None:
            return None
        d: dict[str, Any] = {"cp": self.answer, "tp": self.tp, "pp": self.pp,
                             "chips": self.chips, latency_key(self.phase): self.latency_s}
        if self.phase == "decode":
            d["dp"] = self.dp
        if self.pp > 1:
            d["stages"] = [list(x) for x in self.stages]
        if self.phase == "decode" and self.latency_s:
            rate = self.tokens_per_s or 0.0
            d["batch"] = self.batch
            d["tps_per_seq"] = 1.0 / self.latency_s
            d["tps_per_batch"] = rate
            d["tokens_per_s_per_chip"] = rate / (self.chips or 1)
        d["n_cap"] = self.n_cap
        d["per_chip_bytes"] = self.per_chip_bytes
        if self.phase == "prefill":
            d["ring"] = self.ring
            d["prefill_chunk"] = self.prefill_chunk
        d["memory"] = self.memory
        d["bound_by"] = self.bound_by
        return d

    def to_dict(self, batch: int | None = None) -> dict[str, Any]:
        return {
            "feasible": self.feasible, "answer": self.summary(), "n_cap": self.n_cap,
            "bound_n": self.bound_n, "limit_s": self.limit_s, "strategy": self.strategy,
            "fallback": self.fallback, "fallback_reason": self.fallback_reason,
            "scanned": list(self.scanned) if self.scanned else None,
            "simulated_points": sum(1 for c in self.candidates if c.simulated),
            "infeasible_reason": self.infeasible_reason, "cut_reason": self.cut_reason or None,
            "bound_by": self.bound_by, "tp_searched": self.tp_searched,
            "pp_searched": self.pp_searched,
            "tp_options": [o.to_dict(self.phase) for o in self.tp_options],
            "batch_search": self.batch_plan.to_dict() if self.batch_plan else None,
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
    # The decode pool's first chip (the next host's, or right after the prefill pool under
    # colocate_pools: docs/handoff.md); None when not simulated.
    first_decode_chip: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "simulated": self.simulated, "prefill_s": self.prefill_s,
                "handoff_s": self.handoff_s, "ttft_s": self.ttft_s,
                "bytes_moved": self.bytes_moved, "decode_kv_bytes": self.decode_kv_bytes,
                "stepped": self.stepped or None, "from": {"prefill_cp": self.from_pair[0],
                                                         "decode_cp": self.from_pair[1]},
                "reason": self.reason or None, "first_decode_chip": self.first_decode_chip}


@dataclass(frozen=True)
class TierPlan:
    """Prefill and decode for one KV tier: N = Np + Nd (chips = Np*tp_p + Nd*tp_d)."""

    kv_tier: str
    c_kv_bytes: int
    prefill: PhasePlan
    decode: PhasePlan
    handoff: HandoffCheck | None = None   # None: --kv-handoff off, or a pool infeasible
    tdp_w: float | None = None            # per chip (None: the chip file states none)
    price_per_chip_hour: float | None = None   # None: no price given for the chip
    # The decode pool on a chip of its own (--decode-chip): its TDP and price (the fields
    # above are then the prefill chip's).
    decode_chip_own: bool = False
    decode_tdp_w: float | None = None
    decode_price_per_chip_hour: float | None = None

    @property
    def feasible(self) -> bool:
        return self.prefill.feasible and self.decode.feasible

    @property
    def cut(self) -> bool:
        """Not solved to the end: a better tier bounded its search and nothing beat it."""
        return bool(self.prefill.cut_reason or self.decode.cut_reason)

    @property
    def total_chips(self) -> int | None:
        if not self.feasible:
            return None
        return (self.prefill.chips or 0) + (self.decode.chips or 0)

    @property
    def tokens_per_s_per_chip(self) -> float | None:
        """Decode tokens per second per chip of the whole plan (prefill and decode pools)."""
        rate = self.decode.tokens_per_s
        chips = self.total_chips
        return None if rate is None or not chips else rate / chips

    @property
    def economics(self) -> PlanEconomics | None:
        """Power and cost of the plan (solve/economics.py); None when infeasible."""
        chips = self.total_chips
        if chips is None:
            return None
        return PlanEconomics(chips=chips, tokens_per_s=self.decode.tokens_per_s,
                             tdp_w=self.tdp_w, price_per_chip_hour=self.price_per_chip_hour,
                             decode_chips=(self.decode.chips or 0) if self.decode_chip_own
                             else 0, decode_tdp_w=self.decode_tdp_w,
                             decode_price_per_chip_hour=self.decode_price_per_chip_hour)

    @property
    def infeasible_reason(self) -> str:
        return "; ".join(r for r in (self.prefill.infeasible_reason,
                                     self.decode.infeasible_reason) if r)

    def rank(self, objective: str = "chips") -> tuple[float, ...]:
        """objective chips: fewest chips, then the most decode tokens/s (at a fixed batch:
        the lower TPOT), then lower TTFT; tokens-per-chip: the most decode tokens/s per chip,
        then fewest chips, then lower TTFT; cost (power): the least cost per million tokens
        (joules per token), then as tokens-per-chip."""
        inf = float("inf")
        chips = self.total_chips or inf
        rate = self.decode.tokens_per_s or 0.0
        ttft = self.prefill.latency_s or inf
        per_chip = (-(self.tokens_per_s_per_chip or 0.0), chips, ttft)
        e = self.economics
        if objective == "cost":
            cost = e.cost_per_million_tokens if e is not None else None
            return (inf if cost is None else cost, *per_chip)
        if objective == "power":
            joules = e.joules_per_token if e is not None else None
            return (inf if joules is None else joules, *per_chip)
        if objective == "tokens-per-chip":
            return per_chip
        return (chips, -rate, ttft)

    def to_dict(self, batch: int | None = None) -> dict[str, Any]:
        return {
            "kv_tier": self.kv_tier, "c_kv_bytes": self.c_kv_bytes, "feasible": self.feasible,
            "total_chips": self.total_chips, "tokens_per_s_per_chip":
            self.tokens_per_s_per_chip,
            **economics_dict(self.economics),
            "prefill": self.prefill.to_dict(),
            "decode": self.decode.to_dict(), "infeasible_reason": self.infeasible_reason,
            "cut_reason": "; ".join(r for r in (self.prefill.cut_reason,
                                                self.decode.cut_reason) if r) or None,
            "handoff": None if self.handoff is None else self.handoff.to_dict(),
        }


@dataclass(frozen=True)
class SolveResult:
    context_length: int
    model: str
    chip: str
    cluster: str
    batch: int | str              # the batch asked for: a number, or "auto"
    sla: SLA
    strategy: str
    candidate_set: str
    group_size: int
    max_chips: int
    tiers: tuple[TierPlan, ...]
    best: TierPlan | None         # the winning tier; None when no tier is feasible
    sim_calls: int                # simulations run by this solve
    cache_hits: int               # evaluations answered by the cache
    objective: str = "chips"
    prefill_tp: int | str = "auto"   # as asked: a number, or "auto"
    prefill_pp: int | str = 1
    decode_pp: int | str = "auto"
    decode_tp: int | str = "auto"
    earlier_run_hits: int = 0        # of cache_hits, results the store held from earlier runs
    cached_fraction: float = 0.0  # prefill sized for new tokens S - floor(F S)
    # How every point was run (its prefill_ring as asked for).
    policy: Policy = field(default_factory=Policy)
    warnings: tuple[str, ...] = ()   # what the run warns about (ctxplan.run_warnings)
    # The decode pool's chip and cluster ("": the same as ``chip`` / ``cluster``, which are
    # then the prefill pool's only when they differ: --decode-chip / --decode-cluster)
    decode_chip: str = ""
    decode_cluster: str = ""

    @property
    def feasible(self) -> bool:
        return self.best is not None

    @property
    def total_chips(self) -> int | None:
        return self.best.total_chips if self.best else None

    @property
    def chosen_batch(self) -> int | None:
        """The batch of the answer (the chosen one under --batch auto); None if infeasible and
        the batch was searched."""
        if self.best is not None:
            return self.best.decode.batch
        return None if self.batch == "auto" else int(self.batch)

    @property
    def batch_searched(self) -> bool:
        return self.batch == "auto"

    @property
    def ttft_constrained(self) -> bool:
        return self.sla.ttft_max_s is not None

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
            "decode_chip": self.decode_chip or self.chip,
            "decode_cluster": self.decode_cluster or self.cluster,
            "batch": self.chosen_batch,
            "objective": self.objective,
            "feasible": self.feasible,
            "total_chips": self.total_chips,
            "kv_tier": best.kv_tier if best else None,
            "tokens_per_s_per_chip": best.tokens_per_s_per_chip if best else None,
            **economics_dict(best.economics if best else None),
            "prefill": _with_handoff(best.prefill.summary(), best.handoff) if best else None,
            "decode": best.decode.summary() if best else None,
            "sla": {**self.sla.to_dict(self.chosen_batch or 1),
                    "ttft_constrained": self.ttft_constrained},
            "search": {"prefill_tp": self.prefill_tp, "decode_tp": self.decode_tp,
                       "prefill_pp": self.prefill_pp, "decode_pp": self.decode_pp,
                       "batch": self.batch,
                       "memory_headroom": self.policy.memory_headroom},
            "strategy": self.strategy,
            "candidate_set": self.candidate_set,
            "group_size": self.group_size,
            "max_chips": self.max_chips,
            "cached_fraction": self.cached_fraction,
            "prefill_ring": self.policy.prefill_ring,
            "sim_calls": self.sim_calls,
            "cache_hits": self.cache_hits,
            "earlier_run_hits": self.earlier_run_hits,
            "fallback": self.fallback,
            "infeasible_reason": self.infeasible_reason or None,
            "handoff": best.handoff.to_dict() if best and best.handoff else None,
            "tiers": [t.to_dict() for t in self.tiers],
            "candidates": [c.to_dict() for c in self.candidates],
            "warnings": list(self.warnings),
        }


def _with_handoff(summary: dict[str, Any] | None,
                  handoff: HandoffCheck | None) -> dict[str, Any] | None:
    """The prefill summary with the handoff's split of its TTFT (prefill_s + handoff_s)."""
    if summary is None or handoff is None or not handoff.simulated:
        return summary
    return {**summary, "prefill_s": handoff.prefill_s, "handoff_s": handoff.handoff_s}
