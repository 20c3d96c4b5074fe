"""``--objective tokens-per-chip``: the decode pool that serves the most tokens per second per
chip of the whole plan, among pools that meet the TPOT SLA within ``--max-chips``.

Tokens per second per chip of the plan = batch / TPOT / (prefill chips + decode chips). The
prefill pool is the fewest-chips one (it only adds to the denominator). For the decode pool, a
larger Nd holds more sequences and spreads the prefill pool's cost, so the best is often far
above the fewest-chips answer N*; but pass-Q and the merge grow with Nd, so it is not always the
largest. The search looks, per TP degree that has an answer, at a ladder of Nd: N*, 2 N*, 4 N*,
... and the bound (each rounded up to the candidate set), or with ``--strategy scan`` at every
candidate from N* to the bound; at each it takes the batch (fixed, or the largest that meets
the SLA under ``--batch auto``). The ladder is not a proof of the optimum between its rungs;
``--strategy scan`` is. Under ``--batch auto`` the rungs' batch searches go in order of an
upper bound on their rate that needs no simulation (the largest batch that fits over TPOT at
batch 1), and a rung whose bound cannot beat the best rate found so far is not searched
(recorded with ``cut_by: "cannot beat"``). Every rung is recorded as a candidate with step
"ladder" (its batch search, if any, with step "batch").

DP attention (``--decode-dp``, searched by default): beside each TP's ladder, rungs of 2, 4 and
8 DP ranks of that TP's N* each (within ``--max-chips``; at a fixed batch, DP up to it), at one
sequence per DP rank (or the fixed batch), filled in whole sequences per rank under
``--batch auto``: the layout that serves the most tokens per chip where many sequences share the
experts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ctxplan.config.values import MAX_BATCH
from ctxplan.evaluate import check_memory
from ctxplan.solve.batch import largest_fitting, search_batch
from ctxplan.solve.cache import EvalCache
from ctxplan.solve.candidates import candidate_ns
from ctxplan.solve.request import SolveRequest
from ctxplan.solve.result import BEST, BatchPlan, Candidate, PhasePlan
from ctxplan.solve.search import fmt_seconds


@dataclass(frozen=True)
class Rung:
    tp: int
    n: int
    batch: int
    tpot_s: float
    per_chip_bytes: int
    batch_plan: BatchPlan | None
    dp: int = 1

    @property
    def chips(self) -> int:
        return self.dp * self.n * self.tp

    def rate_per_chip(self, prefill_chips: float, decode_weight: float = 1.0) -> float:
        """Decode tokens/s per chip of the plan; with weights (``prefill_chips`` then the
        prefill pool's weight, ``decode_weight`` a decode chip's), per unit of cost or power."""
        return self.batch / self.tpot_s / (prefill_chips + self.chips * decode_weight)


def chip_weights(req: SolveRequest) -> tuple[float, float]:
    """What one prefill chip and one decode chip weigh in the objective: 1 and 1 (tokens/s per
    chip; also cost and power while both pools are one chip: the same plan, as chips x a
    constant), or with a decode chip of its own each chip's price (``cost``) or TDP
    (``power``), so the ladder maximises tokens per unit of cost or energy."""
    if req.decode_chip is None or req.objective not in ("cost", "power"):
        return 1.0, 1.0
    if req.objective == "cost":
        p, d = req.price_per_chip_hour, req.decode_price_per_chip_hour
    else:
        p, d = req.chip.tdp_w, req.decode_chip.tdp_w
    assert p is not None and d is not None, "checked at the edge (check_objective)"
    return p, d


def ladder(req: SolveRequest, tp: int, first: int) -> list[int]:
    """The Nd tried for one TP degree (ascending, candidates only)."""
    bound = req.bound_n("decode", tp)
    cands = [n for n in candidate_ns(req.candidates, bound, tp, req.group_size or 1)
             if n >= first]
    if req.strategy == "scan" or not cands:
        return cands
    out, n = [], first
    while n < bound:
        out.append(next(c for c in cands if c >= n))
        n *= 2
    out.append(cands[-1])
    return sorted(set(out))


def most_tokens_per_chip(req: SolveRequest, tier: str | int, decode: PhasePlan,
                         prefill_chips: int, cache: EvalCache) -> PhasePlan:
    """The decode plan of ``tier`` under the tokens-per-chip objective (``decode`` is the
    fewest-chips plan found before; its TP options say which TP degrees have an answer)."""
    records: list[Candidate] = []
    probed: list[Rung] = []
    for option in decode.tp_options:
        if option.answer is None or option.dp > 1:
            continue   # (a DP option's rungs are the DP rungs of its TP's DP 1 option)
        tp = option.tp
        for n in ladder(req, tp, option.answer):
            rung = _rung(req, tier, decode.kv_tier, tp, n, cache, records)
            if rung is not None:
                probed.append(rung)
        at = MAX_BATCH if req.batch_auto else req.base_batch
        for dp in req.dp_choices(at, option.answer * tp):
            if dp > 1 and option.pp == 1:
                rung = _rung(req.with_dp(dp), tier, decode.kv_tier, tp, option.answer, cache,
                             records)
                if rung is not None:
                    probed.append(rung)
    if not probed:
        return decode
    w_p, w_d = chip_weights(req)
    prefill_weight = prefill_chips * w_p
    rungs = probed
    if req.batch_auto:
        rungs = _filled(req, tier, decode.kv_tier, probed, prefill_weight, w_d, cache, records)
    best = max(rungs, key=lambda r: (r.rate_per_chip(prefill_weight, w_d), -r.chips, -r.dp,
                                     -r.tp))
    return replace(decode, tp=best.tp, answer=best.n, latency_s=best.tpot_s,
                   per_chip_bytes=best.per_chip_bytes, batch=best.batch,
                   batch_plan=best.batch_plan, bound_by="objective", dp=best.dp,
                   dp_searched=decode.dp_searched or any(r.dp > 1 for r in probed),
                   candidates=decode.candidates + tuple(records))


def _filled(req: SolveRequest, tier: str | int, tier_name: str, probed: list[Rung],
            prefill_chips: float, decode_weight: float, cache: EvalCache,
            records: list[Candidate]) -> list[Rung]:
    """Each rung with its batch searched, most promising first; a rung whose best possible
    rate cannot beat the best found so far is not searched. That bound needs no simulation:
    the batch is at most the largest that fits (memory), and TPOT at any batch is at least
    its TPOT at batch 1 (the assumption of the batch search), so the rate is at most
    max_fit / TPOT(1) / chips."""
    unit = "tokens/s per chip" if decode_weight == 1.0 and prefill_chips.is_integer() else \
        f"tokens/s per unit of {req.objective}"
    bounds = []
    for rung in probed:
        fit = largest_fitting(_fits(req.with_dp(rung.dp), tier, rung.n, rung.tp, rung.dp),
                              MAX_BATCH // rung.dp) * rung.dp
        bounds.append((fit / rung.tpot_s / (prefill_chips + rung.chips * decode_weight),
                       rung))
    bounds.sort(key=lambda x: (-x[0], x[1].chips, x[1].dp, x[1].tp))
    out: list[Rung] = []
    best = 0.0
    for bound, rung in bounds:
        if out and bound <= best:
            records.append(replace(
                next(c for c in records if c.step == "ladder" and c.n == rung.n
                     and c.tp == rung.tp and c.dp == rung.dp), step="ladder", cut_by=BEST,
                why=f"its batch search cannot beat {best:.3g} {unit}: at most "
                    f"{bound:.3g} (the largest batch that fits over TPOT at batch 1)"))
            continue
        filled = search_batch(req.with_dp(rung.dp), tier, tier_name, rung.tp, rung.n, cache)
        records.extend(filled.candidates)
        p = filled.plan
        done = Rung(rung.tp, rung.n, p.batch, p.tpot_s, p.per_chip_bytes, p, rung.dp)
        out.append(done)
        best = max(best, done.rate_per_chip(prefill_chips, decode_weight))
    return out


def _fits(req: SolveRequest, tier: str | int, n: int, tp: int, per: int = 1
          ) -> Callable[[int], bool]:
    """Whether ``per`` x k sequences fit the pool (k sequences per DP rank with ``per`` DP
    ranks)."""
    return lambda k: check_memory(req.eval_config("decode", tier, n, tp, k * per)).fits


def _rung(req: SolveRequest, tier: str | int, tier_name: str, tp: int, n: int,
          cache: EvalCache, records: list[Candidate]) -> Rung | None:
    dp = req.dp_at("decode")
    batch = dp if req.batch_auto else req.base_batch   # under auto: one sequence per DP rank
    result, hit = cache.evaluate(req.eval_config("decode", tier, n, tp, batch))
    lat = result.latency_s
    limit = req.sla.tpot_limit_s(batch)
    ok = lat is not None and lat <= limit
    why = (f"TPOT {fmt_seconds(lat)} {'<=' if ok else '>'} {fmt_seconds(limit)}" if lat
           is not None else result.reason)
    mem = result.memory
    records.append(Candidate(phase="decode", kv_tier=tier_name, n=n, tp=tp, latency_s=lat,
                             per_chip_bytes=mem.per_chip_bytes,
                             capacity_bytes=mem.capacity_bytes, fits=mem.fits, meets_sla=ok,
                             simulated=result.simulated, cache_hit=hit, cut_by=None,
                             step="ladder", why=why, batch=batch, dp=dp))
    if not ok or lat is None:
        return None
    return Rung(tp, n, batch, lat, mem.per_chip_bytes, None, dp)
