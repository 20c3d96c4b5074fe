"""One sub-problem: the pool of one phase for one KV tier, over the TP degrees it may use.

Per TP degree: the capacity wall first (memory checks, no simulation), then the search over the
candidates at or above it, each evaluated through the shared cache. Across TP degrees the pool
with the fewest chips (N * TP) wins; ties go to the lower latency, then the smaller TP.

TP degrees are searched in order of the fewest chips they could possibly need (the wall, and for
a TTFT target the roofline bound), and each search is bounded by the best pool found so far:
N <= best_chips // TP. A TP whose lower bound is already above the best is never simulated
(status "cut"). With no latency bound for the phase (prefill without a TTFT SLA) a TP's answer
is its first candidate at the wall, simulated once for its TTFT (only when it could win).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ctxplan.config.units import format_count
from ctxplan.evaluate import TOO_LARGE, EvalResult, MemoryReport, check_memory, over_host_budget
from ctxplan.solve.cache import EvalCache
from ctxplan.solve.candidates import candidate_ns
from ctxplan.solve.request import SolveRequest
from ctxplan.solve.result import (
    BEST,
    BOUND,
    PEAK,
    WALL,
    Candidate,
    PhasePlan,
    TPOption,
    label,
)
from ctxplan.solve.roofline import ttft_lower_bound_s
from ctxplan.solve.search import (
    Probe,
    SearchOutcome,
    crossing,
    fit_inverse,
    fmt_seconds,
    search,
)
from ctxplan.solve.wall import Wall, capacity_wall, wall_reason

GB = 1e9

# (label of what runs now, sub-problems done, sub-problems in all)
Progress = Callable[[str, int, int], None]


@dataclass
class Curve:
    """Simulated (chips, latency) points of one phase, shared across TP degrees and KV tiers,
    from which the TTFT search takes its first guess (docs/solver.md, "The TTFT search")."""

    points: list[tuple[int, float]] = field(default_factory=list)

    def guess_chips(self, limit_s: float) -> float | None:
        """Chips at which latency = a / chips + b, fitted to every point by least squares
        (points of other TP degrees and tiers scatter around one curve, so no two of them
        are trusted alone), meets the limit."""
        pts = self.points
        if not pts:
            return None
        xs = [1.0 / c for c, _ in pts]
        ys = [t for _, t in pts]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        if sxx == 0:
            fit = fit_inverse([pts[0]])
        else:
            a = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
            fit = (a, my - a * mx) if a > 0 else None
        return None if fit is None else crossing(fit, limit_s)


@dataclass
class _TPRun:
    """The search of one TP degree, before it is compared with the others."""

    option: TPOption
    candidates: list[Candidate]
    evaluated: dict[int, tuple[EvalResult, bool]]


def solve_pool(req: SolveRequest, phase: str, tier: str | int, cache: EvalCache, *,
               batch: int | None = None, cap_chips: int | None = None,
               curve: Curve | None = None, progress: Progress | None = None,
               done: int = 0, total: int = 0) -> PhasePlan:
    """The pool of ``phase`` for ``tier`` over the pipeline depths it may use
    (``req.pp_choices``): each depth's search (:func:`_solve_depth`) bounded by the best pool
    of the depths before it, so a deeper pipeline is searched only below the chips already
    found. The fewest chips win; ties: the lower latency, then fewer stages, then the smaller
    TP. ``cap_chips``: a better plan elsewhere already bounds this pool's chips (the search
    stops there; nothing found is "cut", not infeasible)."""
    depths = req.pp_choices(phase)
    curve = curve if curve is not None else Curve()
    plans: list[PhasePlan] = []
    best: PhasePlan | None = None
    # Decode at a batch of several sequences: DP attention too (dp_choices; 1 for one
    # sequence), at one pipeline stage (DP inside stages is not modelled).
    at_batch = req.base_batch if batch is None else batch
    dps = (req.dp_choices(at_batch) or (1,)) if phase == "decode" else (1,)
    shapes = [(pp, dp) for pp in depths for dp in dps if dp == 1 or pp == 1]
    for pp, dp in shapes:
        cap = cap_chips
        if best is not None and best.chips is not None and req.strategy != "scan":
            cap = best.chips if cap is None else min(cap, best.chips)
        one = _solve_depth(req.with_pp(*((pp, req.decode_pp) if phase == "prefill"
                                         else (req.prefill_pp, pp))).with_dp(dp),
                           phase, tier, cache, batch=batch, cap_chips=cap, curve=curve,
                           progress=progress, done=done, total=total, pp=pp, dp=dp)
        plans.append(one)
        if one.feasible and (best is None or _plan_key(one) < _plan_key(best)):
            best = one
    if len(plans) == 1:
        return plans[0]
    chosen = best or plans[0]
    return replace(chosen, candidates=tuple(c for p in plans for c in p.candidates),
                   tp_options=tuple(o for p in plans for o in p.tp_options),
                   pp_searched=len(depths) > 1, dp_searched=len(dps) > 1)


def pool_floor_chips(req: SolveRequest, phase: str, tier: str | int,
                     batch: int | None = None) -> int | None:
    """The fewest chips any pool of ``phase`` for ``tier`` could have: the least over the
    pipeline depths and TP degrees it may use of the capacity wall's chips (memory checks
    only, no simulation; every answer is at or above its wall). None: nothing fits."""
    batch = req.base_batch if batch is None else batch
    best: int | None = None
    for pp in req.pp_choices(phase):
        at = req.with_pp(*((pp, req.decode_pp) if phase == "prefill" else (req.prefill_pp, pp)))
        for choice in at.tp_choices(phase):
            if choice.excluded:
                continue
            tp = choice.tp
            wall = capacity_wall(_memory(at, phase, tier, tp, batch), at.bound_n(phase, tp))
            if wall.n_cap is not None:
                chips = wall.n_cap * tp * pp * at.dp_at(phase)
                best = chips if best is None else min(best, chips)
    return best


def _plan_key(p: PhasePlan) -> tuple[float, float, int, int, int]:
    """Fewest chips, then the lower latency, fewer stages, fewer DP ranks, the smaller TP."""
    return (p.chips or 0, p.latency_s if p.latency_s is not None else float("inf"), p.pp,
            p.dp, p.tp)


def _solve_depth(req: SolveRequest, phase: str, tier: str | int, cache: EvalCache, *,
                 batch: int | None, cap_chips: int | None, curve: Curve,
                 progress: Progress | None, done: int, total: int, pp: int,
                 dp: int = 1) -> PhasePlan:
    """The pool of ``phase`` for ``tier`` at ``pp`` pipeline stages and ``dp`` DP ranks (fixed
    in ``req``): the TP degrees' searches, each candidate and option recorded with its ``pp``
    and ``dp``."""
    plan = _solve_tps(req, phase, tier, cache, batch=batch, cap_chips=cap_chips, curve=curve,
                      progress=progress, done=done, total=total)
    stages: tuple[tuple[int, int], ...] = ()
    if plan.answer is not None and pp > 1:
        cfg = req.eval_config(phase, tier, plan.answer, plan.tp, plan.batch)
        stages = cfg.layout().stages
    return replace(plan, pp=pp, stages=stages, dp=dp,
                   candidates=tuple(replace(c, pp=pp, dp=dp) for c in plan.candidates),
                   tp_options=tuple(replace(o, pp=pp, dp=dp) for o in plan.tp_options))


def _solve_tps(req: SolveRequest, phase: str, tier: str | int, cache: EvalCache, *,
               batch: int | None = None, cap_chips: int | None = None,
               curve: Curve | None = None, progress: Progress | None = None,
               done: int = 0, total: int = 0) -> PhasePlan:
    """The pool of ``phase`` for ``tier`` over the TP degrees at the request's pipeline
    depth."""
    batch = req.base_batch if batch is None else batch
    # chips per CP rank and TP chip: its pipeline stages x the DP ranks (one in each)
    stacked = (req.pp_fixed(phase) or 1) * req.dp_at(phase)
    limit = req.sla.limit_s(phase, batch)
    tier_name = req.eval_config(phase, tier, 1, 1, batch).kv()[0]
    pruning = req.strategy != "scan"
    curve = curve if curve is not None else Curve()

    options: list[TPOption] = []
    runs: dict[int, _TPRun] = {}
    walls: dict[int, Wall] = {}
    lower: dict[int, tuple[int, list[int], int]] = {}   # tp -> (fewest chips, cands, first)
    cut_cands: list[Candidate] = []
    choices = req.tp_choices(phase)
    for choice in choices:
        tp = choice.tp
        if choice.excluded:
            options.append(TPOption(tp, "excluded", choice.excluded))
            continue
        bound_n = req.bound_n(phase, tp)
        wall = capacity_wall(_memory(req, phase, tier, tp, batch), bound_n)
        walls[tp] = wall
        cut_cands += [_wall_candidate(phase, tier_name, n, tp, batch, mem)
                      for n, mem in wall.probes if not mem.fits]
        if wall.n_cap is None:
            options.append(TPOption(tp, "infeasible", wall_reason(phase, wall), None, bound_n))
            continue
        cands = [n for n in candidate_ns(req.candidates, bound_n, tp * stacked,
                                         req.group_size or 1) if n >= wall.n_cap]
        if not cands:
            options.append(TPOption(
                tp, "infeasible", f"{phase}: no '{req.candidates}' candidate between the "
                f"capacity wall N = {wall.n_cap} and the bound N = {bound_n}", wall.n_cap,
                bound_n))
            continue
        # The roofline bound at the most chips the pool may have (the chip bound, not the
        # host budget's cut below): where even that misses TTFT, no N of this TP can meet it,
        # whatever this machine can simulate.
        bound = _ttft_bound(req, tier, tp, batch) \
            if phase == "prefill" and limit is not None and pruning else None
        if bound is not None and limit is not None:
            n = cands[-1]
            at_most = bound(n)
            if at_most > limit:
                options.append(_bound_option(phase, tp, n, at_most, limit, wall, bound_n,
                                             cands[0]))
                cut_cands.append(_bound_candidate(
                    phase, tier_name, n, tp, batch, at_most, limit,
                    check_memory(req.eval_config(phase, tier, n, tp, batch))))
                continue
        # The simulator's memory is a ceiling like the chip bound: the graph grows with N, so
        # the candidates whose estimate is over the host budget are a tail, cut here and
        # recorded (the first of them), never probed.
        fit = _within_host_budget(req, phase, tier, tp, batch, cands)
        too_large_from = cands[fit] if fit < len(cands) else None
        if fit < len(cands):
            n = cands[fit]
            cfg = req.eval_config(phase, tier, n, tp, batch)
            cut_cands.append(_too_large_candidate(phase, tier_name, n, tp, batch,
                                                  over_host_budget(cfg), check_memory(cfg)))
            cands = cands[:fit]
            if not cands:
                options.append(TPOption(tp, "infeasible", f"{phase}: from N = {n} (the "
                                        f"capacity wall or above) {TOO_LARGE}", wall.n_cap,
                                        bound_n))
                continue
        first = cands[0]
        if bound is not None and limit is not None:
            first = next((n for n in cands if bound(n) <= limit), 0)
            if not first:
                # The bound is met only above what can be simulated here (the host budget's
                # cut): not infeasible, too large; the cut candidate above is on record.
                n = cands[-1]
                options.append(TPOption(
                    tp, "infeasible", f"{phase}: up to N = {n} the roofline bound misses TTFT "
                    f"<= {fmt_seconds(limit)} ({fmt_seconds(bound(n))} at N = {n}), and "
                    f"from N = {too_large_from} the graphs are {TOO_LARGE}", wall.n_cap, bound_n,
                    first_candidate=cands[0]))
                cut_cands.append(_bound_candidate(
                    phase, tier_name, n, tp, batch, bound(n), limit,
                    check_memory(req.eval_config(phase, tier, n, tp, batch))))
                continue
        lower[tp] = (first * tp * stacked, cands, first)

    order = sorted(lower, key=lambda tp: (lower[tp][0], tp))
    best: _TPRun | None = None
    cut_text = ""
    for k, tp in enumerate(order):
        fewest, cands, first = lower[tp]
        ceiling = _ceiling(best, cap_chips) if pruning else None
        bound_n = req.bound_n(phase, tp)
        if ceiling is not None and fewest > ceiling[0]:
            why = (f"needs at least {format_count(fewest, 'chip')} (N >= {first}: "
                   f"{'the TTFT bound' if first > cands[0] else 'the capacity wall'}), more "
                   f"than {ceiling[1]}")
            options.append(TPOption(tp, "cut", why, walls[tp].n_cap, bound_n,
                                    first_candidate=cands[0]))
            cut_text = cut_text or why
            continue
        if progress is not None:
            progress(f"{phase} {tier_name} TP{tp}", done + k, total)
        searched = [n for n in cands if ceiling is None or n * tp * stacked <= ceiling[0]]
        run = _search_tp(req, phase, tier, tier_name, tp, batch, limit, searched, cands,
                         walls[tp], cache, curve, progress, done + k, total)
        runs[tp] = run
        if run.option.answer is None:
            if ceiling is not None and len(searched) < len(cands):
                upto = f"nothing up to N = {searched[-1]} meets the target; " if searched else ""
                run.option = _with(run.option, "cut", f"{upto}more chips cannot beat "
                                   f"{ceiling[1]}")
                cut_text = cut_text or run.option.why
            options.append(run.option)
            continue
        if best is None or _key(run) < _key(best):
            if best is not None:
                _demote(best, run)
            best = run
        else:
            _demote(run, best)

    options += [run.option for run in runs.values() if run.option.status != "infeasible"
                and run.option.status != "cut"]
    options.sort(key=lambda o: o.tp)
    return _plan(req, phase, tier_name, limit, batch, options, runs, best, cut_cands,
                 cap_chips, cut_text, len(choices) > 1)


def _memory(req: SolveRequest, phase: str, tier: str | int, tp: int, batch: int
            ) -> Callable[[int], MemoryReport]:
    return lambda n: check_memory(req.eval_config(phase, tier, n, tp, batch))


def _ttft_bound(req: SolveRequest, tier: str | int, tp: int, batch: int
                ) -> Callable[[int], float]:
    return lambda n: ttft_lower_bound_s(req.eval_config("prefill", tier, n, tp, batch))


def _bound_option(phase: str, tp: int, n: int, bound_s: float, limit: float, wall: Wall,
                  bound_n: int, first: int) -> TPOption:
    """A TP degree the roofline bound rules out at the most chips its pool may have."""
    return TPOption(tp, "infeasible", f"{phase}: even N = {n} (the bound) cannot meet TTFT <= "
                    f"{fmt_seconds(limit)}: its compute alone takes {fmt_seconds(bound_s)} at "
                    "peak (the roofline bound)", wall.n_cap, bound_n, first_candidate=first)


def _ceiling(best: _TPRun | None, cap_chips: int | None) -> tuple[int, str] | None:
    """The most chips a pool may still have to be worth searching, and what set it."""
    out: tuple[int, str] | None = None
    if best is not None and best.option.chips is not None:
        out = (best.option.chips, f"TP{best.option.tp} with "
               f"{format_count(best.option.chips, 'chip')}")
    if cap_chips is not None and (out is None or cap_chips < out[0]):
        out = (cap_chips, f"{format_count(cap_chips, 'chip')} (the best plan of another KV "
               "tier leaves no more)")
    return out


def _key(run: _TPRun) -> tuple[float, float, int]:
    o = run.option
    return (o.chips or 0, o.latency_s if o.latency_s is not None else float("inf"), o.tp)


def _demote(loser: _TPRun, winner: _TPRun) -> None:
    lo, wo = loser.option, winner.option
    if (lo.chips or 0) > (wo.chips or 0):
        why = f"{format_count(lo.chips, 'chip')}, more than TP{wo.tp}'s {wo.chips}"
        loser.option = _with(lo, "more chips", why)
    else:
        chips = format_count(lo.chips, "chip")
        why = (f"{chips} as TP{wo.tp}, but {fmt_seconds(lo.latency_s)} against "
               f"{fmt_seconds(wo.latency_s)}" if lo.latency_s != wo.latency_s
               else f"{chips} and the same latency as TP{wo.tp}, the smaller TP")
        loser.option = _with(lo, "slower", why)


def _with(o: TPOption, status: str, why: str) -> TPOption:
    return TPOption(o.tp, status, why, o.n_cap, o.bound_n, o.answer, o.latency_s,
                    o.per_chip_bytes, o.fallback, o.fallback_reason, o.scanned,
                    o.first_candidate)


def _search_tp(req: SolveRequest, phase: str, tier: str | int, tier_name: str, tp: int,
               batch: int, limit: float | None, searched: list[int], cands: list[int],
               wall: Wall, cache: EvalCache, curve: Curve, progress: Progress | None,
               done: int, total: int) -> _TPRun:
    """Search one TP degree over ``searched`` (``cands`` cut at the ceiling)."""
    evaluated: dict[int, tuple[EvalResult, bool]] = {}

    def latency(n: int) -> float | None:
        if progress is not None:
            progress(f"{phase} {tier_name} TP{tp}: simulating N = {n}", done, total)
        evaluated[n] = cache.evaluate(req.eval_config(phase, tier, n, tp, batch))
        got = evaluated[n][0]
        lat = got.latency_s
        if lat is not None:
            curve.points.append((n * tp * (req.pp_fixed(phase) or 1), lat))
        # Over the memory by its simulated peak: simulated, but not a plan.
        return lat if got.memory.fits else None

    bound_fn = None
    if phase == "prefill" and limit is not None:
        bound_fn = _ttft_bound(req, tier, tp, batch)
    if not searched:
        outcome = SearchOutcome(None, (), req.strategy)
    elif limit is None:
        # The capacity minimum; up the candidates while one does not fit by its simulated
        # peak (the wall is a lower bound).
        probes = []
        for n in searched:
            lat = latency(n)
            probes.append(Probe(n, lat, lat is not None, "wall"))
            if lat is not None:
                break
        outcome = SearchOutcome(probes[-1].n if probes[-1].passed else None, tuple(probes),
                                req.strategy)
    else:
        guess = curve.guess_chips(limit) if bound_fn is not None else None
        hint = None
        if guess is not None and math.isfinite(guess):
            hint = max(1, min(searched[-1] + 1, math.ceil(guess / tp)))
        outcome = search(searched, latency, limit, req.strategy,
                         verify_above=req.verify_above, lower_bound=bound_fn, hint=hint)
    recorded: list[Candidate] = []
    if outcome.bound_cut is not None:
        n, value = outcome.bound_cut
        recorded.append(_bound_candidate(
            phase, tier_name, n, tp, batch, value, limit or 0.0,
            check_memory(req.eval_config(phase, tier, n, tp, batch))))
    recorded += [_probe_candidate(phase, tier_name, tp, batch, p, *evaluated[p.n], limit)
                 for p in outcome.probes]
    answer = outcome.answer
    at = evaluated[answer][0] if answer is not None else None
    reason = ""
    if answer is None and searched:
        best = outcome.best()
        best_text = (f"; the fastest point tried is {fmt_seconds(best.latency_s)} at N = {best.n}"
                     if best else "")
        first = searched[0] if outcome.bound_cut is None else \
            next(n for n in searched if n > outcome.bound_cut[0])
        reason = (f"{phase}: no N in [{first}, {searched[-1]}] ('{req.candidates}' "
                  f"candidates, {req.strategy}) meets {label(phase)} <= "
                  f"{fmt_seconds(limit)}{best_text}")
        if outcome.bound_cut is not None:
            reason += (f" (N <= {outcome.bound_cut[0]} cannot: their compute alone takes "
                       f"{fmt_seconds(outcome.bound_cut[1])} or more at peak)")
        if outcome.fallback:
            reason += f" ({outcome.fallback_reason}; --strategy scan checks every point)"
    option = TPOption(
        tp, "chosen" if answer is not None else "infeasible", reason or "",
        wall.n_cap, searched[-1] if searched else wall.bound_n, answer,
        at.latency_s if at else None, at.memory.per_chip_bytes if at else None,
        outcome.fallback, outcome.fallback_reason, outcome.scanned, cands[0])
    return _TPRun(option, recorded, evaluated)


def _plan(req: SolveRequest, phase: str, tier_name: str, limit: float | None, batch: int,
          options: list[TPOption], runs: dict[int, _TPRun], best: _TPRun | None,
          cut_cands: list[Candidate], cap_chips: int | None, cut_text: str,
          tp_searched: bool) -> PhasePlan:
    candidates = tuple(cut_cands) + tuple(c for tp in sorted(runs) for c in runs[tp].candidates)
    fallback = any(o.fallback for o in options)
    fallback_reason = "; ".join(f"TP{o.tp}: {o.fallback_reason}" if tp_searched
                                else o.fallback_reason for o in options if o.fallback)
    if best is not None:
        o = best.option
        return PhasePlan(
            phase=phase, kv_tier=tier_name, tp=o.tp, n_cap=o.n_cap, bound_n=o.bound_n,
            limit_s=limit, answer=o.answer, latency_s=o.latency_s,
            per_chip_bytes=o.per_chip_bytes, strategy=req.strategy, fallback=fallback,
            fallback_reason=fallback_reason, scanned=o.scanned, candidates=candidates,
            infeasible_reason="", tp_options=tuple(options),
            bound_by=bound_by(phase, o), batch=batch, tp_searched=tp_searched,
            ring=_ring_used(best.evaluated[o.answer][0]) if o.answer is not None else None,
            **_answer_memory(best.evaluated[o.answer][0] if o.answer is not None else None))
    tried = [o for o in options if o.status != "excluded"] or options
    first = tried[0] if tried else TPOption(1, "infeasible", "no TP degree")
    cut_reason = ""
    if any(o.status == "cut" for o in options):
        # Nothing was found below a ceiling set by another tier's plan: this pool may exist
        # above it, but it could not make this tier win.
        cut_reason = f"{phase}: cannot beat the best plan: {cut_text}"
    reasons = [o for o in options if o.status == "infeasible"]
    if cut_reason:
        reason = ""
    elif len(reasons) == 1 and not tp_searched:
        reason = reasons[0].why
    else:
        joined = "; ".join(f"TP{o.tp}: {o.why.removeprefix(phase + ': ')}" for o in reasons)
        reason = f"{phase}: no TP degree works: {joined}" if joined else f"{phase}: infeasible"
    if not tp_searched and not cut_reason:
        reason += _other_tps_fit(req, phase, first.tp, batch)
    return PhasePlan(
        phase=phase, kv_tier=tier_name, tp=first.tp, n_cap=first.n_cap,
        bound_n=first.bound_n or req.bound_n(phase, first.tp), limit_s=limit, answer=None,
        latency_s=None, per_chip_bytes=None, strategy=req.strategy, fallback=fallback,
        fallback_reason=fallback_reason, scanned=first.scanned, candidates=candidates,
        infeasible_reason=reason, tp_options=tuple(options), bound_by=None, batch=batch,
        cut_reason=cut_reason, tp_searched=tp_searched)


def _ring_used(result: EvalResult) -> str | None:
    """The prefill ring the chosen point's full-attention layers used (None for decode)."""
    return result.ring.used if result.ring is not None else None


def bound_by(phase: str, o: TPOption) -> str:
    """What decided the pool's N (docs/solver.md, "What binds"): the latency target when the
    answer is above the first candidate at the wall; else the capacity wall, or, for a pool
    of a single rank of TP > 1 chips, its TP degree."""
    if o.answer is not None and o.first_candidate is not None and o.answer > o.first_candidate:
        return "ttft" if phase == "prefill" else "tpot"
    if o.answer == 1 and o.tp > 1:
        return "tp"
    return "capacity"


def _other_tps_fit(req: SolveRequest, phase: str, fixed: int, batch: int) -> str:
    """For a fixed TP that fails: the TP degrees whose memory would fit (memory checks only)."""
    from dataclasses import replace

    auto = replace(req, **{f"{phase}_tp": "auto"})  # type: ignore[arg-type]
    fits: list[str] = []
    first = 0
    for choice in auto.tp_choices(phase):
        if choice.excluded or choice.tp == fixed:
            continue
        wall = capacity_wall(_memory(auto, phase, auto.kv_tiers[0], choice.tp, batch),
                             auto.bound_n(phase, choice.tp))
        if wall.n_cap is not None:
            fits.append(f"TP{choice.tp} fits from N = {wall.n_cap}")
            first = first or choice.tp
    if not fits:
        return ""
    return (f"; with another TP degree: {', '.join(fits)} (use --{phase}-tp {first}, or "
            f"--{phase}-tp auto to search them)")


def _answer_memory(at: EvalResult | None) -> dict[str, Any]:
    """The answer's memory (simulated peak) and, for a prefill, its chunking."""
    if at is None:
        return {}
    chunk = at.prefill_chunk.to_dict() if at.prefill_chunk is not None else None
    return {"memory": at.memory.to_dict(), "prefill_chunk": chunk}


def _within_host_budget(req: SolveRequest, phase: str, tier: str | int, tp: int, batch: int,
                        cands: list[int]) -> int:
    """How many of ``cands`` (ascending N) have graphs within the host memory budget: the
    estimate grows with N, so a binary search finds the first over it."""
    lo, hi = 0, len(cands)
    while lo < hi:
        mid = (lo + hi) // 2
        if over_host_budget(req.eval_config(phase, tier, cands[mid], tp, batch)):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _too_large_candidate(phase: str, tier: str, n: int, tp: int, batch: int, why: str,
                         mem: MemoryReport) -> Candidate:
    """The smallest N whose graph is over the host budget (every larger one is too)."""
    return Candidate(phase=phase, kv_tier=tier, n=n, tp=tp, latency_s=None,
                     per_chip_bytes=mem.per_chip_bytes, capacity_bytes=mem.capacity_bytes,
                     fits=mem.fits, meets_sla=False, simulated=False, cache_hit=False,
                     cut_by=TOO_LARGE, step="budget", why=f"{why}, and so is every larger N",
                     batch=batch)


def _wall_candidate(phase: str, tier: str, n: int, tp: int, batch: int,
                    mem: MemoryReport) -> Candidate:
    why = (f"does not fit: {mem.per_chip_bytes / GB:.1f} GB per chip > {mem.usable_text()} "
           f"(weights {mem.weights_bytes / GB:.1f}, KV {mem.kv_bytes / GB:.1f})")
    return Candidate(phase=phase, kv_tier=tier, n=n, tp=tp, latency_s=None,
                     per_chip_bytes=mem.per_chip_bytes, capacity_bytes=mem.capacity_bytes,
                     fits=False, meets_sla=False, simulated=False, cache_hit=False, cut_by=WALL,
                     step="memory", why=why, batch=batch)


def _bound_candidate(phase: str, tier: str, n: int, tp: int, batch: int, bound_s: float,
                     limit: float, mem: MemoryReport) -> Candidate:
    """The largest N the TTFT bound rules out (every N below it is ruled out too)."""
    why = (f"cannot meet TTFT <= {fmt_seconds(limit)}: its compute alone takes "
           f"{fmt_seconds(bound_s)} at peak (roofline bound), and so does every smaller N")
    return Candidate(phase=phase, kv_tier=tier, n=n, tp=tp, latency_s=None,
                     per_chip_bytes=mem.per_chip_bytes, capacity_bytes=mem.capacity_bytes,
                     fits=mem.fits,
                     meets_sla=False, simulated=False, cache_hit=False, cut_by=BOUND,
                     step="bound", why=why, batch=batch)


def _probe_candidate(phase: str, tier: str, tp: int, batch: int, p: Probe, result: EvalResult,
                     hit: bool, limit: float | None) -> Candidate:
    mem = result.memory
    if not result.simulated:
        why = result.reason
    elif limit is None:
        why = f"no {label(phase)} SLA: the capacity minimum, simulated for its {label(phase)}"
    else:
        op = "<=" if p.passed else ">"
        why = f"{label(phase)} {fmt_seconds(p.latency_s)} {op} {fmt_seconds(limit)}"
    cut_by = None
    if not mem.fits:
        cut_by = PEAK if result.simulated else WALL
        why = result.reason
    return Candidate(phase=phase, kv_tier=tier, n=p.n, tp=tp,
                     latency_s=result.latency_s if result.simulated else p.latency_s,
                     per_chip_bytes=mem.per_chip_bytes, capacity_bytes=mem.capacity_bytes,
                     fits=mem.fits, meets_sla=p.passed, simulated=result.simulated,
                     cache_hit=hit, cut_by=cut_by, step=p.step, why=why,
                     batch=batch)


__all__ = ["BEST", "Curve", "Progress", "bound_by", "solve_pool"]
