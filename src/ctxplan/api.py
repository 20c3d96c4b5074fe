"""The Python API: what the CLI calls, one function per command, returning typed results.

Every argument that names a preset also takes a path (YAML / JSON / HF config.json) or an
already-built object, so scripts can mix presets and their own definitions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxplan.config.hardware_presets import load_chip, load_cluster
from ctxplan.config.model_presets import load_model
from ctxplan.config.units import parse_tokens
from ctxplan.errors import UserInputError
from ctxplan.evaluate import EvalConfig, EvalResult, Trace
from ctxplan.evaluate import evaluate as _evaluate
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.mapping.layout import Precision
from ctxplan.model.spec import ModelSpec

if TYPE_CHECKING:
    from ctxplan.config.study import Point, Study
    from ctxplan.solve import EvalCache, SolveRequest, SolveResult
    from ctxplan.sweep import Executor, SweepResult
    from ctxplan.sweep.store import ResultStore, StoreLike
    from ctxplan.validate import ValidationReport

ModelLike = str | ModelSpec
ChipLike = str | Chip
ClusterLike = str | Cluster | None


def resolve_model(model: ModelLike) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else load_model(model)


def resolve_chip(chip: ChipLike) -> Chip:
    return chip if isinstance(chip, Chip) else load_chip(chip)


def resolve_cluster(cluster: ClusterLike, chip: Chip) -> Cluster:
    """The cluster given, or the chip's default cluster."""
    if isinstance(cluster, Cluster):
        return cluster
    return load_cluster(cluster if cluster else chip.default_cluster)


def precision_for(model: ModelSpec, attention_weights: str | None = None,
                  ffn_weights: str | None = None) -> Precision | None:
    """A Precision from per-part weight dtypes (None: the model's own weight dtype); None when
    neither is given, so the model's default applies."""
    if attention_weights is None and ffn_weights is None:
        return None
    return Precision(attention_weights=attention_weights or model.weight_dtype,
                     ffn_weights=ffn_weights or model.weight_dtype)


def eval_config(
    model: ModelLike,
    chip: ChipLike,
    context_length: int | str,
    phase: str,
    cp: int,
    *,
    cluster: ClusterLike = None,
    tp: int = 1,
    batch: int = 1,
    kv_tier: str | int | None = None,
    mla_mode: str | None = None,
    precision: Precision | None = None,
    full_simulation: bool = False,
    event_limit: int | None = None,
    pass_q: str = "broadcast",
    attention_weights: str | None = None,
    ffn_weights: str | None = None,
) -> EvalConfig:
    """Build and validate an evaluation configuration (no simulation). ``event_limit`` stops
    a simulation after that many events (None: the default, 200 million). ``pass_q`` is how
    decode moves queries to the KV shards: "broadcast" from the home rank or "ring".
    ``attention_weights`` / ``ffn_weights`` set the weight (and matmul) dtype of those parts,
    e.g. ffn_weights="fp8" for row-wise FP8 FFNs (ignored when ``precision`` is given)."""
    m = resolve_model(model)
    c = resolve_chip(chip)
    k = resolve_cluster(cluster, c)
    phase = str(phase).lower()
    precision = precision or precision_for(m, attention_weights, ffn_weights)
    cfg = EvalConfig(model=m, chip=c, cluster=k, phase=phase,
                     context_length=parse_tokens(context_length), cp=cp, tp=tp, batch=batch,
                     kv_tier=kv_tier, mla_mode=mla_mode, precision=precision,
                     event_limit=check_event_limit(event_limit), pass_q=pass_q)
    cfg.layout()  # validates every field now, with a clear message
    return cfg


def evaluate(
    model: ModelLike,
    chip: ChipLike,
    context_length: int | str,
    phase: str,
    cp: int,
    *,
    cluster: ClusterLike = None,
    tp: int = 1,
    batch: int = 1,
    kv_tier: str | int | None = None,
    mla_mode: str | None = None,
    precision: Precision | None = None,
    full_simulation: bool = False,
    trace_path: str | Path | None = None,
    event_limit: int | None = None,
    pass_q: str = "broadcast",
    attention_weights: str | None = None,
    ffn_weights: str | None = None,
    store: StoreLike = None,
) -> EvalResult:
    """Simulate one configuration: TTFT (prefill) or TPOT (decode), memory and CP bytes.

    ``trace_path`` writes a Chrome / Perfetto trace of the simulation there; a trace implies
    ``full_simulation`` so that it shows every layer and ends at the reported latency.
    ``store`` (a path, True for the default file, or a ResultStore; see :func:`open_store`)
    answers from the result store when it holds this configuration, and records it otherwise.
    """
    cfg = eval_config(model, chip, context_length, phase, cp, cluster=cluster, tp=tp,
                      batch=batch, kv_tier=kv_tier, mla_mode=mla_mode, precision=precision,
                      full_simulation=full_simulation or trace_path is not None,
                      event_limit=event_limit, pass_q=pass_q,
                      attention_weights=attention_weights, ffn_weights=ffn_weights)
    results = open_store(store)
    if results is not None and trace_path is None:
        stored = results.get(cfg.key())
        if stored is not None:
            return stored
    result, trace = _evaluate(cfg, trace=trace_path is not None)
    if results is not None:
        results[cfg.key()] = result
    if trace_path is not None:
        write_trace(trace, trace_path, result)
    return result


def solve_request(
    model: ModelLike,
    chip: ChipLike,
    context_length: int | str,
    *,
    cluster: ClusterLike = None,
    tpot_max: float | str = "20ms",
    ttft_max: float | str | None = None,
    tps_reading: str = "per-seq",
    kv_tiers: str | Sequence[str | int] | None = None,
    batch: int = 1,
    strategy: str = "galloping",
    candidates: str = "all",
    group_size: int | None = None,
    max_chips: int | None = None,
    prefill_tp: int = 1,
    decode_tp: int = 1,
    event_limit: int | None = None,
    pass_q: str = "broadcast",
    attention_weights: str | None = None,
    ffn_weights: str | None = None,
) -> SolveRequest:
    """Build and validate a solve's inputs (no simulation). Times take 20ms / 1.5s or seconds;
    ``kv_tiers`` takes "mla-bf16,mla-fp8", a list, or None for the model's default tiers."""
    from ctxplan.config.units import parse_seconds
    from ctxplan.solve import SLA, SolveRequest

    m = resolve_model(model)
    c = resolve_chip(chip)
    k = resolve_cluster(cluster, c)
    sla = SLA(tpot_max_s=parse_seconds(tpot_max, "tpot_max"),
              ttft_max_s=None if ttft_max is None else parse_seconds(ttft_max, "ttft_max"),
              tps_reading=tps_reading)
    if isinstance(kv_tiers, str):
        tiers: tuple[str | int, ...] = tuple(t.strip() for t in kv_tiers.split(",") if t.strip())
        if not tiers:
            raise UserInputError("kv_tiers", kv_tiers, "name tiers such as mla-bf16,mla-fp8, "
                                 "or leave the option out for the model's defaults")
    else:
        tiers = tuple(kv_tiers or ())
    return SolveRequest(model=m, chip=c, cluster=k, context_length=parse_tokens(context_length),
                        sla=sla, kv_tiers=tiers, batch=batch, strategy=strategy,
                        candidates=candidates, group_size=group_size, max_chips=max_chips,
                        prefill_tp=prefill_tp, decode_tp=decode_tp,
                        event_limit=check_event_limit(event_limit), pass_q=pass_q,
                        precision=precision_for(m, attention_weights, ffn_weights)).validated()


def solve(
    model: ModelLike,
    chip: ChipLike,
    context_length: int | str,
    *,
    cache: EvalCache | None = None,
    store: StoreLike = None,
    **options: Any,
) -> SolveResult:
    """The minimum chip count N* = Np + Nd and its KV tier for one context length.

    ``options`` are those of :func:`solve_request` (cluster, tpot_max, ttft_max, tps_reading,
    kv_tiers, batch, strategy, candidates, group_size, max_chips, prefill_tp, decode_tp).
    Pass a shared ``cache`` (ctxplan.solve.EvalCache) to reuse simulations across calls, or a
    ``store`` (see :func:`open_store`) to reuse and record them in the SQLite result store.
    """
    from ctxplan.solve import solve as _solve

    return _solve(solve_request(model, chip, context_length, **options),
                  cache=eval_cache(store, cache))


def sweep(
    model: ModelLike,
    chip: ChipLike,
    contexts: str | Sequence[int | str],
    *,
    cache: EvalCache | None = None,
    executor: Executor | None = None,
    on_point: Callable[[SolveResult], None] | None = None,
    store: StoreLike = None,
    backend: str | None = None,
    workers: int | None = None,
    address: str | None = None,
    **options: Any,
) -> SweepResult:
    """Solve every context length ("8K,128K,1M" or a list): the N*(S) curve.

    ``options`` are those of :func:`solve_request`; ``on_point`` is called after each solve.
    ``store`` as in :func:`solve`. Points run in this process unless an ``executor`` or a
    ``backend`` is given: "serial", "process" (``workers`` local processes, default
    min(2, cpus)) or "ray" (``address`` of a cluster, or a local instance; needs
    ``pip install 'ctxplan[ray]'``). Results come back in order, identical on every backend.
    """
    from ctxplan.config.units import parse_token_list
    from ctxplan.sweep import sweep_contexts

    if isinstance(contexts, str):
        sizes = parse_token_list(contexts)
    else:
        sizes = [parse_tokens(s, "contexts") for s in contexts]
        if not sizes:
            raise UserInputError("contexts", contexts, "give at least one context length")
    request = solve_request(model, chip, sizes[0], **options)
    if executor is None and (backend is not None or workers is not None or address is not None):
        from ctxplan.sweep import make_executor

        executor = make_executor(backend, workers=workers, address=address)
    return sweep_contexts(request, sizes, executor=executor, cache=eval_cache(store, cache),
                          on_point=on_point)


def open_store(store: StoreLike = True) -> ResultStore | None:
    """The SQLite result store: a path opens (or creates) that file; True the default file
    ($CTXPLAN_STORE, else $XDG_CACHE_HOME/ctxplan/results.sqlite, else
    ~/.cache/ctxplan/results.sqlite; CTXPLAN_STORE=off turns it off); None / False: none."""
    from ctxplan.sweep.store import open_store as _open_store

    return _open_store(store)


def eval_cache(store: StoreLike = None, cache: EvalCache | None = None) -> EvalCache:
    """``cache`` if given (its own store decides persistence), else a cache over ``store``."""
    from ctxplan.solve import EvalCache

    if cache is not None:
        if store is not None and store is not False:
            raise UserInputError("store", str(store), "pass either cache= or store=, not "
                                 "both (a cache over the store: EvalCache(store=open_store(...)))")
        return cache
    results = open_store(store)
    return EvalCache(store=results) if results is not None else EvalCache()


def validate(
    cases: str | Path | None = None,
    *,
    names: Sequence[str] | None = None,
) -> ValidationReport:
    """Simulate every validation case (``validation/*.yaml`` by default, or the directory
    ``cases``; only ``names`` if given) against its published measurement.

    Returns per case the measured and simulated latency and the signed relative error, and the
    median and worst absolute error (``report.summary()``). See docs/validation.md.
    """
    from ctxplan.validate import load_cases, run_validation

    return run_validation(load_cases(cases, names))


def check_event_limit(event_limit: int | None) -> int:
    """The simulation event limit to use (None: the default); a whole number >= 1."""
    from ctxplan.evaluate import DEFAULT_EVENT_LIMIT

    if event_limit is None:
        return DEFAULT_EVENT_LIMIT
    if isinstance(event_limit, bool) or not isinstance(event_limit, int) or event_limit < 1:
        raise UserInputError("event_limit", event_limit, "give a whole number of events >= 1 "
                             f"(default {DEFAULT_EVENT_LIMIT:,})")
    return event_limit


# ------------------------------------------------------------------- study and point files


def load_study(path: str | Path | None = None, *, sets: Sequence[str] = (),
               flags: Mapping[str, Any] | None = None) -> Study:
    """A study file (docs/study-files.md), with ``flags`` ({"sla.tpot_max": "30ms", ...})
    overriding it and ``sets`` ("chip.memory_gb=96", ...) applied last."""
    from ctxplan.config.study import load_study as _load_study

    return _load_study(path, sets=sets, flags=flags)


def load_point(path: str | Path | None = None, *, sets: Sequence[str] = (),
               flags: Mapping[str, Any] | None = None) -> Point:
    """A point file (docs/study-files.md), with ``flags`` and ``sets`` as in load_study."""
    from ctxplan.config.study import load_point as _load_point

    return _load_point(path, sets=sets, flags=flags)


def evaluate_point(point: Point | str | Path, *,
                   trace_path: str | Path | None = None,
                   store: StoreLike = None) -> EvalResult:
    """Simulate a loaded point (or the point file at a path); ``store`` as in evaluate."""
    p = point if not isinstance(point, str | Path) else load_point(point)
    return evaluate(p.model, p.chip, p.context_length, p.phase, p.cp, trace_path=trace_path,
                    store=store, **p.eval_options())


def solve_study(study: Study | str | Path, *, cache: EvalCache | None = None,
                executor: Executor | None = None,
                on_point: Callable[[SolveResult], None] | None = None,
                store: StoreLike = None, backend: str | None = None,
                workers: int | None = None, address: str | None = None) -> SweepResult:
    """Solve a loaded study (or the study file at a path) at each of its context lengths,
    sharing one cache; one point per context, in the study's order. ``store``, ``backend``,
    ``workers``, ``address`` as in :func:`sweep`."""
    s = study if not isinstance(study, str | Path) else load_study(study)
    return sweep(s.model, s.chip, list(s.contexts), cache=cache, executor=executor,
                 on_point=on_point, store=store, backend=backend, workers=workers,
                 address=address, **s.solve_options())


def write_trace(trace: Trace | None, path: str | Path, result: EvalResult) -> None:
    if trace is None:
        raise UserInputError("trace", str(path), "the configuration does not fit in memory, so "
                             "there is nothing to trace; pick one that fits",
                             "no simulation ran")
    from ctxplan.report.trace import write_chrome_trace

    write_chrome_trace(trace, path)
