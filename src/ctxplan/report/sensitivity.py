"""``ctxplan sensitivity`` (and ``solve --sensitivity``): the table sorted by effect and the
tornado plot. Numbers are written by :mod:`ctxplan.config.units`; matplotlib is imported
lazily with the Agg backend."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from ctxplan.config.units import format_duration, format_tokens
from ctxplan.report.layout import add_name_column, compact_table

if TYPE_CHECKING:
    from ctxplan.sensitivity import FigureRow, Move, Outcome, SensitivityStudy

LOW_COLOUR = "#4C72B0"    # the figure moved down
HIGH_COLOUR = "#DD8452"   # the figure moved up


def format_figure(name: str, value: float | None) -> str:
    """A figure's value in the unit people quote it in."""
    if value is None:
        return "-"
    last = name.rsplit(".", 1)[-1]
    if name.startswith("sla."):
        return format_duration(value)
    if "peak" in name.split("."):
        return f"{value / 1e12:,.1f} TFLOP/s"
    if last in ("bandwidth", "memory_bandwidth"):
        return f"{value / 1e9:,.1f} GB/s"
    if last == "memory_capacity":
        return f"{value / 1e9:,.1f} GB"
    if last in ("op_overhead", "collective_overhead", "latency"):
        return f"{value / 1e3:,.2f} us"
    return f"{value:.4g}"


def _step(factor: float) -> str:
    return f"{100 * (factor - 1):+.0f}%"


def _change(new: float | None, old: float | None) -> str:
    if new is None or old is None or old == 0:
        return "n/a"
    x = 100 * (new / old - 1)
    if x == 0:
        return "0"
    return f"{x:+.0f}" if abs(x) >= 9.95 else f"{x:+.1f}"


def _chips(m: Move) -> str:
    if m.outcome is None:
        return "n/a"
    return "inf." if not m.outcome.feasible else str(m.outcome.total_chips)


def _plan(b: Outcome) -> str:
    if not b.feasible:
        return "infeasible"
    return (f"N* = {b.total_chips} ({b.prefill_cp}x{b.prefill_tp} + {b.decode_cp}x"
            f"{b.decode_tp}, {b.kv_tier})")


def sensitivity_table(r: SensitivityStudy) -> Table:
    steps = " ".join(_step(f) for f in r.factors)
    t = compact_table(title=f"What the answer hinges on: {r.model} on {r.chip} ({r.cluster}), S = "
              f"{format_tokens(r.context_length)}; base {_plan(r.base)}, TTFT "
              f"{format_duration(r.base.ttft_s)}, TPOT {format_duration(r.base.tpot_s)}",
              caption=f"each figure moved by {steps}, one at a time, sorted by effect; N*: the "
              "new answer (inf.: infeasible); TPOT / TTFT: change of the base plan's, in %; "
              f"{r.sim_calls} simulations, {r.cache_hits} reused")
    add_name_column(t, "figure", [row.figure for row in r.rows])
    t.add_column("value", justify="right")
    for col in ("N*", "TPOT %", "TTFT %"):
        t.add_column(col, justify="right")
    for row in r.rows:
        chips = " ".join(_chips(m) for m in row.moves)
        tpot = " ".join(_change(m.base_plan_tpot_s, r.base.tpot_s) for m in row.moves)
        ttft = " ".join(_change(m.base_plan_ttft_s, r.base.ttft_s) for m in row.moves)
        moved = any(m.outcome is not None and m.outcome.total_chips != r.base.total_chips
                    for m in row.moves)
        t.add_row(row.figure, format_figure(row.figure, row.value), chips, tpot, ttft,
                  style="bold" if moved else None)
    return t


def sensitivity_notes(r: SensitivityStudy) -> list[str]:
    notes = []
    for row in r.rows:
        for m in row.moves:
            if m.reason:
                notes.append(f"{row.figure} {_step(m.factor)}: {m.reason}")
    return notes


def _relative(new: float | None, old: float | None) -> float:
    if new is None or old is None or old == 0:
        return math.nan
    return 100 * (new / old - 1)


def plot_tornado(r: SensitivityStudy, path: str | Path, *, dpi: int = 160) -> Path:
    """Three panels sharing the figures (largest effect on top): the change of N* in chips,
    and of the base plan's TPOT and TTFT in %, a bar per step from zero (down moves in blue,
    up moves in orange, the larger steps drawn wider)."""
    from ctxplan.report.plot import check_plot_path

    check_plot_path(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(r.rows)
    ys = list(range(len(rows)))[::-1]
    fig, axes = plt.subplots(1, 3, sharey=True, figsize=(13, 1.0 + 0.42 * max(4, len(rows))),
                             layout="constrained")
    base = r.base

    def chips(row: FigureRow, m: Move) -> float:
        c = row.chips_change(base, m)
        return math.nan if c is None or not math.isfinite(c) else c

    panels = (("change of N* (chips)", chips),
              ("base plan TPOT (%)",
               lambda row, m: _relative(m.base_plan_tpot_s, base.tpot_s)),
              ("base plan TTFT (%)",
               lambda row, m: _relative(m.base_plan_ttft_s, base.ttft_s)))
    big = max(abs(f - 1) for f in r.factors)
    for ax, (title, value) in zip(axes, panels, strict=True):
        for y, row in zip(ys, rows, strict=True):
            for m in sorted(row.moves, key=lambda m: -abs(m.factor - 1)):
                v = value(row, m)
                if math.isnan(v):
                    continue
                height = 0.34 + 0.4 * abs(m.factor - 1) / big
                # The larger steps wide and pale, the smaller ones narrow and solid on top.
                ax.barh(y, v, height=height, color=LOW_COLOUR if m.factor < 1 else HIGH_COLOUR,
                        alpha=1.0 - 0.55 * abs(m.factor - 1) / big)
            infeasible = [m for m in row.moves if m.outcome is not None
                          and not m.outcome.feasible]
            if infeasible and value is chips:
                ax.text(0, y, " infeasible at " + ", ".join(_step(m.factor) for m in infeasible),
                        va="center", fontsize=7, color="grey")
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_title(title, fontsize=10)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0].set_yticks(ys, [f"{row.figure}\n{format_figure(row.figure, row.value)}"
                            for row in rows], fontsize=8)
    handles = [plt.Rectangle((0, 0), 1, 1, color=LOW_COLOUR),
               plt.Rectangle((0, 0), 1, 1, color=HIGH_COLOUR)]
    axes[2].legend(handles, ["figure moved down", "figure moved up"], fontsize=8,
                   frameon=False, loc="lower right")
    steps = ", ".join(_step(f) for f in r.factors)
    fig.suptitle(f"What the answer hinges on: {r.model} on {r.chip}, S = "
                 f"{format_tokens(r.context_length)}; base {_plan(base)}; steps {steps}",
                 fontsize=11, fontweight="bold")
    out = Path(path)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out
