"""Composition: per KV tier, the decode pool and the prefill pool; the best tier wins.

The KV tier changes prefill too (ring bytes and the KV each prefill rank keeps), so both
sub-problems are solved per tier. Order of work (docs/solver.md, "Composition"):

1. decode for every tier (cheap simulations), then, under ``--batch auto``, the largest batch
   each tier's decode pool serves. Under the chips objective (not ``scan``) at a fixed batch,
   tiers instead go one after the other, the fewest KV bytes first, steps 1 and 2 for each,
   and a tier's decode search stops at the best plan's total less the fewest chips its
   prefill could have (its capacity walls: memory checks only);
2. prefill for every tier. Under the chips objective (not ``scan``), with a TTFT target or not
   (without one the prefill is its capacity wall, at 1M a chunked prefill of tens of chunks,
   so no longer cheap), each tier's prefill search is bounded by what could still beat the
   best plan so far (best total - this tier's decode chips; under ``--batch auto`` tiers go in
   order of their decode chips): a tier that cannot is "cut", not solved to the end. With a
   TTFT target a tier whose decode is infeasible is not searched for prefill. Each tier's
   pair is then checked with the KV handoff between its pools (:mod:`ctxplan.solve.handoff`),
   stepping a pool up when prefill plus the unhidden handoff misses the TTFT target; the best
   plan so far counts the pair as checked (the check only adds chips, so the bounds stay
   safe);
3. under ``--objective tokens-per-chip`` (or ``cost`` / ``power``: with one chip they rank
   plans alike, solve/economics.py), each tier's decode pool is re-chosen for the most
   tokens per second per chip of the whole plan (:mod:`ctxplan.solve.objective`), and the
   pair checked with its handoff after that.
"""

from __future__ import annotations

from dataclasses import replace

from ctxplan.config.edge_warnings import point_warnings
from ctxplan.config.units import format_count
from ctxplan.solve.batch import same_chips_dp, search_batch
from ctxplan.solve.cache import EvalCache
from ctxplan.solve.handoff import check_pair
from ctxplan.solve.objective import most_tokens_per_chip
from ctxplan.solve.phase import Curve, Progress, pool_floor_chips, solve_pool
from ctxplan.solve.request import SolveRequest
from ctxplan.solve.result import PhasePlan, SolveResult, TierPlan


def solve(request: SolveRequest, cache: EvalCache | None = None,
          progress: Progress | None = None) -> SolveResult:
    """Solve one context length. Pass a shared ``cache`` to reuse results across solves;
    ``progress(label, done, total)`` is told what runs (sub-problems done of total)."""
    req = request.validated()
    cache = cache if cache is not None else EvalCache()
    before = cache.counts()
    tiers = list(req.kv_tiers)
    n_tp = {phase: len(req.tp_choices(phase)) for phase in ("prefill", "decode")}
    pair_step = 0 if req.policy.kv_handoff == "off" else 1
    total = len(tiers) * (n_tp["prefill"] + n_tp["decode"] + (1 if req.batch_auto else 0)
                          + pair_step)
    done = 0

    def tell(text: str) -> None:
        if progress is not None:
            progress(text, done, total)

    # Under the chips objective each tier's prefill search is bounded by what could still beat
    # the best plan so far, with or without a TTFT target: without one the prefill is at its
    # capacity wall, but at 1M that wall is a chunked prefill of tens of chunks, simulated
    # once plain and once with the handoff (seconds each), which a losing tier need not pay.
    bounded = req.strategy != "scan" and req.objective == "chips"
    # At a fixed batch the decode pool is bounded too: tiers go one after the other, the
    # fewest KV bytes first, and a tier's decode search stops at the best plan's chips less the
    # fewest its prefill could have (its capacity walls, memory checks only). Under --batch
    # auto every tier's decode is solved first (its fill decides the plan), as before.
    one_by_one = bounded and not req.batch_auto
    decode: dict[str | int, PhasePlan] = {}
    prefill: dict[str | int, PhasePlan] = {}
    checked: dict[str | int, TierPlan] = {}
    curve = Curve()
    best_total: int | None = None

    def solve_decode(tier: str | int) -> None:
        nonlocal done
        cap_d = None
        floor = pool_floor_chips(req, "prefill", tier) \
            if one_by_one and best_total is not None else None
        if floor is not None and best_total is not None:
            cap_d = best_total - floor
        if cap_d is not None and cap_d < 1:
            name = req.eval_config("decode", tier, 1, 1).kv()[0]
            decode[tier] = _not_searched(
                req, "decode", name, "decode: cannot beat the best plan: this tier's prefill "
                f"alone needs at least {format_count(floor, 'chip')} (its capacity walls), the "
                f"best plan {format_count(best_total, 'chip')} in all")
        else:
            decode[tier] = solve_pool(req, "decode", tier, cache, cap_chips=cap_d,
                                      progress=progress, done=done, total=total)
        done += n_tp["decode"]
        if req.batch_auto:
            tell(f"decode {decode[tier].kv_tier}: batch")
            decode[tier] = _fill(req, tier, decode[tier], cache)
            done += 1

    def solve_prefill(tier: str | int) -> None:
        nonlocal done, best_total
        d = decode[tier]
        cap = None
        if bounded and best_total is not None and d.chips is not None:
            cap = best_total - d.chips
        # A tier whose decode is infeasible: its prefill is searched anyway without a TTFT
        # target (memory checks and one simulation at the wall), so the answer can say what
        # both pools need; with one, its probes are not spent on a plan that cannot be. A
        # decode cut by the best plan cuts its prefill too.
        if bounded and ((d.chips is None and (req.sla.ttft_max_s is not None
                                              or bool(d.cut_reason)))
                        or (cap is not None and cap < 1)):
            prefill[tier] = _skipped(req, tier, d, cache)
        else:
            prefill[tier] = solve_pool(req, "prefill", tier, cache, cap_chips=cap, curve=curve,
                                       progress=progress, done=done, total=total)
        done += n_tp["prefill"]
        if req.objective == "chips":
            if pair_step:
                tell(f"prefill {d.kv_tier}: KV handoff")
            checked[tier] = check_pair(req, _tier_plan(req, tier, prefill[tier], d), cache)
            done += pair_step
            total_chips = checked[tier].total_chips
            if total_chips is not None:
                best_total = total_chips if best_total is None else min(best_total, total_chips)

    if one_by_one:
        for tier in sorted(tiers, key=lambda t: (req.eval_config("decode", t, 1, 1).kv()[1],
                                                 tiers.index(t))):
            solve_decode(tier)
            solve_prefill(tier)
    else:
        for tier in tiers:
            solve_decode(tier)
        order = sorted(tiers, key=lambda t: (decode[t].chips is None, decode[t].chips or 0,
                                             tiers.index(t))) if bounded else tiers
        for tier in order:
            solve_prefill(tier)

    plans: list[TierPlan] = []
    for tier in tiers:
        if tier in checked:
            plans.append(checked[tier])
            continue
        d, p = decode[tier], prefill[tier]
        if req.per_token_objective and d.feasible and p.chips is not None:
            tell(f"decode {d.kv_tier}: tokens per chip")
            d = most_tokens_per_chip(replace(req, decode_pp=d.pp), tier, d, p.chips, cache)
        if pair_step:
            tell(f"prefill {d.kv_tier}: KV handoff")
        plans.append(check_pair(req, _tier_plan(req, tier, p, d), cache))
        done += pair_step
    feasible = [t for t in plans if t.feasible]
    best = min(feasible, key=lambda t: (t.rank(req.objective), plans.index(t))) \
        if feasible else None
    used = cache.counts() - before
    return SolveResult(
        context_length=req.context_length, model=req.model.name, chip=req.chip.name,
        cluster=req.cluster.name, decode_chip=req.pool_chip("decode").name,
        decode_cluster=req.pool_cluster("decode").name, batch=req.batch, sla=req.sla,
        strategy=req.strategy,
        candidate_set=req.candidates, group_size=req.group_size or 1,
        max_chips=req.max_chips or req.cluster.max_chips, tiers=tuple(plans), best=best,
        sim_calls=used.sim_calls, cache_hits=used.cache_hits,
        earlier_run_hits=used.earlier_hits, objective=req.objective,
        prefill_tp=req.prefill_tp, decode_tp=req.decode_tp,
        prefill_pp=req.prefill_pp, decode_pp=req.decode_pp,
        cached_fraction=req.cached_fraction, policy=req.policy,
        warnings=point_warnings(req.eval_config("decode", tiers[0], 1, 1))
        + price_warnings(req),
    )


def price_warnings(req: SolveRequest) -> tuple[str, ...]:
    """Prices given, none for a pool's chip: say so (the cost figures stay unknown)."""
    if not req.prices:
        return ()
    named = ", ".join(name for name, _ in req.prices)
    missing = [c.name for c, price in ((req.chip, req.price_per_chip_hour),
                                       (req.pool_chip("decode"),
                                        req.decode_price_per_chip_hour)) if price is None]
    return tuple(f"prices: no price for chip {name} (prices given for {named}); the plan's "
                 f"cost is unknown: add --price {name}=PRICE/h"
                 for name in dict.fromkeys(missing))


def _tier_plan(req: SolveRequest, tier: str | int, prefill: PhasePlan,
               decode: PhasePlan) -> TierPlan:
    c_kv = req.eval_config("decode", tier, 1, 1).kv()[1]
    return TierPlan(kv_tier=decode.kv_tier, c_kv_bytes=c_kv, prefill=prefill, decode=decode,
                    tdp_w=req.chip.tdp_w, price_per_chip_hour=req.price_per_chip_hour,
                    decode_chip_own=req.decode_chip is not None,
                    decode_tdp_w=req.pool_chip("decode").tdp_w,
                    decode_price_per_chip_hour=req.decode_price_per_chip_hour)


def _fill(req: SolveRequest, tier: str | int, plan: PhasePlan, cache: EvalCache) -> PhasePlan:
    """The decode plan with its pool filled to the largest batch meeting the SLA; with
    ``--decode-dp auto`` the same chips as DP ranks too (``same_chips_dp``), the largest batch
    winning (ties: the lower TPOT, then fewer DP ranks)."""
    if plan.answer is None:
        return plan
    at = replace(req, decode_pp=plan.pp)
    filled = search_batch(at.with_dp(plan.dp), tier, plan.kv_tier, plan.tp, plan.answer, cache)
    candidates = plan.candidates + tuple(replace(c, pp=plan.pp) for c in filled.candidates)
    best, dp, n, wall = filled, plan.dp, plan.answer, plan.n_cap
    for k, outcome, k_wall in same_chips_dp(at, tier, plan, cache):
        candidates += outcome.candidates
        if (-outcome.plan.batch, outcome.plan.tpot_s) < (-best.plan.batch, best.plan.tpot_s):
            best, dp, n, wall = outcome, k, plan.answer // k, k_wall
    p = best.plan
    return replace(plan, batch=p.batch, latency_s=p.tpot_s, per_chip_bytes=p.per_chip_bytes,
                   batch_plan=p, limit_s=p.limit_s, answer=n, dp=dp, n_cap=wall,
                   dp_searched=plan.dp_searched or any(c.dp != plan.dp for c in candidates),
                   candidates=candidates)


def _skipped(req: SolveRequest, tier: str | int, decode: PhasePlan,
             cache: EvalCache) -> PhasePlan:
    """A prefill pool not searched: its tier's decode is infeasible or was cut by the best
    plan, or the decode pool alone already has as many chips as the best plan."""
    why = ("cannot beat the best plan: its decode pool already could not" if decode.cut_reason
           and decode.chips is None else
           "not searched: this tier's decode pool is infeasible" if decode.chips is None else
           "cannot beat the best plan: the decode pool alone takes "
           f"{format_count(decode.chips, 'chip')}")
    return _not_searched(req, "prefill", decode.kv_tier, f"prefill: {why}")


def _not_searched(req: SolveRequest, phase: str, tier_name: str, cut_reason: str) -> PhasePlan:
    """A pool of ``phase`` left unsearched by the best plan (or its tier's other pool), with
    what cut it."""
    tp = req.tp_fixed(phase) or 1
    return PhasePlan(
        phase=phase, kv_tier=tier_name, tp=tp, n_cap=None, bound_n=req.bound_n(phase, tp),
        limit_s=req.sla.limit_s(phase, req.base_batch), answer=None, latency_s=None,
        per_chip_bytes=None, strategy=req.strategy, fallback=False, fallback_reason="",
        scanned=None, candidates=(), infeasible_reason="", cut_reason=cut_reason,
        tp_searched=req.tp_fixed(phase) is None)
