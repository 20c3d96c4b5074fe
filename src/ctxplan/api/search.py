"""Searches: a solve's inputs built and checked (:func:`solve_request`), one solve, a sweep of
context lengths, and the cache they share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Unpack

from ctxplan.api.inputs import (
    ChipLike,
    ModelLike,
    context_lengths,
    other_pool_system,
    policy_of,
    resolve_chip,
    resolve_cluster,
    resolve_model,
    resolve_models,
)
from ctxplan.api.store import open_store
from ctxplan.config.checks import check_objective, check_point, check_search
from ctxplan.config.edge_warnings import context_warnings
from ctxplan.config.options import (
    RunOptions,
    SolveOptions,
    SweepOptions,
    complete_checked,
    declared,
    with_options,
)
from ctxplan.config.prices import parse_prices
from ctxplan.config.units import parse_seconds, parse_tokens
from ctxplan.errors import UserInputError
from ctxplan.report.plot import check_plot_path, plot_sweep
from ctxplan.solve import SLA, EvalCache, SolveRequest, SolveResult
from ctxplan.solve import solve as _solve
from ctxplan.solve.pareto import ParetoResult
from ctxplan.solve.pareto import pareto as _pareto
from ctxplan.sweep import Executor, SweepResult, make_executor, sweep_contexts
from ctxplan.sweep.output import check_out_path
from ctxplan.sweep.output import write_sweep as _write_sweep
from ctxplan.sweep.store import StoreLike


@with_options(SolveOptions)
def solve_request(model: ModelLike, chip: ChipLike, context_length: int | str,
                  **options: Unpack[SolveOptions]) -> SolveRequest:
    """Build and check a solve's inputs (no simulation). Times carry their unit (20ms, 1.5s;
    a bare number is refused);
    ``kv_tiers`` takes "mla-bf16,mla-fp8", a list, or None for the model's default tiers."""
    o = complete_checked(SolveOptions, options, "solve_request")
    m = resolve_model(model)
    c = resolve_chip(chip)
    k = resolve_cluster(o.pop("cluster"), c)
    dc, dk = other_pool_system(c, k, o.pop("decode_chip"), o.pop("decode_cluster"))
    asked_max = o["max_chips"]
    ttft_max = o.pop("ttft_max")
    sla = SLA(tpot_max_s=parse_seconds(o.pop("tpot_max"), "tpot_max", "ms"),
              ttft_max_s=None if ttft_max is None else parse_seconds(ttft_max, "ttft_max", "s"),
              tps_reading=o.pop("tps_reading"))
    tokens = parse_tokens(context_length)
    context_warnings(m, tokens, o.pop("strict_context"))   # may refuse (strict, above 16M)
    policy, search = policy_of(m, o)
    search["kv_tiers"] = search["kv_tiers"] or ()   # the model's default tiers
    search["prices"] = parse_prices(search["prices"])
    for pool_chip in dict.fromkeys([c, dc or c]):
        check_objective(search["objective"], pool_chip, search["prices"])
    decode_max = None if dk is None else min(asked_max or dk.max_chips, dk.max_chips)
    request = SolveRequest(model=m, chip=c, cluster=k, context_length=tokens, sla=sla,
                           policy=policy, decode_chip=dc, decode_cluster=dk,
                           decode_max_chips=decode_max, **check_search(m, k, policy, search))
    for phase in ("prefill", "decode"):
        # Every point the search may simulate shares these fields: one check per phase, at the
        # fixed TP degree (the model's heads) and at TP 1 (batch, context, cached prefix).
        fixed = request.tp_fixed(phase)
        for tp in dict.fromkeys([tp for tp in (fixed, 1) if tp is not None]):
            check_point(request.eval_config(phase, request.kv_tiers[0], 1, tp))
    return request.validated()


def eval_cache(store: StoreLike = None, cache: EvalCache | None = None) -> EvalCache:
    """``cache`` if given (its own store decides persistence), else a cache over ``store``."""
    if cache is not None:
        if store is not None and store is not False:
            raise UserInputError("store", str(store), "pass either cache= or store=, not "
                                 "both (a cache over the store: EvalCache(store=open_store(...)))")
        return cache
    results = open_store(store)
    return EvalCache(store=results) if results is not None else EvalCache()


@with_options(SolveOptions)
def solve(model: ModelLike, chip: ChipLike, context_length: int | str, *,
          cache: EvalCache | None = None, store: StoreLike = None,
          progress: Callable[[str, int, int], None] | None = None,
          **options: Unpack[SolveOptions]) -> SolveResult:
    """The minimum chip count N* = Np + Nd and its KV tier for one context length (or, with
    ``objective="tokens-per-chip"``, the plan with the most decode tokens/s per chip).

    Pass a shared ``cache`` (ctxplan.solve.EvalCache) to reuse simulations across calls, or a
    ``store`` (see :func:`open_store`) to reuse and record them in the SQLite result store.
    ``progress(label, done, total)`` is told what is being simulated and how many of the
    solve's sub-problems (pools per KV tier and TP degree) are done.
    """
    return _solve(solve_request(model, chip, context_length, **options),
                  cache=eval_cache(store, cache), progress=progress)


@with_options(SolveOptions)
def pareto(model: ModelLike, chip: ChipLike, context_length: int | str, *,
           cache: EvalCache | None = None, store: StoreLike = None,
           progress: Callable[[str, int, int], None] | None = None,
           **options: Unpack[SolveOptions]) -> ParetoResult:
    """Every decode shape searched (KV tier, TP, Nd, batch; the rule in
    ``ctxplan.solve.pareto``) with its tokens/s per chip and per user, and the non-dominated
    ones (``front``); each tier's prefill pool sized as ``solve`` sizes it, for the plan's
    tokens/s per chip (``plan_front``). ``cache`` / ``store`` as in :func:`solve`."""
    return _pareto(solve_request(model, chip, context_length, **options),
                   cache=eval_cache(store, cache), progress=progress)


def write_pareto_plot(result: ParetoResult, path: str | Path) -> None:
    """Write the Pareto plot (.png / .svg / .pdf) of ``result``."""
    from ctxplan.report.pareto_plot import plot_pareto

    plot_pareto(result.to_dict(), path)


@with_options(SweepOptions)
def sweep(model: ModelLike | Sequence[ModelLike], chip: ChipLike,
          contexts: str | Sequence[int | str], *,
          cache: EvalCache | None = None, executor: Executor | None = None,
          on_point: Callable[[SolveResult], None] | None = None, store: StoreLike = None,
          **options: Unpack[SweepOptions]) -> SweepResult:
    """Solve every context length ("8K,128K,1M" or a list): the N*(S) curve. ``model`` may name
    several models ("deepseek-v3,deepseek-v3.2" or a list): one curve each, side by side.

    ``on_point`` is called after each solve; ``store`` as in :func:`solve`. Points run in this
    process unless an ``executor`` or a ``backend`` is given: "serial", "process" (``workers``
    local processes, default min(2, cpus)) or "ray" (``address`` of a cluster, or a local
    instance; needs ``pip install 'ctxplan[ray]'``). Results come back in order, identical on
    every backend.
    """
    run_names = declared(RunOptions)
    run: dict[str, Any] = {name: options.get(name) for name in run_names}
    search: dict[str, Any] = {k: v for k, v in options.items() if k not in run_names}
    sizes = context_lengths(contexts)
    requests = [solve_request(m, chip, sizes[0], **search) for m in resolve_models(model)]
    strict = bool(search.get("strict_context", False))
    for r in requests:   # every context, before any runs: above 16M, or strict and too long
        for size in sizes:
            context_warnings(r.model, size, strict, "contexts")
    if executor is None and any(v is not None for v in run.values()):
        executor = make_executor(run["backend"], workers=run["workers"], address=run["address"])
    return sweep_contexts(requests, sizes, executor=executor, cache=eval_cache(store, cache),
                          on_point=on_point)


def check_sweep_outputs(out: str | Path | None = None, plot: str | Path | None = None) -> None:
    """Refuse a sweep's results file (.csv / .json) or plot (.png / .svg / .pdf) path that
    cannot be written, before the sweep runs."""
    if out is not None:
        check_out_path(out)
    if plot is not None:
        check_plot_path(plot)


def write_sweep(result: SweepResult, out: str | Path | None = None,
                plot: str | Path | None = None) -> None:
    """Write a sweep's results (``out``: CSV, one row per context, or JSON in full) and its
    N*(S) plot (``plot``)."""
    if out is not None:
        _write_sweep(result, out)
    if plot is not None:
        plot_sweep(result, plot)
