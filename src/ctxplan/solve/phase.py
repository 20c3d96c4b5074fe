"""One sub-problem: the smallest N for one phase and one KV tier.

Capacity wall first (memory checks, no simulation), then the search over candidates at or above
it, each evaluated through the shared cache. With no latency bound for the phase (prefill
without a TTFT SLA) the answer is the first candidate at the wall, simulated once for its TTFT.
"""

from __future__ import annotations

from ctxplan.evaluate import EvalResult, MemoryReport, check_memory
from ctxplan.solve.cache import EvalCache
from ctxplan.solve.candidates import candidate_ns
from ctxplan.solve.request import SolveRequest
from ctxplan.solve.result import WALL, Candidate, PhasePlan
from ctxplan.solve.search import Probe, SearchOutcome, fmt_seconds, search
from ctxplan.solve.wall import capacity_wall, wall_reason

GB = 1e9


def solve_phase(req: SolveRequest, phase: str, tier: str | int, cache: EvalCache) -> PhasePlan:
    tp = req.tp(phase)
    bound_n = req.bound_n(phase)
    label = "TTFT" if phase == "prefill" else "TPOT"
    tier_name = req.eval_config(phase, tier, 1, tp).kv()[0]

    wall = capacity_wall(lambda n: check_memory(req.eval_config(phase, tier, n, tp)), bound_n)
    cut = tuple(_wall_candidate(phase, tier_name, n, tp, mem)
                for n, mem in wall.probes if not mem.fits)
    limit = req.sla.limit_s(phase, req.batch)
    base = dict(phase=phase, kv_tier=tier_name, tp=tp, n_cap=wall.n_cap, bound_n=bound_n,
                limit_s=limit, strategy=req.strategy)
    if wall.n_cap is None:
        return PhasePlan(answer=None, latency_s=None, per_chip_bytes=None, fallback=False,
                         fallback_reason="", scanned=None, candidates=cut,
                         infeasible_reason=wall_reason(phase, wall), **base)  # type: ignore[arg-type]
    cands = [n for n in candidate_ns(req.candidates, bound_n, tp, req.group_size or 1)
             if n >= wall.n_cap]
    if not cands:
        return PhasePlan(answer=None, latency_s=None, per_chip_bytes=None, fallback=False,
                         fallback_reason="", scanned=None, candidates=cut,
                         infeasible_reason=f"{phase}: no '{req.candidates}' candidate between "
                         f"the capacity wall N = {wall.n_cap} and the bound N = {bound_n}",
                         **base)  # type: ignore[arg-type]

    evaluated: dict[int, tuple[EvalResult, bool]] = {}

    def latency(n: int) -> float | None:
        evaluated[n] = cache.evaluate(req.eval_config(phase, tier, n, tp))
        return evaluated[n][0].latency_s

    if limit is None:
        lat = latency(cands[0])
        outcome = SearchOutcome(cands[0] if lat is not None else None,
                                (Probe(cands[0], lat, lat is not None, "wall"),),
                                req.strategy)
    else:
        outcome = search(cands, latency, limit, req.strategy, verify_above=req.verify_above)
    recorded = cut + tuple(_probe_candidate(phase, tier_name, tp, p, *evaluated[p.n], limit)
                           for p in outcome.probes)
    answer = outcome.answer
    reason = ""
    if answer is None:
        best = outcome.best()
        best_text = (f"; the fastest point tried is {fmt_seconds(best.latency_s)} at N = {best.n}"
                     if best else "")
        reason = (f"{phase}: no N in [{cands[0]}, {cands[-1]}] ('{req.candidates}' "
                  f"candidates, {req.strategy}) meets {label} <= {fmt_seconds(limit)}{best_text}")
        if outcome.fallback:
            reason += f" ({outcome.fallback_reason}; --strategy scan checks every point)"
    at = evaluated[answer][0] if answer is not None else None
    return PhasePlan(
        answer=answer, latency_s=at.latency_s if at else None,
        per_chip_bytes=at.memory.per_chip_bytes if at else None,
        fallback=outcome.fallback, fallback_reason=outcome.fallback_reason,
        scanned=outcome.scanned, candidates=recorded, infeasible_reason=reason,
        ring=at.ring.used if at is not None and at.ring is not None else None,
        **base,  # type: ignore[arg-type]
    )


def _wall_candidate(phase: str, tier: str, n: int, tp: int, mem: MemoryReport) -> Candidate:
    why = (f"does not fit: {mem.per_chip_bytes / GB:.1f} GB per chip > "
           f"{mem.capacity_bytes / GB:.1f} GB (weights {mem.weights_bytes / GB:.1f}, "
           f"KV {mem.kv_bytes / GB:.1f})")
    return Candidate(phase=phase, kv_tier=tier, n=n, tp=tp, latency_s=None,
                     per_chip_bytes=mem.per_chip_bytes, capacity_bytes=mem.capacity_bytes,
                     fits=False, meets_sla=False, simulated=False, cache_hit=False, cut_by=WALL,
                     step="memory", why=why)


def _probe_candidate(phase: str, tier: str, tp: int, p: Probe, result: EvalResult, hit: bool,
                     limit: float | None) -> Candidate:
    label = "TTFT" if phase == "prefill" else "TPOT"
    mem = result.memory
    if not result.simulated:
        why = result.reason
    elif limit is None:
        why = f"no {label} SLA: the capacity minimum, simulated for its {label}"
    else:
        op = "<=" if p.passed else ">"
        why = f"{label} {fmt_seconds(p.latency_s)} {op} {fmt_seconds(limit)}"
    return Candidate(phase=phase, kv_tier=tier, n=p.n, tp=tp, latency_s=p.latency_s,
                     per_chip_bytes=mem.per_chip_bytes, capacity_bytes=mem.capacity_bytes,
                     fits=mem.fits, meets_sla=p.passed, simulated=result.simulated,
                     cache_hit=hit, cut_by=None if mem.fits else WALL, step=p.step, why=why)
