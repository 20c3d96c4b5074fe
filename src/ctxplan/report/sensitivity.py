"""``ctxplan sensitivity --plot`` (and ``solve --sensitivity``): the tornado (the table sorted by
effect is the view of :mod:`ctxplan.report.view.sensitivity`). matplotlib is imported lazily
with the Agg backend."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from ctxplan.config.units import format_tokens
from ctxplan.report.view.sensitivity import format_figure, plan_text, step_text

if TYPE_CHECKING:
    from ctxplan.sensitivity import FigureRow, Move, SensitivityStudy

LOW_COLOUR = "#4C72B0"    # the figure moved down
HIGH_COLOUR = "#DD8452"   # the figure moved up


def _step(factor: float) -> str:
    return step_text(factor - 1)


def _relative(new: float | None, old: float | None) -> float:
    if new is None or old is None or old == 0:
        return math.nan
    return 100 * (new / old - 1)


def plot_tornado(r: SensitivityStudy, path: str | Path, *, dpi: int = 160) -> Path:
    """Three panels sharing the figures (largest effect on top): the change of N* in chips,
    and of the base plan's TPOT and TTFT in %, a bar per step from zero (down moves in blue,
    up moves in orange, the larger steps drawn wider)."""
    from ctxplan.report.plot import check_plot_path, save

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
                 f"{format_tokens(r.context_length)}; base {plan_text(base.to_dict())}; "
                 f"steps {steps}",
                 fontsize=11, fontweight="bold")
    return save(fig, path, dpi, footnote=False)
