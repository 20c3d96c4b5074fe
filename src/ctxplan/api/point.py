"""One point: build and check an evaluation (:func:`eval_config`), simulate it
(:func:`evaluate`), write its trace."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Unpack

from ctxplan.api.inputs import (
    ChipLike,
    ModelLike,
    other_pool_system,
    policy_of,
    resolve_chip,
    resolve_cluster,
    resolve_model,
)
from ctxplan.api.store import open_store
from ctxplan.config.checks import check_point
from ctxplan.config.edge_warnings import context_warnings, point_warnings
from ctxplan.config.options import EvalOptions, complete_checked, with_options
from ctxplan.config.units import parse_tokens
from ctxplan.errors import UserInputError
from ctxplan.evaluate import EvalConfig, EvalResult, Trace
from ctxplan.evaluate import evaluate as _evaluate
from ctxplan.model.precision import Precision
from ctxplan.report.trace import write_chrome_trace
from ctxplan.sweep.store import StoreLike


@with_options(EvalOptions)
def eval_config(model: ModelLike, chip: ChipLike, context_length: int | str, phase: str, cp: int,
                *, precision: Precision | None = None,
                **options: Unpack[EvalOptions]) -> EvalConfig:
    """Build and check an evaluation configuration (no simulation). ``precision`` (a
    Precision) takes the place of ``attention_weights`` / ``ffn_weights`` when given."""
    o = complete_checked(EvalOptions, options, "eval_config")
    m = resolve_model(model)
    c = resolve_chip(chip)
    k = resolve_cluster(o.pop("cluster"), c)
    hc, hk = other_pool_system(c, k, o.pop("handoff_chip"), o.pop("handoff_cluster"))
    strict = o.pop("strict_context")
    tokens = parse_tokens(context_length)
    context_warnings(m, tokens, strict)   # refuses above 16M, and above the limit if strict
    policy, layout = policy_of(m, o, precision)
    return check_point(EvalConfig(model=m, chip=c, cluster=k, phase=str(phase).lower(),
                                  context_length=tokens, cp=cp, policy=policy,
                                  handoff_chip=hc, handoff_cluster=hk, **layout))


@with_options(EvalOptions)
def evaluate(model: ModelLike, chip: ChipLike, context_length: int | str, phase: str, cp: int,
             *, trace_path: str | Path | None = None, store: StoreLike = None,
             precision: Precision | None = None, **options: Unpack[EvalOptions]) -> EvalResult:
    """Simulate one configuration: TTFT (prefill) or TPOT (decode), memory and CP bytes.

    ``trace_path`` writes a Chrome / Perfetto trace of the simulation there; a trace simulates
    every layer (no periodic shortcut) so that it ends at the reported latency.
    ``store`` (a path, True for the default file, or a ResultStore; see :func:`open_store`)
    answers from the result store when it holds this configuration, and records it otherwise.
    """
    if trace_path is not None:
        options["periodic_shortcut"] = False
    cfg = eval_config(model, chip, context_length, phase, cp, precision=precision, **options)
    warnings = point_warnings(cfg)
    results = open_store(store)
    if results is not None and trace_path is None:
        stored = results.get(cfg.key())
        if stored is not None:
            return replace(stored, warnings=warnings)
    result, trace = _evaluate(cfg, trace=trace_path is not None)
    if results is not None:
        results[cfg.key()] = result
    if trace_path is not None:
        write_trace(trace, trace_path, result)
    return replace(result, warnings=warnings)


def write_trace(trace: Trace | None, path: str | Path, result: EvalResult) -> None:
    if trace is None:
        raise UserInputError("trace", str(path), "the configuration does not fit in memory, so "
                             "there is nothing to trace; pick one that fits",
                             "no simulation ran")
    write_chrome_trace(trace, path)
