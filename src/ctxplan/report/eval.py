"""The human table of one evaluation (`ctxplan eval`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table

from ctxplan.config.units import format_bytes, format_gb, format_seconds

if TYPE_CHECKING:
    from ctxplan.evaluate import EvalResult


def eval_table(result: EvalResult, *, trace: str | None = None,
               wall_s: float | None = None) -> RenderableType:
    """The evaluation's table and, when it was simulated, its critical-path breakdown."""
    table = _summary_table(result, trace=trace, wall_s=wall_s)
    if not result.breakdown:
        return table
    return Group(table, breakdown_table(result))


def breakdown_table(result: EvalResult) -> Table:
    """Per layer, the time each op kind was the binding constraint on the critical path
    (mean over the simulated layers; docs/validation.md, "The breakdown"), largest first, with
    the part that was the fixed cost of communication operations."""
    bd = result.breakdown
    per = bd["per_layer_s"]
    op_cost = bd["op_cost_per_layer_s"]
    layer_s = sum(per.values())
    t = Table(title=f"critical path per layer (mean of {bd['layers']} layers: "
              f"{format_seconds(layer_s)}; all layers and the rest: "
              f"{format_seconds(bd['critical_path_s'])})")
    for col in ("op kind", "per layer", "of which op cost", "share"):
        t.add_column(col, justify="left" if col == "op kind" else "right", no_wrap=True)
    for kind, secs in sorted(per.items(), key=lambda kv: (-kv[1], kv[0])):
        cost = op_cost.get(kind)
        t.add_row(kind, format_seconds(secs), format_seconds(cost) if cost else "",
                  f"{secs / layer_s:.1%}" if layer_s else "-")
    for kind, secs in sorted(bd["outside_layers_s"].items()):
        t.add_row(f"{kind} (once)", format_seconds(secs), "", "")
    return t


def _summary_table(result: EvalResult, *, trace: str | None = None,
                   wall_s: float | None = None) -> Table:
    r = result
    t = Table(title=f"{r.model} on {r.chip} ({r.cluster}), {r.phase}, S = {r.context_length:,}",
              show_header=False)
    t.add_column("what")
    t.add_column("value")
    t.add_row("layout", f"cp {r.cp} x tp {r.tp} = {r.chips} chips, batch {r.batch}"
              + (f", MLA {r.mla_mode}" if r.mla_mode else ""))
    t.add_row("KV tier", f"{r.kv_tier} ({r.c_kv_bytes} B per token per layer)")
    label = "TTFT" if r.phase == "prefill" else "TPOT"
    if r.handoff is not None:
        label += " (with handoff)"
    t.add_row(label, format_seconds(r.latency_s) if r.simulated else
              f"not simulated: {r.reason}")
    mem = r.memory
    usable = (f"{format_gb(mem.capacity_bytes)} GB" if mem.memory_headroom == 1.0 else
              f"{format_gb(mem.usable_bytes)} GB usable of {format_gb(mem.capacity_bytes)}")
    t.add_row("memory per chip", f"{format_gb(mem.per_chip_bytes)} / {usable} "
              f"({'fits' if mem.fits else 'DOES NOT FIT'}): "
              f"weights {format_gb(mem.weights_bytes)}, KV {format_gb(mem.kv_bytes)}, "
              f"activations {format_gb(mem.activation_bytes)}, reserve "
              f"{format_gb(mem.reserved_bytes)}")
    if r.cached:
        t.add_row("cached prefix", f"{r.cached:,} tokens cached, "
                  f"{r.context_length - r.cached:,} new")
    if r.ring is not None:
        g = r.ring
        gathered = ("" if g.ttft_all_gather_s is None
                    else f", all-gather {format_seconds(g.ttft_all_gather_s)}")
        both = (f"; auto simulated pass-kv {format_seconds(g.ttft_pass_kv_s)}, pass-q "
                f"{format_seconds(g.ttft_pass_q_s)}{gathered}" if g.asked == "auto" else "")
        t.add_row("prefill ring", f"{g.used}{both}; Meta's heuristic: {g.heuristic} (miss "
                  f"rate {g.miss_rate:.1%}, pass-q up to {g.threshold:.1%})")
    if r.moe is not None:
        mc = r.moe
        both = (f"; auto simulated ep {format_seconds(mc.latency_ep_s)}, tp "
                f"{format_seconds(mc.latency_tp_s)}" if mc.asked == "auto" else "")
        t.add_row("MoE", f"{mc.used}{both}")
    if r.comm:
        c = r.comm
        t.add_row("CP comm", f"{c.pattern}: {c.sends_per_layer} sends per layer, "
                  f"{format_bytes(c.simulated_bytes)} simulated = "
                  f"{format_bytes(c.analytic_bytes)} analytic")
        if len(c.kinds) > 1:
            for k in c.kinds:
                steps = k.ring_steps_per_layer
                t.add_row(f"  {k.layer_type}", f"{k.layers} layers, {k.pattern}: "
                          f"{steps} step{'' if steps == 1 else 's'}, "
                          f"{k.sends_per_layer} sends per "
                          f"layer, {format_bytes(k.analytic_bytes)}")
        t.add_row("simulation", f"{r.layers_simulated} layers simulated, {r.tasks:,} tasks, "
                  f"{r.events:,} events; busiest compute {r.max_compute_utilisation:.0%}, "
                  f"busiest link {r.max_link_utilisation:.0%}")
    h = r.handoff
    if h is not None:
        t.add_row("KV handoff", f"{h.mode} to a decode pool of cp {h.decode_cp} x tp "
                  f"{h.decode_tp} (chips {h.first_decode_chip}.."
                  f"{h.first_decode_chip + h.decode_cp * h.decode_tp - 1}): "
                  f"{format_bytes(h.bytes_moved)} in {h.sends:,} transfers "
                  f"(= the decode pool's KV, {format_bytes(h.decode_kv_bytes)}); "
                  f"{format_seconds(h.handoff_s)} not hidden behind the prefill's "
                  f"{format_seconds(h.prefill_s)}")
    if trace and r.simulated:
        t.add_row("trace", f"{trace} (open in https://ui.perfetto.dev)")
    if wall_s is not None:
        t.add_row("wall time", f"{wall_s:,.3f} s")
    return t
