"""Running a sensitivity study: the base solve, then one solve per figure and step.

Each moved point is a full solve (``ctxplan solve`` with one chip / cluster figure or one SLA
moved, everything else as given), so N* may move; beside it the base plan (its Np, Nd, TP and
KV tier) is evaluated with the figure moved, so the latency effect of a figure shows even where
N* does not move. Every evaluation goes through one cache (and the result store under it): a
point the study has already simulated, in this run or an earlier one, is not simulated again,
and SLA moves reuse the base points almost entirely.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from ctxplan.hardware.perturb import figure_value, scale
from ctxplan.sensitivity.figures import DECODE
from ctxplan.sensitivity.result import FigureRow, Move, Outcome, SensitivityStudy
from ctxplan.solve import EvalCache, SolveRequest, SolveResult, solve

OnSolve = Callable[[str, float], None]


def run_sensitivity(request: SolveRequest, figures: Sequence[str], factors: Sequence[float],
                    cache: EvalCache | None = None,
                    on_solve: OnSolve | None = None) -> SensitivityStudy:
    """Move each of ``figures`` by each of ``factors`` (see the module docstring)."""
    req = request.validated()
    cache = cache if cache is not None else EvalCache()
    before = cache.counts()
    base_result = solve(req, cache)
    base = Outcome.of(base_result)
    rows = []
    for figure in figures:
        value = _value(req, figure)
        moves = []
        for factor in factors:
            moves.append(_move(req, base_result, figure, factor, cache))
            if on_solve is not None:
                on_solve(figure, factor)
        rows.append(FigureRow(figure, value, tuple(moves)))
    order = sorted(range(len(rows)), key=lambda i: (tuple(-x for x in rows[i].effect(base)), i))
    used = cache.counts() - before
    return SensitivityStudy(
        model=req.model.name, chip=req.chip.name, cluster=req.cluster.name,
        context_length=req.context_length, factors=tuple(factors), base=base,
        rows=tuple(rows[i] for i in order), sim_calls=used.sim_calls,
        cache_hits=used.cache_hits, earlier_run_hits=used.earlier_hits,
        warnings=base_result.warnings, decode_chip=req.pool_chip("decode").name,
        decode_cluster=req.pool_cluster("decode").name)


def _value(req: SolveRequest, figure: str) -> float:
    if figure == "sla.tpot_max":
        return req.sla.tpot_max_s
    if figure == "sla.ttft_max":
        assert req.sla.ttft_max_s is not None
        return req.sla.ttft_max_s
    if figure.startswith(DECODE):
        return figure_value(req.pool_chip("decode"), req.pool_cluster("decode"),
                            figure[len(DECODE):])
    return figure_value(req.chip, req.cluster, figure)


def moved_request(req: SolveRequest, figure: str, factor: float) -> SolveRequest:
    """``req`` with one figure scaled (ValueError when the scaled figure is not valid)."""
    if figure == "sla.tpot_max":
        return replace(req, sla=replace(req.sla, tpot_max_s=req.sla.tpot_max_s * factor))
    if figure == "sla.ttft_max":
        assert req.sla.ttft_max_s is not None
        return replace(req, sla=replace(req.sla, ttft_max_s=req.sla.ttft_max_s * factor))
    if figure.startswith(DECODE):   # the decode pool's own chip or cluster
        chip, cluster = scale(req.pool_chip("decode"), req.pool_cluster("decode"),
                              figure[len(DECODE):], factor)
        if figure.startswith(DECODE + "chip."):
            return replace(req, decode_chip=chip)
        return replace(req, decode_cluster=cluster,
                       decode_max_chips=min(req.pool_max_chips("decode"), cluster.max_chips))
    chip, cluster = scale(req.chip, req.cluster, figure, factor)
    return replace(req, chip=chip, cluster=cluster)


def _move(req: SolveRequest, base: SolveResult, figure: str, factor: float,
          cache: EvalCache) -> Move:
    try:
        moved = moved_request(req, figure, factor)
    except ValueError as exc:
        return Move(factor, None, None, None, None, f"the moved figure is not valid: {exc}")
    outcome = Outcome.of(solve(moved, cache))
    ttft, tpot = base_plan_latencies(moved, base, cache)
    return Move(factor, _value(moved, figure), outcome, ttft, tpot)


def base_plan_latencies(req: SolveRequest, base: SolveResult,
                        cache: EvalCache) -> tuple[float | None, float | None]:
    """TTFT and TPOT of the base plan under ``req``'s hardware, measured as the base measured
    them: its pools and KV tier, the decode pool at its batch (the one ``--batch auto`` chose),
    and the prefill with its KV handoff to the decode pool when the base simulated one."""
    b = base.best
    if b is None or b.prefill.answer is None or b.decode.answer is None:
        return None, None
    req = req.with_pp(b.prefill.pp, b.decode.pp)
    if b.handoff is not None and b.handoff.simulated:
        pre_cfg = req.pair_config(b.kv_tier, b.prefill.answer, b.prefill.tp, b.decode.answer,
                                  b.decode.tp)
    else:
        pre_cfg = req.eval_config("prefill", b.kv_tier, b.prefill.answer, b.prefill.tp)
    pre, _ = cache.evaluate(pre_cfg)
    dec, _ = cache.evaluate(req.eval_config("decode", b.kv_tier, b.decode.answer,
                                            b.decode.tp, b.decode.batch))
    return pre.latency_s, dec.latency_s
