"""The command line: a thin layer over :mod:`ctxplan.api`.

Every command prints a table by default and JSON with ``--json``. A user mistake prints one line
(``error: <field> = <value>: <problem>. Fix: <fix>``) on stderr and exits with code 2.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ctxplan import __version__, api
from ctxplan.errors import CtxplanError, UserInputError


def _click_exceptions(name: str) -> tuple[type[BaseException], ...]:
    """The click exception class ``name`` from typer's vendored click and from click itself
    (typer >= 0.16 vendors click; which one raises depends on the installed typer)."""
    found: list[type[BaseException]] = []
    for module in ("typer._click.exceptions", "click.exceptions"):
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        if cls not in found:
            found.append(cls)
    return tuple(found)


_NO_ARGS = _click_exceptions("NoArgsIsHelpError")
_USAGE = _click_exceptions("UsageError")
_CLICK = _click_exceptions("ClickException")
_EXIT = _click_exceptions("Exit")
_ABORT = _click_exceptions("Abort")

app = typer.Typer(
    name="ctxplan",
    help="Minimum-chip deployment plans for long-context LLM inference, measured by an "
    "event-driven simulator.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

console = Console(highlight=False)


def emit_json(data: Any) -> None:
    """Print JSON deterministically (same input, same bytes)."""
    sys.stdout.write(json.dumps(data, indent=2, allow_nan=False) + "\n")


def _gb(x: float) -> str:
    return f"{x / 1e9:,.1f}"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:,.3f} ms"


def _seconds(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.3f} s" if x >= 1 else f"{x * 1e3:,.3f} ms"


# Options shared by eval / solve / sweep for study and point files (docs/study-files.md).
_Config = Annotated[str | None, typer.Option(
    "--config", help="Study file (solve, sweep) or point file (eval): YAML holding every "
    "option; flags given on the command line override it. See docs/study-files.md.")]
_Set = Annotated[list[str] | None, typer.Option(
    "--set", help="Override one field, path=value (repeatable), e.g. --set sla.tpot_max=30ms, "
    "--set chip.memory_gb=96. Applied after the file and the flags.")]
_EventLimit = Annotated[int | None, typer.Option(
    help="Stop any one simulation after this many events (default 200,000,000).")]
_Timings = Annotated[bool, typer.Option(
    "--timings", help="Report wall-clock time (never included otherwise, so output is "
    "byte-for-byte reproducible).")]
_PassQ = Annotated[str, typer.Option(
    "--pass-q", help="Decode: how each query reaches the KV shards: 'broadcast' from its home "
    "rank (default) or forwarded around a 'ring' of ranks (Meta's pass-Q).")]
_AttnWeights = Annotated[str | None, typer.Option(
    "--attention-weights", help="Dtype of the attention projections' weights and matmuls, "
    "e.g. bf16 or fp8 (default: the model's).")]
_FfnWeights = Annotated[str | None, typer.Option(
    "--ffn-weights", help="Dtype of the FFN / expert weights and matmuls, e.g. fp8 for "
    "row-wise FP8 (default: the model's).")]
# The result store and executors (issue 6; docs/benchmarks.md).
_Store = Annotated[str | None, typer.Option(
    "--store", help="SQLite result store to reuse and record every evaluation in (default: "
    "$CTXPLAN_STORE, else ~/.cache/ctxplan/results.sqlite).")]
_NoStore = Annotated[bool, typer.Option(
    "--no-store", help="Neither read nor write the result store.")]
_Backend = Annotated[str, typer.Option(
    help="Where sweep points run: process (local worker processes), serial (this process) or "
    "ray (needs pip install 'ctxplan[ray]').")]
_Workers = Annotated[int | None, typer.Option(
    help="Worker processes for --backend process (default: min(2, CPUs)); CPUs of a local "
    "Ray instance for --backend ray.")]
_Address = Annotated[str | None, typer.Option(
    help="Ray cluster address for --backend ray (e.g. ray://head:10001 or auto; default: "
    "start a local instance).")]


def _typed_flags(ctx: typer.Context, paths: dict[str, str]) -> dict[str, Any]:
    """{file field path: value} for the options typed on the command line (defaults left out:
    they must not override a study / point file)."""
    out: dict[str, Any] = {}
    for param, path in paths.items():
        source = ctx.get_parameter_source(param)
        if source is not None and source.name == "COMMANDLINE":
            out[path] = ctx.params[param]
    return out


def _require(**options: Any) -> None:
    """Without --config, these options are required."""
    for name, value in options.items():
        if value is None:
            flag = "--" + name.replace("_", "-")
            raise UserInputError(flag, None, f"give {flag}, or a file with --config FILE",
                                 "required option missing")


def _check_output(field: str, path: str | None) -> None:
    """Refuse an output path that cannot be written before any simulation runs."""
    if path is None:
        return
    from pathlib import Path

    p = Path(path)
    if p.is_dir():
        raise UserInputError(field, path, "give a file path, not a directory", "is a directory")
    if not p.parent.is_dir():
        raise UserInputError(field, path, f"create the directory {p.parent} first, or write "
                             "elsewhere", "no such directory")


def _timing_line(seconds: float) -> str:
    return f"wall time: {seconds:,.3f} s"


# ------------------------------------------------------------------------------------ presets


@app.command()
def presets(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List the chip, cluster and model presets with their key figures."""
    from ctxplan.report.presets import presets_data

    data = presets_data()
    if as_json:
        emit_json(data)
        return
    t = Table(title="Chips")
    for col in ("name", "BF16 TF/s", "FP8 TF/s", "memory GB", "mem GB/s", "default cluster",
                "verified"):
        t.add_column(col)
    for c in data["chips"]:
        t.add_row(c["name"], f"{c['peak_tflops'].get('bf16', 0):,.0f}",
                  f"{c['peak_tflops'].get('fp8', 0):,.0f}", f"{c['memory_gb']:,.0f}",
                  f"{c['memory_bandwidth_gbps']:,.0f}", c["default_cluster"],
                  "yes" if c["verified"] else "no")
    console.print(t)
    t = Table(title="Clusters")
    for col in ("name", "chip", "levels (chips per group, fabric, GB/s per chip, latency)",
                "max chips"):
        t.add_column(col)
    for k in data["clusters"]:
        levels = "; ".join(
            f"{lv['name']}: {lv['chips_per_group']} {lv['fabric']} "
            f"{lv['bandwidth_gbps']:,.0f} GB/s {lv['latency_us']:g} us" for lv in k["levels"])
        t.add_row(k["name"], k["chip"], levels, str(k["max_chips"]))
    console.print(t)
    t = Table(title="Models")
    for col in ("name", "attention", "layers", "params (B)", "weights", "KV tiers (B/token/layer)"):
        t.add_column(col)
    for m in data["models"]:
        tiers = ", ".join(f"{n} {v}" for n, v in m["kv_tiers"].items())
        t.add_row(m["name"], m["attention"], str(m["layers"]), f"{m['params'] / 1e9:,.1f}",
                  m["weight_dtype"], tiers)
    console.print(t)


# --------------------------------------------------------------------------------------- eval


@app.command("eval")
def eval_cmd(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option(help="Model preset, model YAML or HF "
                                              "config.json.")] = None,
    chip: Annotated[str | None, typer.Option(help="Chip preset or chip YAML.")] = None,
    context: Annotated[str | None, typer.Option(help="Context length S, e.g. 8K, 128K, "
                                                "1M.")] = None,
    phase: Annotated[str | None, typer.Option(help="prefill (TTFT) or decode (TPOT).")] = None,
    cp: Annotated[int | None, typer.Option(help="CP degree: Np (prefill) or Nd "
                                           "(decode).")] = None,
    cluster: Annotated[str | None, typer.Option(help="Cluster preset or YAML "
                                                "(default: the chip's).")] = None,
    tp: Annotated[int, typer.Option(help="Chips per CP rank (tensor parallel).")] = 1,
    kv_tier: Annotated[str | None, typer.Option(help="KV tier name or bytes per token per "
                                                "layer (default: the model's first).")] = None,
    batch: Annotated[int, typer.Option(help="Sequences processed together.")] = 1,
    mla_mode: Annotated[str | None, typer.Option(help="MLA: standard or absorbed "
                                                 "(default: standard prefill, absorbed "
                                                 "decode).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    trace: Annotated[str | None, typer.Option(help="Write a Perfetto / Chrome trace JSON "
                                              "here.")] = None,
    full_sim: Annotated[bool, typer.Option("--full-sim", help="Simulate every layer (no "
                                           "periodic-layer shortcut; same result, slower).")]
    = False,
    config: _Config = None,
    set_: _Set = None,
    event_limit: _EventLimit = None,
    pass_q: _PassQ = "broadcast",
    attention_weights: _AttnWeights = None,
    ffn_weights: _FfnWeights = None,
    timings: _Timings = False,
    store: _Store = None,
    no_store: _NoStore = False,
) -> None:
    """Simulate one configuration: TTFT or TPOT, per-chip memory and CP bytes."""
    from ctxplan.sweep.store import store_option

    started = time.perf_counter()
    _check_output("trace", trace)
    results_store = api.open_store(store_option(store, no_store))
    if config is not None or set_:
        point = api.load_point(config, sets=set_ or (), flags=_typed_flags(ctx, {
            "model": "model", "chip": "chip", "context": "context", "phase": "phase",
            "cp": "cp", "cluster": "cluster", "tp": "tp", "kv_tier": "kv_tier",
            "batch": "batch", "mla_mode": "mla_mode", "full_sim": "full_simulation",
            "event_limit": "event_limit", "pass_q": "pass_q",
            "attention_weights": "attention_weights", "ffn_weights": "ffn_weights"}))
        result = api.evaluate_point(point, trace_path=trace, store=results_store)
    else:
        _require(model=model, chip=chip, context=context, phase=phase, cp=cp)
        assert model is not None and chip is not None and context is not None
        assert phase is not None and cp is not None
        result = api.evaluate(model, chip, context, phase, cp, cluster=cluster, tp=tp,
                              batch=batch, kv_tier=kv_tier, mla_mode=mla_mode,
                              full_simulation=full_sim, trace_path=trace,
                              event_limit=event_limit, pass_q=pass_q,
                              attention_weights=attention_weights, ffn_weights=ffn_weights,
                              store=results_store)
    wall = time.perf_counter() - started
    if as_json:
        data = result.to_dict()
        if timings:
            data["timings"] = {"wall_s": wall}
        emit_json(data)
        return
    t = Table(title=f"{result.model} on {result.chip} ({result.cluster}), {result.phase}, "
              f"S = {result.context_length:,}", show_header=False)
    t.add_column("what")
    t.add_column("value")
    t.add_row("layout", f"cp {result.cp} x tp {result.tp} = {result.chips} chips, batch "
              f"{result.batch}" + (f", MLA {result.mla_mode}" if result.mla_mode else ""))
    t.add_row("KV tier", f"{result.kv_tier} ({result.c_kv_bytes} B per token per layer)")
    label = "TTFT" if result.phase == "prefill" else "TPOT"
    t.add_row(label, _seconds(result.latency_s) if result.simulated else
              f"not simulated: {result.reason}")
    mem = result.memory
    t.add_row("memory per chip", f"{_gb(mem.per_chip_bytes)} / {_gb(mem.capacity_bytes)} GB "
              f"({'fits' if mem.fits else 'DOES NOT FIT'}): weights {_gb(mem.weights_bytes)}, "
              f"KV {_gb(mem.kv_bytes)}, activations {_gb(mem.activation_bytes)}, reserve "
              f"{_gb(mem.reserved_bytes)}")
    if result.comm:
        c = result.comm
        t.add_row("CP comm", f"{c.pattern}: {c.sends_per_layer} sends per layer, "
                  f"{_gb(c.simulated_bytes)} GB simulated = {_gb(c.analytic_bytes)} GB analytic")
        t.add_row("simulation", f"{result.layers_simulated} layers simulated, "
                  f"{result.tasks:,} tasks, {result.events:,} events; busiest "
                  f"compute {result.max_compute_utilisation:.0%}, busiest link "
                  f"{result.max_link_utilisation:.0%}")
    if trace and result.simulated:
        t.add_row("trace", f"{trace} (open in https://ui.perfetto.dev)")
    if timings:
        t.add_row("wall time", f"{wall:,.3f} s")
    console.print(t)


# ------------------------------------------------------------------------------ solve / sweep

_Cluster = Annotated[str | None, typer.Option(help="Cluster preset or YAML (default: the chip's).")]
_TpotMax = Annotated[str, typer.Option(help="TPOT SLA: 20ms means 50 tokens/s (see "
                                       "--tps-reading).")]
_TtftMax = Annotated[str | None, typer.Option(help="TTFT SLA, e.g. 30s (default: none, prefill "
                                              "takes its capacity minimum).")]
_KvTiers = Annotated[str | None, typer.Option(help="KV tiers to compare, e.g. mla-bf16,mla-fp8 "
                                              "or bytes per token per layer (default: the "
                                              "model's).")]
_Batch = Annotated[int, typer.Option(help="Sequences per decode step (fixed, not searched).")]
_Strategy = Annotated[str, typer.Option(help="galloping (O(log N), default), linear (from the "
                                        "wall up) or scan (every candidate, to verify).")]
_Candidates = Annotated[str, typer.Option(help="Candidate N: all, group (whole groups of "
                                          "--group-size chips) or pow2.")]
_GroupSize = Annotated[int | None, typer.Option(help="Group size for --candidates group "
                                                "(default: the cluster's innermost group).")]
_MaxChips = Annotated[int | None, typer.Option(help="Upper bound on chips per pool (default: "
                                               "the cluster's size).")]
_PrefillTp = Annotated[int, typer.Option(help="Chips per prefill CP rank (tensor parallel).")]
_DecodeTp = Annotated[int, typer.Option(help="Chips per decode CP rank (tensor parallel).")]
_TpsReading = Annotated[str, typer.Option(help="per-seq: TPOT <= tpot-max; per-batch: "
                                          "batch / TPOT >= 1 / tpot-max.")]
_Json = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


@app.command("solve")
def solve_cmd(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option(help="Model preset, model YAML or HF "
                                              "config.json.")] = None,
    chip: Annotated[str | None, typer.Option(help="Chip preset or chip YAML.")] = None,
    context: Annotated[str | None, typer.Option(help="Context length S, e.g. 8K, 128K, "
                                                "1M.")] = None,
    cluster: _Cluster = None,
    tpot_max: _TpotMax = "20ms",
    ttft_max: _TtftMax = None,
    kv_tiers: _KvTiers = None,
    batch: _Batch = 1,
    strategy: _Strategy = "galloping",
    candidates: _Candidates = "all",
    group_size: _GroupSize = None,
    max_chips: _MaxChips = None,
    prefill_tp: _PrefillTp = 1,
    decode_tp: _DecodeTp = 1,
    tps_reading: _TpsReading = "per-seq",
    as_json: _Json = False,
    config: _Config = None,
    set_: _Set = None,
    event_limit: _EventLimit = None,
    pass_q: _PassQ = "broadcast",
    attention_weights: _AttnWeights = None,
    ffn_weights: _FfnWeights = None,
    timings: _Timings = False,
    store: _Store = None,
    no_store: _NoStore = False,
) -> None:
    """The minimum chip count N* = Np + Nd (and KV tier) meeting the SLAs at context S.

    With --config, a study file may list several context lengths: each is solved."""
    from ctxplan.report.tables import (
        search_path_table,
        solve_answer_line,
        solve_notes,
        solve_tiers_table,
    )
    from ctxplan.sweep.progress import progress_wanted, solve_progress
    from ctxplan.sweep.store import store_option

    started = time.perf_counter()
    stored = api.eval_cache(store_option(store, no_store))
    with solve_progress(stored, "solving", enabled=progress_wanted(as_json)) as cache:
        if config is not None or set_:
            study = api.load_study(config, sets=set_ or (), flags=_study_flags(ctx, "context"))
            results = list(api.solve_study(study, cache=cache).points)
        else:
            _require(model=model, chip=chip, context=context)
            assert model is not None and chip is not None and context is not None
            results = [api.solve(model, chip, context, cluster=cluster, tpot_max=tpot_max,
                                 ttft_max=ttft_max, kv_tiers=kv_tiers, batch=batch,
                                 strategy=strategy, candidates=candidates,
                                 group_size=group_size, max_chips=max_chips,
                                 prefill_tp=prefill_tp, decode_tp=decode_tp,
                                 tps_reading=tps_reading, event_limit=event_limit,
                                 pass_q=pass_q, attention_weights=attention_weights,
                                 ffn_weights=ffn_weights, cache=cache)]
    wall = time.perf_counter() - started
    if len(results) > 1:
        _print_study(results, as_json, wall if timings else None)
        return
    result = results[0]
    if as_json:
        data = result.to_dict()
        if timings:
            data["timings"] = {"wall_s": wall}
        emit_json(data)
        return
    console.print(solve_tiers_table(result))
    for note in solve_notes(result):
        console.print(note)
    console.print(search_path_table(result))
    console.print(solve_answer_line(result))
    if timings:
        console.print(_timing_line(wall))


def _study_flags(ctx: typer.Context, context_param: str) -> dict[str, Any]:
    """The solve / sweep options typed on the command line, as study-file field paths."""
    flags = _typed_flags(ctx, {
        "model": "model", "chip": "chip", context_param: "contexts", "cluster": "cluster",
        "tpot_max": "sla.tpot_max", "ttft_max": "sla.ttft_max", "tps_reading": "sla.tps_reading",
        "kv_tiers": "kv_tiers", "batch": "batch", "strategy": "strategy",
        "candidates": "candidates", "group_size": "group_size", "max_chips": "max_chips",
        "prefill_tp": "prefill_tp", "decode_tp": "decode_tp", "event_limit": "event_limit",
        "pass_q": "pass_q", "attention_weights": "attention_weights",
        "ffn_weights": "ffn_weights"})
    if isinstance(flags.get("kv_tiers"), str):
        tiers = [t.strip() for t in flags["kv_tiers"].split(",") if t.strip()]
        flags["kv_tiers"] = tiers if tiers else flags["kv_tiers"]
    return flags


def _print_study(results: list[Any], as_json: bool, wall: float | None) -> None:
    """A study with several context lengths: the sweep's JSON, or its table and answers."""
    from ctxplan.report.tables import solve_answer_line, sweep_table
    from ctxplan.sweep import SweepResult

    sweep = SweepResult(tuple(results))
    if as_json:
        data = sweep.to_dict()
        if wall is not None:
            data["timings"] = {"wall_s": wall}
        emit_json(data)
        return
    console.print(sweep_table(sweep))
    for r in results:
        console.print(solve_answer_line(r))
    if wall is not None:
        console.print(_timing_line(wall))


@app.command("sweep")
def sweep_cmd(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option(help="Model preset, model YAML or HF "
                                              "config.json.")] = None,
    chip: Annotated[str | None, typer.Option(help="Chip preset or chip YAML.")] = None,
    contexts: Annotated[str | None, typer.Option(help="Context lengths, e.g. "
                                                 "8K,32K,128K,512K,1M.")] = None,
    cluster: _Cluster = None,
    tpot_max: _TpotMax = "20ms",
    ttft_max: _TtftMax = None,
    kv_tiers: _KvTiers = None,
    batch: _Batch = 1,
    strategy: _Strategy = "galloping",
    candidates: _Candidates = "all",
    group_size: _GroupSize = None,
    max_chips: _MaxChips = None,
    prefill_tp: _PrefillTp = 1,
    decode_tp: _DecodeTp = 1,
    tps_reading: _TpsReading = "per-seq",
    plot: Annotated[str | None, typer.Option(help="Draw N*(S) into this PNG.")] = None,
    out: Annotated[str | None, typer.Option(help="Write the results to FILE.csv or "
                                            "FILE.json.")] = None,
    as_json: _Json = False,
    config: _Config = None,
    set_: _Set = None,
    event_limit: _EventLimit = None,
    pass_q: _PassQ = "broadcast",
    attention_weights: _AttnWeights = None,
    ffn_weights: _FfnWeights = None,
    timings: _Timings = False,
    store: _Store = None,
    no_store: _NoStore = False,
    backend: _Backend = "process",
    workers: _Workers = None,
    address: _Address = None,
) -> None:
    """Solve every context length: the N*(S) curve, as a table, a CSV / JSON and a plot.

    Points run in parallel (--backend, --workers); every evaluation is recorded in the result
    store as it finishes, so a sweep that is stopped resumes where it was."""
    from collections.abc import Callable

    from ctxplan.config.units import parse_token_list
    from ctxplan.report.tables import sweep_notes, sweep_table
    from ctxplan.sweep import SweepResult
    from ctxplan.sweep.output import check_out_path, write_sweep

    started = time.perf_counter()
    run: Callable[..., SweepResult]
    if config is not None or set_:
        study = api.load_study(config, sets=set_ or (), flags=_study_flags(ctx, "contexts"))
        sizes = list(study.contexts)

        def run(**kw: Any) -> SweepResult:
            return api.solve_study(study, **kw)
    else:
        _require(model=model, chip=chip, contexts=contexts)
        assert model is not None and chip is not None and contexts is not None
        sizes = parse_token_list(contexts)
        options: dict[str, Any] = dict(
            cluster=cluster, tpot_max=tpot_max, ttft_max=ttft_max, kv_tiers=kv_tiers,
            batch=batch, strategy=strategy, candidates=candidates, group_size=group_size,
            max_chips=max_chips, prefill_tp=prefill_tp, decode_tp=decode_tp,
            tps_reading=tps_reading, event_limit=event_limit, pass_q=pass_q,
            attention_weights=attention_weights, ffn_weights=ffn_weights)

        def run(**kw: Any) -> SweepResult:
            return api.sweep(model, chip, sizes, **kw, **options)
    if out is not None:
        check_out_path(out)
    _check_output("out", out)
    _check_output("plot", plot)
    if plot is not None:
        from ctxplan.report.plot import check_plot_path

        check_plot_path(plot)
    from ctxplan.sweep import make_executor
    from ctxplan.sweep.progress import progress_wanted, sweep_progress
    from ctxplan.sweep.store import store_option

    executor = make_executor(backend, workers=workers, address=address)
    cache = api.eval_cache(store_option(store, no_store))
    with sweep_progress(len(dict.fromkeys(sizes)),
                        enabled=progress_wanted(as_json)) as on_point:
        result = run(on_point=on_point, cache=cache, executor=executor)
    wall = time.perf_counter() - started
    if out is not None:
        write_sweep(result, out)
    if plot is not None:
        from ctxplan.report.plot import plot_sweep

        plot_sweep(result, plot)
    if as_json:
        data = result.to_dict()
        if timings:
            data["timings"] = {"wall_s": wall}
        emit_json(data)
        return
    console.print(sweep_table(result))
    for note in sweep_notes(result):
        console.print(note)
    for what, path in (("results", out), ("plot", plot)):
        if path is not None:
            console.print(f"{what}: {path}")
    if timings:
        console.print(_timing_line(wall))


# ------------------------------------------------------------------------------------- schema


@app.command("schema")
def schema_cmd(
    kind: Annotated[str, typer.Option(help="study (solve / sweep --config) or point (eval "
                                      "--config).")] = "study",
) -> None:
    """Print the JSON Schema of study or point files (for editor completion)."""
    from ctxplan.config.study import json_schema

    emit_json(json_schema(kind))


# ----------------------------------------------------------------------------------- validate


@app.command("validate")
def validate_cmd(
    cases: Annotated[str | None, typer.Option(help="Directory of validation cases (*.yaml; "
                                              "default: the source tree's validation/).")] = None,
    case: Annotated[list[str] | None, typer.Option(help="Run only this case (repeatable).")]
    = None,
    check: Annotated[bool, typer.Option("--check", help="Exit 1 if any case is outside its "
                                        "tolerance.")] = False,
    sensitivity: Annotated[bool, typer.Option(
        "--sensitivity", help="Also rerun every case with each hardware figure of its chip and "
        "cluster scaled by --factor, one at a time, and show how the latency moves.")] = False,
    figure: Annotated[list[str] | None, typer.Option(
        help="With --sensitivity: only this figure (repeatable), e.g. chip.memory_bandwidth, "
        "cluster.host.latency.")] = None,
    factor: Annotated[float, typer.Option(help="With --sensitivity: the scale factor.")] = 1.1,
    as_json: _Json = False,
) -> None:
    """Simulate every published measurement in validation/ and print measured vs simulated and
    the relative error, calibration rows (used to set figures) apart from prediction rows (used
    for nothing), each with its median and worst absolute error."""
    from ctxplan.report.validation import print_sensitivity, print_validation
    from ctxplan.validate import sensitivity as run_sensitivity

    report = api.validate(cases, names=case)
    moves = (run_sensitivity([r.case for r in report.results], figure, factor)
             if sensitivity else None)
    if as_json:
        data = report.to_dict()
        if moves is not None:
            data["sensitivity"] = [m.to_dict() for m in moves]
        emit_json(data)
    else:
        wide = Console(highlight=False, width=max(console.width, 150))
        print_validation(report, wide)
        if moves is not None:
            print_sensitivity(moves, wide)
    if check and not report.all_within:
        sys.exit(1)


# -------------------------------------------------------------------------------------- store

store_app = typer.Typer(help="The result store: list, export or clear the recorded "
                        "evaluations (SQLite; see --store).", no_args_is_help=True)
app.add_typer(store_app, name="store")


def _store_path(store: str | None) -> Any:
    from ctxplan.sweep.store import default_store_path

    path = store if store is not None else default_store_path()
    if path is None:
        raise UserInputError("store", None, "name a file with --store FILE",
                             "the store is turned off ($CTXPLAN_STORE)")
    from pathlib import Path

    return Path(path).expanduser()


@store_app.command("list")
def store_list_cmd(
    store: _Store = None,
    limit: Annotated[int, typer.Option(help="Rows to show, newest first.")] = 20,
    as_json: _Json = False,
) -> None:
    """How many results the store holds, and the most recent ones."""
    from ctxplan.report.tables import format_tokens
    from ctxplan.sweep.store import ResultStore

    path = _store_path(store)
    rows: list[Any] = []
    count, versions = 0, {}
    if path.exists():  # listing never creates a store
        with ResultStore(path) as st:
            rows = st.rows(limit=max(limit, 0), newest_first=True)
            count, versions = len(st), st.count_by_version()
    if as_json:
        emit_json({"store": str(path), "results": count, "by_sim_version": versions,
                   "recent": [{**r.columns} for r in rows]})
        return
    by = ", ".join(f"sim version {v}: {n}" for v, n in versions.items())
    console.print(f"{count} results in {path}" + (f" ({by})" if by else ""), soft_wrap=True)
    if not rows:
        return
    t = Table(title=f"{len(rows)} most recent")
    for col in ("written", "model", "chip", "phase", "S", "layout", "KV tier", "latency", "key"):
        t.add_column(col, no_wrap=True)
    for r in rows:
        c = r.columns
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c["created_at"]))
        lat = _seconds(c["latency_s"]) if c["simulated"] else "not simulated"
        t.add_row(when, c["model"], c["chip"], c["phase"], format_tokens(c["context_length"]),
                  f"cp {c['cp']} x tp {c['tp']}, b {c['batch']}", c["kv_tier"], lat,
                  c["key"][:12])
    Console(highlight=False, width=max(console.width, 140)).print(t)


@store_app.command("export")
def store_export_cmd(
    store: _Store = None,
    out: Annotated[str | None, typer.Option(help="Write to FILE (.jsonl or .csv) instead of "
                                            "stdout.")] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="jsonl (one JSON object per "
                                            "result, in full) or csv (the key columns); "
                                            "default: from --out, else jsonl.")] = None,
) -> None:
    """Every stored result, oldest first, as JSON lines or CSV."""
    from pathlib import Path

    from ctxplan.sweep.store import ResultStore, export_rows

    path = _store_path(store)
    kind = (fmt or ("csv" if out and out.lower().endswith(".csv") else "jsonl")).lower()
    if kind not in ("jsonl", "csv"):
        raise UserInputError("format", fmt, "use jsonl or csv")
    _check_output("out", out)
    rows = []
    if path.exists():
        with ResultStore(path) as st:
            rows = st.rows()
    text = export_rows(rows, kind)
    if out is None:
        sys.stdout.write(text)
    else:
        Path(out).write_text(text)


@store_app.command("clear")
def store_clear_cmd(
    store: _Store = None,
    yes: Annotated[bool, typer.Option("--yes", help="Really delete.")] = False,
    stale: Annotated[bool, typer.Option("--stale", help="Delete only results of other "
                                        "simulator versions (never reused).")] = False,
) -> None:
    """Delete the stored results (asks for --yes)."""
    from ctxplan.sweep.store import ResultStore

    path = _store_path(store)
    if not path.exists():
        console.print(f"nothing to clear: no store at {path}", soft_wrap=True)
        return
    with ResultStore(path) as st:
        if not yes:
            raise UserInputError("yes", False, f"add --yes to delete {len(st)} results from "
                                 f"{path}", "clearing the store needs confirmation")
        n = st.clear(stale_only=stale)
    console.print(f"deleted {n} results from {path}", soft_wrap=True)


@app.command()
def version() -> None:
    """Print the version."""
    print(__version__)


# ----------------------------------------------------------------------------------- entry


def _one_line(message: object) -> str:
    """The message on one line, whatever text the user typed into it (every kind of line
    break, as str.splitlines sees them, shown as \\n)."""
    return "\\n".join(str(message).strip().splitlines())


def main(argv: list[str] | None = None) -> None:
    """Console entry point: user mistakes exit 2 with one line, never a traceback."""
    try:
        app(args=argv, prog_name="ctxplan", standalone_mode=False)
    except UserInputError as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        sys.exit(2)
    except CtxplanError as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        sys.exit(2)
    except _NO_ARGS as exc:
        ctx = getattr(exc, "ctx", None)
        print(ctx.get_help() if ctx is not None else "usage: ctxplan COMMAND --help")
        sys.exit(0)
    except _USAGE as exc:
        msg = " ".join(exc.format_message().strip().splitlines())  # type: ignore[attr-defined]
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        print(f"error: {_one_line(msg + hint)}", file=sys.stderr)
        sys.exit(2)
    except _CLICK as exc:
        print(f"error: {_one_line(exc.format_message())}",  # type: ignore[attr-defined]
              file=sys.stderr)
        sys.exit(2)
    except _EXIT as exc:
        sys.exit(getattr(exc, "exit_code", 0))
    except _ABORT:
        print("aborted", file=sys.stderr)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as exc:  # a file the user named cannot be read or written
        where = f" {exc.filename}" if exc.filename else ""
        print(_one_line(f"error: cannot use{where}: {exc.strerror or exc}. Fix: check the "
                        "path and its permissions"), file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
