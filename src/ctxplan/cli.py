"""The command line: a thin layer over :mod:`ctxplan.api`.

Every command prints a table by default and JSON with ``--json``. A user mistake prints one line
(``error: <field> = <value>: <problem>. Fix: <fix>``) on stderr and exits with code 2.
"""

from __future__ import annotations

import importlib
import json
import sys
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
    model: Annotated[str, typer.Option(help="Model preset, model YAML or HF config.json.")],
    chip: Annotated[str, typer.Option(help="Chip preset or chip YAML.")],
    context: Annotated[str, typer.Option(help="Context length S, e.g. 8K, 128K, 1M.")],
    phase: Annotated[str, typer.Option(help="prefill (TTFT) or decode (TPOT).")],
    cp: Annotated[int, typer.Option(help="CP degree: Np (prefill) or Nd (decode).")],
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
) -> None:
    """Simulate one configuration: TTFT or TPOT, per-chip memory and CP bytes."""
    result = api.evaluate(model, chip, context, phase, cp, cluster=cluster, tp=tp, batch=batch,
                          kv_tier=kv_tier, mla_mode=mla_mode, full_simulation=full_sim,
                          trace_path=trace)
    if as_json:
        emit_json(result.to_dict())
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
    model: Annotated[str, typer.Option(help="Model preset, model YAML or HF config.json.")],
    chip: Annotated[str, typer.Option(help="Chip preset or chip YAML.")],
    context: Annotated[str, typer.Option(help="Context length S, e.g. 8K, 128K, 1M.")],
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
) -> None:
    """The minimum chip count N* = Np + Nd (and KV tier) meeting the SLAs at context S."""
    from ctxplan.report.tables import (
        search_path_table,
        solve_answer_line,
        solve_notes,
        solve_tiers_table,
    )

    result = api.solve(model, chip, context, cluster=cluster, tpot_max=tpot_max,
                       ttft_max=ttft_max, kv_tiers=kv_tiers, batch=batch, strategy=strategy,
                       candidates=candidates, group_size=group_size, max_chips=max_chips,
                       prefill_tp=prefill_tp, decode_tp=decode_tp, tps_reading=tps_reading)
    if as_json:
        emit_json(result.to_dict())
        return
    console.print(solve_tiers_table(result))
    for note in solve_notes(result):
        console.print(note)
    console.print(search_path_table(result))
    console.print(solve_answer_line(result))


@app.command("sweep")
def sweep_cmd(
    model: Annotated[str, typer.Option(help="Model preset, model YAML or HF config.json.")],
    chip: Annotated[str, typer.Option(help="Chip preset or chip YAML.")],
    contexts: Annotated[str, typer.Option(help="Context lengths, e.g. 8K,32K,128K,512K,1M.")],
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
) -> None:
    """Solve every context length: the N*(S) curve, as a table, a CSV / JSON and a plot."""
    from ctxplan.config.units import parse_token_list
    from ctxplan.report.tables import sweep_table
    from ctxplan.sweep.output import check_out_path, write_sweep

    sizes = parse_token_list(contexts)
    if out is not None:
        check_out_path(out)
    options: dict[str, Any] = dict(
        cluster=cluster, tpot_max=tpot_max, ttft_max=ttft_max, kv_tiers=kv_tiers, batch=batch,
        strategy=strategy, candidates=candidates, group_size=group_size, max_chips=max_chips,
        prefill_tp=prefill_tp, decode_tp=decode_tp, tps_reading=tps_reading)
    if not as_json and sys.stderr.isatty():
        from rich.progress import Progress

        with Progress(console=Console(stderr=True), transient=True) as progress:
            task = progress.add_task(f"solving {len(sizes)} context lengths", total=len(sizes))
            result = api.sweep(model, chip, sizes, on_point=lambda _: progress.advance(task),
                               **options)
    else:
        result = api.sweep(model, chip, sizes, **options)
    if out is not None:
        write_sweep(result, out)
    if plot is not None:
        from ctxplan.report.plot import plot_sweep

        plot_sweep(result, plot)
    if as_json:
        emit_json(result.to_dict())
        return
    console.print(sweep_table(result))
    for what, path in (("results", out), ("plot", plot)):
        if path is not None:
            console.print(f"{what}: {path}")


@app.command()
def version() -> None:
    """Print the version."""
    print(__version__)


# ----------------------------------------------------------------------------------- entry


def main(argv: list[str] | None = None) -> None:
    """Console entry point: user mistakes exit 2 with one line, never a traceback."""
    try:
        app(args=argv, prog_name="ctxplan", standalone_mode=False)
    except UserInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except CtxplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except _NO_ARGS as exc:
        ctx = getattr(exc, "ctx", None)
        print(ctx.get_help() if ctx is not None else "usage: ctxplan COMMAND --help")
        sys.exit(0)
    except _USAGE as exc:
        msg = exc.format_message().strip().replace("\n", " ")  # type: ignore[attr-defined]
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        print(f"error: {msg}{hint}", file=sys.stderr)
        sys.exit(2)
    except _CLICK as exc:
        print(f"error: {exc.format_message()}", file=sys.stderr)  # type: ignore[attr-defined]
        sys.exit(getattr(exc, "exit_code", 1))
    except _EXIT as exc:
        sys.exit(getattr(exc, "exit_code", 0))
    except _ABORT:
        print("aborted", file=sys.stderr)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(0)


if __name__ == "__main__":
    main()
