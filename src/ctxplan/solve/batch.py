"""``--batch auto``: the largest batch the chosen decode pool serves within the TPOT SLA.

The pool (TP, Nd) is chosen at batch 1 (the fewest chips); then, on that pool:

1. the memory wall in b (no simulation): KV grows with b (the spec's capacity formula,
   b * S * c_kv * L per pool), so "fits" is monotone and galloping b = 1, 2, 4, ... then
   bisection finds the largest b that fits, ``max_fit``;
2. the TPOT search in [1, max_fit]: the largest b with TPOT(b) <= the limit as ``--tps-reading``
   states it (per-seq: tpot_max; per-batch: b * tpot_max). Galloping b = 1, 2, 4, ... up to the
   first miss (or max_fit), then bisection between the last pass and the first miss.

The answer b* always has b* simulated and passing, and b* + 1 simulated and failing, or not
fitting in memory (``bound_by`` "tpot" or "capacity"; "limit" at 2^20, the batch bound). Every
probe is recorded as a candidate with step "batch" (memory checks: "memory").

A pool of DP attention ranks (``req.solve_dp`` = dp > 1) is filled in whole sequences per DP
rank: b = k x dp, k searched as b is above (each rank holds at least one; the batch split evenly).

With ``--decode-dp auto`` (at one pipeline stage, under the chips objective: the others'
ladder has DP rungs of its own, solve/objective.py) the pool's chips are also tried as DP
attention ranks (:func:`same_chips_dp`): every DP degree from 2 to 8 dividing N (so the chips
stay N x TP), each rank N / DP x TP chips holding its sequences whole, filled the same way; the
largest batch wins (ties: the lower TPOT, then fewer DP ranks). The chips stay the fewest
found; what DP changes is how the same chips serve the batch (no pass-Q and no merge, each rank
attending over its own sequences). A DP degree whose one sequence per rank does not fit or
misses the target is recorded (step "batch-dp") and not filled.

It assumes TPOT does not fall as b grows (each sequence adds its KV to every step's reads);
the probes are on record, and ``tests/solve/test_solve_batch.py`` checks the answer against a
scan of every b on small cases.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ctxplan.config.values import MAX_BATCH
from ctxplan.evaluate import EvalResult, MemoryReport, check_memory
from ctxplan.solve.cache import EvalCache
from ctxplan.solve.request import AUTO, DP_SEARCH_MAX, SolveRequest
from ctxplan.solve.result import PEAK, WALL, BatchPlan, Candidate, PhasePlan
from ctxplan.solve.search import fmt_seconds
from ctxplan.solve.wall import boundary, capacity_wall


@dataclass(frozen=True)
class BatchOutcome:
    plan: BatchPlan
    candidates: tuple[Candidate, ...]


def largest_fitting(fits: Callable[[int], bool], bound: int) -> int:
    """The largest b in [1, bound] with fits(b), given fits(1) and fits monotone (falling)."""
    ok, bad = 1, None
    b = 2
    while b <= bound:
        if fits(b):
            ok = b
            b *= 2
        else:
            bad = b
            break
    if bad is None:
        if ok == bound or fits(bound):
            return bound
        bad = bound
    return boundary(fits, ok, bad)


def search_batch(req: SolveRequest, tier: str | int, tier_name: str, tp: int, n: int,
                 cache: EvalCache) -> BatchOutcome:
    """Fill the decode pool (tp, n) of ``tier``: see the module docstring."""
    memory: dict[int, MemoryReport] = {}
    records: list[Candidate] = []
    unit = req.dp_at("decode")   # sequences added at a time: one per DP rank

    def fits(k: int) -> bool:
        b = k * unit
        if b not in memory:
            memory[b] = check_memory(req.eval_config("decode", tier, n, tp, b))
        return memory[b].fits

    max_fit = largest_fitting(fits, MAX_BATCH // unit) * unit
    for b, mem in memory.items():
        if not mem.fits:
            records.append(_record(tier_name, n, tp, b, None, mem, False, False, None,
                                   f"does not fit: {mem.per_chip_bytes / 1e9:.1f} GB per chip "
                                   f"> {mem.usable_text()}", "memory", unit))

    results: dict[int, tuple[EvalResult, bool]] = {}

    def passes(k: int) -> bool:
        b = k * unit
        if b not in results:
            results[b] = cache.evaluate(req.eval_config("decode", tier, n, tp, b))
            result, hit = results[b]
            lat = result.latency_s
            limit = req.sla.tpot_limit_s(b)
            ok = lat is not None and lat <= limit and result.memory.fits
            why = f"TPOT {fmt_seconds(lat)} {'<=' if lat is not None and lat <= limit else '>'} "\
                  f"{fmt_seconds(limit)}"
            if req.sla.tps_reading == "per-batch":
                why += f" ({b} x {fmt_seconds(req.sla.tpot_max_s)}, per-batch)"
            if not result.memory.fits:
                why = result.reason
            records.append(_record(tier_name, n, tp, b, lat, result.memory, ok, hit, result,
                                   why, "batch", unit))
        got = results[b][0]
        lat = got.latency_s
        return lat is not None and lat <= req.sla.tpot_limit_s(b) and got.memory.fits

    if not passes(1):
        raise AssertionError("the decode pool was chosen at one sequence per DP rank, so "
                             "that batch passes")
    # The same gallop and bisection as the memory wall's, on the TPOT test within max_fit.
    ok = largest_fitting(passes, max_fit // unit) * unit
    bound_by = "tpot" if ok < max_fit else "capacity" if max_fit < MAX_BATCH // unit * unit \
        else "limit"
    result = results[ok][0]
    assert result.latency_s is not None
    plan = BatchPlan(batch=ok, tpot_s=result.latency_s,
                     per_chip_bytes=result.memory.per_chip_bytes, max_fit=max_fit,
                     bound_by=bound_by, limit_s=req.sla.tpot_limit_s(ok))
    return BatchOutcome(plan, tuple(records))


def same_chips_dp(req: SolveRequest, tier: str | int, plan: PhasePlan, cache: EvalCache
                  ) -> list[tuple[int, BatchOutcome, int | None]]:
    """The decode pool of ``plan`` (N x TP chips, DP 1, one stage) as DP ranks of the same
    chips, each filled (see the module docstring): (DP, its outcome, its capacity wall: the
    fewest CP ranks per DP rank holding one sequence each) per DP degree dividing N; an
    outcome of batch 0 where one sequence per rank does not fit or misses the target."""
    n = plan.answer
    if n is None or plan.dp != 1 or plan.pp != 1 or req.decode_dp != AUTO \
            or req.objective != "chips":   # (the other objectives' ladder has DP rungs)
        return []
    out: list[tuple[int, BatchOutcome, int | None]] = []
    for dp in range(2, min(DP_SEARCH_MAX, n) + 1):
        if n % dp == 0:
            at = req.with_dp(dp)
            wall = capacity_wall(_one_per_rank(at, tier, plan.tp, dp), n // dp).n_cap
            cfg = at.eval_config("decode", tier, n // dp, plan.tp, dp)
            mem = check_memory(cfg)
            result, hit = cache.evaluate(cfg) if mem.fits else (None, False)
            lat = None if result is None else result.latency_s
            limit = req.sla.tpot_limit_s(dp)
            if result is None or lat is None or lat > limit or not result.memory.fits:
                why = (f"does not fit: {mem.per_chip_bytes / 1e9:.1f} GB per chip > "
                       f"{mem.usable_text()}" if result is None else
                       result.reason if lat is None or not result.memory.fits else
                       f"TPOT {fmt_seconds(lat)} > {fmt_seconds(limit)}")
                out_mem = mem if result is None else result.memory
                rec = _record(plan.kv_tier, n // dp, plan.tp, dp, lat, out_mem, False, hit,
                              result, f"the same chips as DP {dp}: {why}", "batch-dp", dp)
                out.append((dp, BatchOutcome(_NONE, (rec,)), wall))
            else:
                got = search_batch(at, tier, plan.kv_tier, plan.tp, n // dp, cache)
                out.append((dp, got, wall))
    return out


def _one_per_rank(req: SolveRequest, tier: str | int, tp: int, dp: int
                  ) -> Callable[[int], MemoryReport]:
    """Memory of k CP ranks per DP rank holding one sequence each."""
    return lambda k: check_memory(req.eval_config("decode", tier, k, tp, dp))


# A DP degree not filled: no batch (never chosen over a filled one).
_NONE = BatchPlan(batch=0, tpot_s=0.0, per_chip_bytes=0, max_fit=0, bound_by="", limit_s=0.0)


def _record(tier: str, n: int, tp: int, b: int, lat: float | None, mem: MemoryReport,
            ok: bool, hit: bool, result: EvalResult | None, why: str, step: str,
            dp: int = 1) -> Candidate:
    return Candidate(phase="decode", kv_tier=tier, n=n, tp=tp, latency_s=lat,
                     per_chip_bytes=mem.per_chip_bytes, capacity_bytes=mem.capacity_bytes,
                     fits=mem.fits, meets_sla=ok,
                     simulated=bool(result is not None and result.simulated), cache_hit=hit,
                     cut_by=None if mem.fits else PEAK if result is not None else WALL,
                     step=step, why=why, batch=b, dp=dp)
