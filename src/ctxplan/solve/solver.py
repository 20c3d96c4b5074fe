"""Composition: per KV tier, N = Np* + Nd*; the tier with the fewest chips wins.

The KV tier changes prefill too (ring bytes and the KV each prefill rank keeps), so both
sub-problems are solved per tier. Ties on chips go to the lower TPOT, then the lower TTFT, then
the tier listed first.
"""

from __future__ import annotations

from ctxplan.solve.cache import EvalCache
from ctxplan.solve.phase import solve_phase
from ctxplan.solve.request import SolveRequest
from ctxplan.solve.result import SolveResult, TierPlan


def solve(request: SolveRequest, cache: EvalCache | None = None) -> SolveResult:
    """Solve one context length. Pass a shared ``cache`` to reuse results across solves."""
    req = request.validated()
    cache = cache if cache is not None else EvalCache()
    before = cache.counts()
    tiers: list[TierPlan] = []
    for tier in req.kv_tiers:
        prefill = solve_phase(req, "prefill", tier, cache)
        decode = solve_phase(req, "decode", tier, cache)
        c_kv = req.eval_config("decode", tier, 1, req.decode_tp).kv()[1]
        tiers.append(TierPlan(kv_tier=decode.kv_tier, c_kv_bytes=c_kv, prefill=prefill,
                              decode=decode))
    feasible = [t for t in tiers if t.feasible]
    best = min(feasible, key=lambda t: (t.rank(), tiers.index(t))) if feasible else None
    used = cache.counts() - before
    return SolveResult(
        context_length=req.context_length, model=req.model.name, chip=req.chip.name,
        cluster=req.cluster.name, batch=req.batch, sla=req.sla, strategy=req.strategy,
        candidate_set=req.candidates, group_size=req.group_size or 1,
        max_chips=req.max_chips or req.cluster.max_chips, tiers=tuple(tiers), best=best,
        sim_calls=used.sim_calls, cache_hits=used.cache_hits,
        cached_fraction=req.cached_fraction, prefill_ring=req.prefill_ring,
    )
