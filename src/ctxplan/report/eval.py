"""The human table of one evaluation (`ctxplan eval`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from ctxplan.config.units import format_gb, format_seconds

if TYPE_CHECKING:
    from ctxplan.evaluate import EvalResult


def eval_table(result: EvalResult, *, trace: str | None = None,
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
    t.add_row(label, format_seconds(r.latency_s) if r.simulated else
              f"not simulated: {r.reason}")
    mem = r.memory
    t.add_row("memory per chip", f"{format_gb(mem.per_chip_bytes)} / "
              f"{format_gb(mem.capacity_bytes)} GB ({'fits' if mem.fits else 'DOES NOT FIT'}): "
              f"weights {format_gb(mem.weights_bytes)}, KV {format_gb(mem.kv_bytes)}, "
              f"activations {format_gb(mem.activation_bytes)}, reserve "
              f"{format_gb(mem.reserved_bytes)}")
    if r.cached:
        t.add_row("cached prefix", f"{r.cached:,} tokens cached, "
                  f"{r.context_length - r.cached:,} new")
    if r.ring is not None:
        g = r.ring
        both = (f"; auto simulated pass-kv {format_seconds(g.ttft_pass_kv_s)}, pass-q "
                f"{format_seconds(g.ttft_pass_q_s)}" if g.asked == "auto" else "")
        t.add_row("prefill ring", f"{g.used}{both}; Meta's heuristic: {g.heuristic} (miss "
                  f"rate {g.miss_rate:.1%}, pass-q up to {g.threshold:.1%})")
    if r.comm:
        c = r.comm
        t.add_row("CP comm", f"{c.pattern}: {c.sends_per_layer} sends per layer, "
                  f"{format_gb(c.simulated_bytes)} GB simulated = "
                  f"{format_gb(c.analytic_bytes)} GB analytic")
        if len(c.kinds) > 1:
            for k in c.kinds:
                t.add_row(f"  {k.layer_type}", f"{k.layers} layers, {k.pattern}: "
                          f"{k.ring_steps_per_layer} steps, {k.sends_per_layer} sends per "
                          f"layer, {format_gb(k.analytic_bytes)} GB")
        t.add_row("simulation", f"{r.layers_simulated} layers simulated, {r.tasks:,} tasks, "
                  f"{r.events:,} events; busiest compute {r.max_compute_utilisation:.0%}, "
                  f"busiest link {r.max_link_utilisation:.0%}")
    if trace and r.simulated:
        t.add_row("trace", f"{trace} (open in https://ui.perfetto.dev)")
    if wall_s is not None:
        t.add_row("wall time", f"{wall_s:,.3f} s")
    return t
