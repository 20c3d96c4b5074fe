"""The Python API: what the CLI calls, one function per command, returning typed results.

Every argument that names a preset also takes a path (YAML / JSON / HF config.json) or an
already-built object, so scripts can mix presets and their own definitions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from ctxplan.config.hardware_presets import load_chip, load_cluster
from ctxplan.config.model_presets import load_model
from ctxplan.config.options import (
    CapacityOptions,
    EvalOptions,
    RunOptions,
    SensitivityOptions,
    SensitivityStudyOptions,
    ServingOptions,
    SolveOptions,
    SweepOptions,
    complete,
    declared,
    with_options,
)
from ctxplan.config.units import parse_tokens
from ctxplan.errors import UserInputError
from ctxplan.evaluate import EvalConfig, EvalResult, Trace
from ctxplan.evaluate import evaluate as _evaluate
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.model.precision import Precision
from ctxplan.model.spec import ModelSpec

if TYPE_CHECKING:
    from ctxplan.config.study import Point, Study
    from ctxplan.sensitivity import SensitivityStudy
    from ctxplan.serve import CapacityRequest, CapacityResult
    from ctxplan.solve import EvalCache, SolveRequest, SolveResult
    from ctxplan.sweep import Executor, SweepResult
    from ctxplan.sweep.store import ResultStore, StoreLike
    from ctxplan.validate import SensitivityResult, ValidationReport

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


@with_options(EvalOptions)
def eval_config(model: ModelLike, chip: ChipLike, context_length: int | str, phase: str, cp: int,
                *, precision: Precision | None = None,
                **options: Unpack[EvalOptions]) -> EvalConfig:
    """Build and validate an evaluation configuration (no simulation). ``precision`` (a
    Precision) takes the place of ``attention_weights`` / ``ffn_weights`` when given."""
    o = complete(EvalOptions, options, "eval_config")
    m = resolve_model(model)
    c = resolve_chip(chip)
    k = resolve_cluster(o.pop("cluster"), c)
    weights = precision_for(m, o.pop("attention_weights"), o.pop("ffn_weights"))
    o["event_limit"] = check_event_limit(o["event_limit"])
    o["cached"] = cached_tokens(o["cached"])
    o["memory_headroom"] = check_memory_headroom(o["memory_headroom"])
    cfg = EvalConfig(model=m, chip=c, cluster=k, phase=str(phase).lower(),
                     context_length=parse_tokens(context_length), cp=cp,
                     precision=precision or weights, **o)
    cfg.layout()  # validates every field now, with a clear message
    cfg.handoff_layout()
    return cfg


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


@with_options(SolveOptions)
def solve_request(model: ModelLike, chip: ChipLike, context_length: int | str,
                  **options: Unpack[SolveOptions]) -> SolveRequest:
    """Build and validate a solve's inputs (no simulation). Times carry their unit (20ms, 1.5s;
    a bare number is refused);
    ``kv_tiers`` takes "mla-bf16,mla-fp8", a list, or None for the model's default tiers."""
    from ctxplan.config.units import parse_seconds
    from ctxplan.solve import SLA, SolveRequest

    o = complete(SolveOptions, options, "solve_request")
    m = resolve_model(model)
    c = resolve_chip(chip)
    k = resolve_cluster(o.pop("cluster"), c)
    ttft_max = o.pop("ttft_max")
    sla = SLA(tpot_max_s=parse_seconds(o.pop("tpot_max"), "tpot_max", "ms"),
              ttft_max_s=None if ttft_max is None else parse_seconds(ttft_max, "ttft_max", "s"),
              tps_reading=o.pop("tps_reading"))
    kv_tiers = o.pop("kv_tiers")
    if isinstance(kv_tiers, str):
        tiers: tuple[str | int, ...] = tuple(t.strip() for t in kv_tiers.split(",") if t.strip())
        if not tiers:
            raise UserInputError("kv_tiers", kv_tiers, "name tiers such as mla-bf16,mla-fp8, "
                                 "or leave the option out for the model's defaults")
    else:
        tiers = tuple(kv_tiers or ())
    precision = precision_for(m, o.pop("attention_weights"), o.pop("ffn_weights"))
    o["event_limit"] = check_event_limit(o["event_limit"])
    o["memory_headroom"] = check_memory_headroom(o["memory_headroom"])
    for name in ("prefill_tp", "decode_tp"):
        o[name] = whole_or_auto(o[name], name)
    o["batch"] = whole_or_auto(o["batch"], "batch")
    return SolveRequest(model=m, chip=c, cluster=k, context_length=parse_tokens(context_length),
                        sla=sla, kv_tiers=tiers, precision=precision, **o).validated()


def whole_or_auto(value: int | str, field: str) -> int | str:
    """A whole number >= 1 or "auto" (the command line passes either as text)."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "auto":
            return "auto"
        if text.isdigit() and int(text) >= 1:
            return int(text)
    elif not isinstance(value, bool) and isinstance(value, int) and value >= 1:
        return value
    raise UserInputError(field, value, "give a whole number >= 1, or auto to search it")


def check_memory_headroom(value: float) -> float:
    """The usable fraction of memory after the reserve: a number in (0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise UserInputError("memory_headroom", value, "give a fraction > 0 and <= 1, e.g. 0.9 "
                             "to keep 10 % of the memory after the reserve free")
    return float(value)


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
    from ctxplan.solve import solve as _solve

    return _solve(solve_request(model, chip, context_length, **options),
                  cache=eval_cache(store, cache), progress=progress)


def model_items(model: ModelLike | Sequence[ModelLike]) -> list[ModelLike]:
    """The models ``model`` names, unresolved: a list, or names separated by commas
    ("deepseek-v3,deepseek-v3.2"; a path that exists is one model even if it holds a comma)."""
    if isinstance(model, str) and "," in model and not Path(model).expanduser().exists():
        items: list[ModelLike] = [m.strip() for m in model.split(",") if m.strip()]
        if not items:
            raise UserInputError("model", model, "name one model or several separated by "
                                 "commas, e.g. deepseek-v3,deepseek-v3.2")
        return items
    if isinstance(model, str | ModelSpec):
        return [model]
    items = list(model)
    if not items:
        raise UserInputError("model", "[]", "give at least one model")
    return items


def resolve_models(model: ModelLike | Sequence[ModelLike]) -> list[ModelSpec]:
    """One model or several (:func:`model_items`). Duplicates are swept once."""
    specs: dict[str, ModelSpec] = {}
    for item in model_items(model):
        spec = resolve_model(item)
        specs.setdefault(spec.name, spec)
    return list(specs.values())


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
    from ctxplan.sweep import sweep_contexts

    run_names = declared(RunOptions)
    run: dict[str, Any] = {name: options.get(name) for name in run_names}
    search: dict[str, Any] = {k: v for k, v in options.items() if k not in run_names}
    sizes = context_lengths(contexts)
    requests = [solve_request(m, chip, sizes[0], **search) for m in resolve_models(model)]
    if executor is None and any(v is not None for v in run.values()):
        from ctxplan.sweep import make_executor

        executor = make_executor(run["backend"], workers=run["workers"], address=run["address"])
    return sweep_contexts(requests, sizes, executor=executor, cache=eval_cache(store, cache),
                          on_point=on_point)


def cached_tokens(value: int | str) -> int:
    """A cached prefix as a token count: 0 (none), 120000 or "120K"."""
    if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
        if value < 0:
            raise UserInputError("cached", value, "give the cached prefix as a token count "
                                 ">= 0, e.g. 120K")
        return 0
    if isinstance(value, str) and value.strip() == "0":
        return 0
    return parse_tokens(value, "cached")


@with_options(CapacityOptions)
def capacity_request(model: ModelLike, chip: ChipLike,
                     **options: Unpack[CapacityOptions]) -> CapacityRequest:
    """Build and validate a capacity study's inputs (no simulation): the solve of the instance
    shapes at the longest context of the mix, and the traffic. ``rates`` takes "0.2/s",
    "0.05/s,0.2/s", or numbers (requests per second); ``context_mix`` "128K:0.7,1M:0.3", "128K",
    a list of such items or a mapping {length: share}. ``batch`` takes only "auto" (the
    default here): the shapes are ``solve --batch auto``'s, and the decode batches the
    request-level simulation's, by the same rule, step by step."""
    from ctxplan.config.units import parse_context_mix, parse_rate_list
    from ctxplan.serve import CapacityRequest, ContextMix
    from ctxplan.serve.capacity import check_batch

    if "batch" in options:
        check_batch(options["batch"])
    o = complete(CapacityOptions, options, "capacity_request")
    o["batch"] = "auto"   # the shapes: solve --batch auto (docs/serving.md)
    serving = {name: o.pop(name) for name in declared(ServingOptions)}
    if serving["rates"] is None:
        raise UserInputError("rates", None, "give the arrival rate(s), e.g. --rate 0.2/s or "
                             "--rates 0.05/s,0.2/s,0.5/s", "required option missing")
    if serving["context_mix"] is None:
        raise UserInputError("contexts", None, "give the context lengths of the requests with "
                             "their shares, e.g. --contexts 128K:0.7,1M:0.3 (or --contexts "
                             "128K)", "required option missing")
    rates = tuple(parse_rate_list(serving["rates"], "rates"))
    mix = ContextMix.of(parse_context_mix(serving["context_mix"], "contexts"))
    shapes = solve_request(model, chip, mix.longest, **o)
    return CapacityRequest(solve=shapes, mix=mix, rates_per_s=rates,
                           output_tokens=serving["output_tokens"],
                           percentile=serving["percentile"], requests=serving["requests"],
                           seed=serving["seed"]).validated()


def check_capacity_batch(batch: object) -> None:
    """Refuse a fixed ``batch`` for :func:`capacity` (UserInputError naming the fix): its decode
    batches follow the rule of ``solve --batch auto``, step by step (docs/serving.md)."""
    from ctxplan.serve.capacity import check_batch

    check_batch(batch)


@with_options(CapacityOptions)
def capacity(model: ModelLike, chip: ChipLike, *, cache: EvalCache | None = None,
             store: StoreLike = None, **options: Unpack[CapacityOptions]) -> CapacityResult:
    """Prefill and decode instances (xPyD) and chips that meet the SLAs at each arrival rate.

    The instance shapes are the solve at the mix's longest context; a request-level
    discrete-event simulation over one seeded arrival sequence (scaled by each rate) sizes the
    pools, with every TTFT and decode step taken from the simulator (docs/serving.md).
    ``cache`` / ``store`` as in :func:`solve`.
    """
    from ctxplan.serve import capacity as _capacity

    return _capacity(capacity_request(model, chip, **options), cache=eval_cache(store, cache))


def capacity_study(study: Study | str | Path, *, cache: EvalCache | None = None,
                   store: StoreLike = None) -> CapacityResult:
    """:func:`capacity` for a loaded study (or the study file at a path): its model, chip,
    search options and ``serving`` section. Without ``serving.contexts`` the study's one
    context length is the whole mix."""
    s = study if not isinstance(study, str | Path) else load_study(study)
    one_model(s, "capacity")
    serving = s.serving_options()
    if serving.get("context_mix") is None:
        if len(s.contexts) != 1:
            raise UserInputError("serving.contexts", None, "give the mix of context lengths, "
                                 "e.g. serving.contexts: 128K:0.7,1M:0.3",
                                 f"the study lists {len(s.contexts)} context lengths")
        serving["context_mix"] = str(s.contexts[0])
    solve_options = s.solve_options()
    if solve_options.get("batch") == 1:
        del solve_options["batch"]   # the file's default (or batch: 1): not a fixed batch
    return capacity(s.model, s.chip, cache=cache, store=store, **serving, **solve_options)


@with_options(SensitivityStudyOptions)
def sensitivity(model: ModelLike, chip: ChipLike, context_length: int | str, *,
                cache: EvalCache | None = None, store: StoreLike = None,
                on_solve: Callable[[str, float], None] | None = None,
                **options: Unpack[SensitivityStudyOptions]) -> SensitivityStudy:
    """What the answer hinges on: N*, TTFT and TPOT when each chip and cluster figure, and each
    SLA, moves by each of ``steps`` ("-25%,-10%,+10%,+25%" by default), one at a time; the
    figures sorted by effect. ``figures`` names others than the default set (any figure
    ctxplan.hardware.perturb names, and sla.tpot_max / sla.ttft_max). ``on_solve(figure,
    factor)`` is called after each moved solve; ``cache`` / ``store`` as in :func:`solve`
    (docs/sensitivity.md)."""
    from ctxplan.config.units import parse_steps
    from ctxplan.sensitivity import resolve_figures, run_sensitivity

    o = complete(SensitivityStudyOptions, options, "sensitivity")
    moves = {name: o.pop(name) for name in declared(SensitivityOptions)}
    request = solve_request(model, chip, context_length, **o)
    figures = resolve_figures(moves["figures"], request.chip, request.cluster,
                              request.sla.ttft_max_s is not None)
    return run_sensitivity(request, figures, parse_steps(moves["steps"]),
                           cache=eval_cache(store, cache), on_solve=on_solve)


def sensitivity_study(study: Study | str | Path, *, cache: EvalCache | None = None,
                      store: StoreLike = None,
                      on_solve: Callable[[str, float], None] | None = None
                      ) -> SensitivityStudy:
    """:func:`sensitivity` for a loaded study (or the study file at a path) with one context
    length: its model, chip, search options and ``sensitivity`` section."""
    s = study if not isinstance(study, str | Path) else load_study(study)
    one_model(s, "sensitivity")
    if len(s.contexts) != 1:
        raise UserInputError("contexts", [format_context(c) for c in s.contexts],
                             "give one context length for a sensitivity study (--context)",
                             f"the study lists {len(s.contexts)}")
    return sensitivity(s.model, s.chip, s.contexts[0], cache=cache, store=store,
                       on_solve=on_solve, **s.sensitivity_options(), **s.solve_options())


def one_model(s: Study, what: str) -> None:
    """Refuse a study listing several models where one is needed (capacity, sensitivity)."""
    if len(s.models) > 1:
        raise UserInputError("model", [m.name for m in s.models],
                             f"name one model for a {what} study; a list of models is for "
                             "solve and sweep (one curve each)",
                             f"a {what} study sizes one model")


def format_context(n: int) -> str:
    from ctxplan.config.units import format_tokens

    return format_tokens(n)


def write_tornado(result: SensitivityStudy, path: str | Path) -> None:
    """Draw the tornado plot of a sensitivity study (``--plot``)."""
    from ctxplan.report.sensitivity import plot_tornado

    plot_tornado(result, path)


def context_lengths(contexts: str | Sequence[int | str]) -> list[int]:
    """"8K,128K,1M" or a list of sizes, as token counts."""
    from ctxplan.config.units import parse_token_list

    if isinstance(contexts, str):
        return parse_token_list(contexts)
    sizes = [parse_tokens(s, "contexts") for s in contexts]
    if not sizes:
        raise UserInputError("contexts", contexts, "give at least one context length")
    return sizes


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
    kernels: str | Path | bool | None = None,
) -> ValidationReport:
    """Simulate every validation case (``validation/*.yaml`` by default, or the directory
    ``cases``; only ``names`` if given) against its published measurement, and the kernel-level
    rows (``validation/kernels/``; ``kernels``: a directory, False to skip; by default they run
    with the default cases and no ``names``).

    Returns per case the measured and simulated latency and the signed relative error, and the
    median and worst absolute error (``report.summary()``); per kernel row the same, with the
    medians of its role (``report.kernels``, ``summary()["kernels"]``). See docs/validation.md.
    """
    from ctxplan.validate import load_cases, run_validation
    from ctxplan.validate_kernels import load_kernel_rows

    if kernels is None:
        kernels = cases is None and names is None
    rows = []
    if kernels is not False:
        rows = load_kernel_rows(None if kernels is True else kernels)
    return run_validation(load_cases(cases, names), kernel_rows=rows)


def validation_sensitivity(report: ValidationReport, figures: Sequence[str] | None = None,
                           factor: float = 1.1) -> list[SensitivityResult]:
    """How much each case of a validation ``report`` moves when each hardware figure of its
    chip and cluster (or only ``figures``) is scaled by ``factor``, one at a time."""
    from ctxplan.validate import sensitivity

    return sensitivity([r.case for r in report.results], figures, factor)


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


@with_options(RunOptions)
def solve_study(study: Study | str | Path, *, cache: EvalCache | None = None,
                executor: Executor | None = None,
                on_point: Callable[[SolveResult], None] | None = None,
                store: StoreLike = None, **run: Unpack[RunOptions]) -> SweepResult:
    """Solve a loaded study (or the study file at a path) at each of its context lengths,
    sharing one cache; one point per context, in the study's order. ``store`` and the run
    options as in :func:`sweep`."""
    s = study if not isinstance(study, str | Path) else load_study(study)
    return sweep(list(s.models), s.chip, list(s.contexts), cache=cache, executor=executor,
                 on_point=on_point, store=store, **run, **s.solve_options())


def write_trace(trace: Trace | None, path: str | Path, result: EvalResult) -> None:
    if trace is None:
        raise UserInputError("trace", str(path), "the configuration does not fit in memory, so "
                             "there is nothing to trace; pick one that fits",
                             "no simulation ran")
    from ctxplan.report.trace import write_chrome_trace

    write_chrome_trace(trace, path)


# ------------------------------------------------------------------------ files and the store


def check_output(path: str | Path, field: str, suffixes: tuple[str, ...] = ()) -> Path:
    """Refuse an output path that cannot be written (before any simulation runs)."""
    from ctxplan.config.paths import check_writable

    return check_writable(path, field, suffixes)


def check_sweep_outputs(out: str | Path | None = None, plot: str | Path | None = None) -> None:
    """Refuse a sweep's results file (.csv / .json) or plot (.png / .svg / .pdf) path that
    cannot be written, before the sweep runs."""
    from ctxplan.report.plot import check_plot_path
    from ctxplan.sweep.output import check_out_path

    if out is not None:
        check_out_path(out)
    if plot is not None:
        check_plot_path(plot)


def write_sweep(result: SweepResult, out: str | Path | None = None,
                plot: str | Path | None = None) -> None:
    """Write a sweep's results (``out``: CSV, one row per context, or JSON in full) and its
    N*(S) plot (``plot``)."""
    if out is not None:
        from ctxplan.sweep.output import write_sweep as _write

        _write(result, out)
    if plot is not None:
        from ctxplan.report.plot import plot_sweep

        plot_sweep(result, plot)


def write_capacity_plot(result: CapacityResult, path: str | Path) -> None:
    """Draw chips against the arrival rate (``ctxplan capacity --plot``)."""
    from ctxplan.report.serving import plot_capacity

    plot_capacity(result, path)


def store_choice(path: str | None = None, no_store: bool = False) -> StoreLike:
    """The command line's ``--store FILE`` / ``--no-store`` as a store for :func:`open_store`
    (neither: the default file)."""
    from ctxplan.sweep.store import store_option

    return store_option(path, no_store)


def store_path(path: str | None = None) -> Path:
    """The store file ``path`` names, else the default one; an error when the store is off."""
    from ctxplan.sweep.store import default_store_path

    found = Path(path) if path is not None else default_store_path()
    if found is None:
        raise UserInputError("store", None, "name a file with --store FILE",
                             "the store is turned off ($CTXPLAN_STORE)")
    return found.expanduser()


def export_store(path: str | Path, kind: str = "jsonl") -> str:
    """Every result in the store file, oldest first: ``jsonl`` (each result in full) or ``csv``
    (the key columns). A missing file exports nothing."""
    from ctxplan.sweep.store import ResultStore, export_rows

    if kind not in ("jsonl", "csv"):
        raise UserInputError("format", kind, "use jsonl or csv")
    rows = []
    if Path(path).exists():
        with ResultStore(path) as st:
            rows = st.rows()
    return export_rows(rows, kind)


def file_schema(kind: str = "study") -> dict[str, Any]:
    """The JSON Schema of study ("study") or point ("point") files, for editor completion."""
    from ctxplan.config.json_schema import json_schema

    return json_schema(kind)


# ------------------------------------------------------------------------------ the report

REPORT_SUFFIXES = (".html", ".htm")


@dataclass(frozen=True)
class Report:
    """A written report: where, what kind of result it shows, and that result's JSON."""

    path: Path
    kind: str                        # solve | sweep | capacity | sensitivity
    data: dict[str, Any]             # the result's JSON (as --json prints it)
    sensitivity: dict[str, Any] | None = None


def report_study(study: Study | str | Path, out: str | Path, *, sensitivity: bool = False,
                 cases: str | Path | None = None, cache: EvalCache | None = None,
                 store: StoreLike = None) -> Report:
    """Solve what a study asks and write the review page (``ctxplan report --config``): a
    capacity study when it has ``serving.rates``, else a solve (one context length) or a sweep
    (several); ``sensitivity`` also moves each figure (one context length). The page holds the
    answer with its SLA, N*(S), the per-tier table, the search path, the chip, cluster and
    model figures with their sources and flags, and the validation rows on the chip (``cases``:
    the validation directory, default the source tree's). ``cache`` / ``store`` as in
    :func:`solve`. docs/report.md."""
    path = check_output(out, "out", REPORT_SUFFIXES)
    s = study if not isinstance(study, str | Path) else load_study(study)
    if sensitivity and len(s.contexts) != 1:
        raise UserInputError("sensitivity", True, "give one context length for a report with "
                             "sensitivity, or leave --sensitivity out",
                             f"the study lists {len(s.contexts)}")
    shared = eval_cache(store, cache)
    data: dict[str, Any]
    if s.serving_options().get("rates") is not None:
        data = capacity_study(s, cache=shared).to_dict()
    else:
        swept = solve_study(s, cache=shared)
        data = swept.points[0].to_dict() if len(swept.points) == 1 else swept.to_dict()
    moved = sensitivity_study(s, cache=shared).to_dict() if sensitivity else None
    cluster = s.cluster if s.cluster is not None else resolve_cluster(None, s.chip)
    source = ("command-line flags, solved now" if s.source == "command line"
              else f"study file {s.source}, solved now")
    return _write_report(path, data, source, list(s.models) or [s.model], s.chip, cluster,
                         cases, moved)


def report_results(results: Mapping[str, Any] | str | Path, out: str | Path, *,
                   model: ModelLike | Sequence[ModelLike] | None = None,
                   chip: ChipLike | None = None, cluster: ClusterLike = None,
                   cases: str | Path | None = None) -> Report:
    """Write the review page of a saved result (``ctxplan report --from``): the ``--json`` of
    ``solve`` (with ``--sensitivity`` too), ``sweep``, ``capacity`` or ``sensitivity``, as a
    mapping or a file. The result names its model, chip and cluster; their figures are the
    presets of those names unless ``model`` / ``chip`` / ``cluster`` give the definitions it
    was solved with (a name that is no preset is reported as such, figures left out)."""
    from ctxplan.report.page.view import kind_of

    path = check_output(out, "out", REPORT_SUFFIXES)
    where = "the result"
    if isinstance(results, str | Path):
        where = f"saved result {results}"
        results = _read_result(results)
    data = {k: v for k, v in results.items() if k != "timings"}
    try:
        kind = kind_of(data)
    except ValueError as exc:
        raise UserInputError("from", str(where), "give the --json output of ctxplan solve, "
                             "sweep, capacity or sensitivity", str(exc)) from None
    head = data["points"][0] if kind == "sweep" and data.get("points") else data
    if kind == "sweep" and not data.get("points"):
        raise UserInputError("from", str(where), "give a sweep with at least one point",
                             "no points")
    models = list(dict.fromkeys(data.get("models") or [p["model"] for p in data["points"]])) \
        if kind == "sweep" else [head["model"]]
    names = {"model": ",".join(models), "chip": head["chip"], "cluster": head["cluster"]}
    source = f"{where} (the --json of ctxplan {kind})"
    return _write_report(path, data, source, model or models, chip or names["chip"],
                         cluster or names["cluster"], cases, None, named=names)


def _read_result(path: str | Path) -> dict[str, Any]:
    import json

    p = Path(path)
    if not p.is_file():
        raise UserInputError("from", str(path), "give the path of a saved --json result",
                             "no such file")
    try:
        data = json.loads(p.read_text("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UserInputError("from", str(path), "give the --json output of a ctxplan command",
                             f"not JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise UserInputError("from", str(path), "give the --json output of a ctxplan command",
                             "not a JSON object")
    return data


def _write_report(path: Path, data: dict[str, Any], source: str,
                  model: ModelLike | Sequence[ModelLike],
                  chip: ChipLike, cluster: ClusterLike, cases: str | Path | None,
                  sensitivity: dict[str, Any] | None,
                  named: Mapping[str, str] | None = None) -> Report:
    from ctxplan import __version__
    from ctxplan.report.page.render import ReportInputs, render_report
    from ctxplan.report.page.view import kind_of

    facts, chip_obj = report_assumptions(model, chip, cluster, named)
    chip_name = chip_obj.name if chip_obj is not None else str(chip)
    validation = validation_for_chip(chip_obj if chip_obj is not None else chip_name, cases)
    html = render_report(ReportInputs(data=data, assumptions=facts, validation=validation,
                                      source=source, version=__version__,
                                      sensitivity=sensitivity))
    path.write_text(html, encoding="utf-8")
    return Report(path, kind_of(data), data,
                  sensitivity or (data.get("sensitivity") if isinstance(data, dict) else None))


def report_assumptions(model: ModelLike | Sequence[ModelLike], chip: ChipLike,
                       cluster: ClusterLike,
                       named: Mapping[str, str] | None = None
                       ) -> tuple[dict[str, Any], Chip | None]:
    """The chip, cluster and model figures a report shows, with their sources, flags and notes
    (report.page.assumptions). ``named``: the names a saved result gives, looked up as presets;
    a name that is not one is reported, not guessed."""
    from ctxplan.config.hardware_presets import chip_names, cluster_names, hardware_definition
    from ctxplan.config.model_presets import is_model_preset
    from ctxplan.report.page.assumptions import chip_facts, cluster_facts, model_facts

    facts: dict[str, Any] = {"notes": []}
    given = named or {}

    def origin(kind: str, value: object, presets: Sequence[str], loaded: object,
               load: Callable[[str], object]) -> tuple[str, bool]:
        """How the object was defined, and whether its preset's notes describe it."""
        if isinstance(value, str) and value.strip().lower() in presets:
            key = value.strip().lower()
            return f"preset {key}", load(key) == loaded
        if isinstance(value, str):
            return f"file {value}", False
        name = getattr(loaded, "name", "")
        same = name in presets and load(name) == loaded
        return (f"preset {name}" if same else "your definition (not a preset)"), same

    def missing(kind: str, name: str) -> None:
        facts["notes"].append(
            f"The saved result names {kind} '{name}', which is not a preset: its figures are not "
            f"in the result. Give the definition it was solved with (ctxplan report --from "
            f"FILE --{kind} PATH) to show them.")

    chip_obj: Chip | None = None
    try:
        chip_obj = resolve_chip(chip)
    except UserInputError:
        if "chip" not in given:
            raise
        missing("chip", str(chip))
    if chip_obj is not None:
        text, same = origin("chip", chip, chip_names(), chip_obj, load_chip)
        facts["chip"] = chip_facts(chip_obj, hardware_definition("chip", chip_obj.name)
                                   if same else None, text)
    cluster_obj: Cluster | None = None
    try:
        if isinstance(cluster, Cluster):
            cluster_obj = cluster
        elif cluster:
            cluster_obj = load_cluster(cluster)
        elif chip_obj is not None:
            cluster_obj = resolve_cluster(None, chip_obj)
    except UserInputError:
        if "cluster" not in given:
            raise
        missing("cluster", str(cluster))
    if cluster_obj is not None:
        text, same = origin("cluster", cluster, cluster_names(), cluster_obj, load_cluster)
        facts["cluster"] = cluster_facts(cluster_obj, hardware_definition(
            "cluster", cluster_obj.name) if same else None, text)
    items = model_items(model)
    facts["models"] = []
    for item in items:
        try:
            model_obj = resolve_model(item)
        except UserInputError:
            if "model" not in given:
                raise
            missing("model", str(item))
            continue
        if isinstance(item, str):
            text = f"preset {model_obj.name}" if is_model_preset(item) else f"file {item}"
        else:
            same = is_model_preset(model_obj.name) and load_model(model_obj.name) == model_obj
            text = f"preset {model_obj.name}" if same else "your definition (not a preset)"
        facts["models"].append(model_facts(model_obj, text,
                                           anchor=model_obj.name if len(items) > 1 else ""))
    return facts, chip_obj


def validation_for_chip(chip: Chip | str, cases: str | Path | None = None) -> dict[str, Any]:
    """``ctxplan validate`` for one chip: the published rows measured on it (``cases``: the
    validation directory; default the source tree's), simulated now, with the summary by role.
    A chip that differs from the preset the rows name has no rows."""
    from ctxplan.validate import ValidationReport, load_cases, run_validation

    name = chip if isinstance(chip, str) else chip.name
    try:
        found = load_cases(cases)
    except UserInputError as exc:
        if cases is not None:
            raise
        return {"chip": name, "error": f"No validation cases were found ({exc.problem}): run "
                "from the ctxplan source tree to include the validation rows."}
    mine = [c for c in found if c.chip == name]
    if mine and not isinstance(chip, str) and load_chip(name) != chip:
        mine = []   # the rows were measured on the preset, not on these figures
    d = (run_validation(mine) if mine else ValidationReport([])).to_dict()
    return {"chip": name, "total_cases": len(found), "cases": d["cases"],
            "by_role": d["summary"]["by_role"]}
