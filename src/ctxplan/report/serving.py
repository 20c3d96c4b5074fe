"""``ctxplan capacity --plot``: chips against the arrival rate (its table and notes are the
view of :mod:`ctxplan.report.view.capacity`). matplotlib is imported lazily with the Agg backend
(as in :mod:`ctxplan.report.plot`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ctxplan.config.units import format_rate
from ctxplan.report.view.capacity import mix_text, shape_cell, sla_text

if TYPE_CHECKING:
    from ctxplan.serve import CapacityResult


def plot_capacity(r: CapacityResult, path: str | Path, *, dpi: int = 160) -> Path:
    """Chips against the arrival rate: prefill and decode chips stacked, xPyD on each bar."""
    from ctxplan.report.plot import check_plot_path, save, stacked_chips

    check_plot_path(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    points = r.points
    xs = list(range(len(points)))
    prefill = [p.prefill_chips or 0 for p in points]
    decode = [p.decode_chips or 0 for p in points]
    fig, ax = plt.subplots(figsize=(max(6.5, 1.4 * len(points) + 3), 5.2), layout="constrained")
    top = stacked_chips(ax, prefill, decode, [p.feasible for p in points],
                        ("prefill chips (x instances)", "decode chips (y instances)"))
    data = r.to_dict()
    for x, p, a, b, pd in zip(xs, points, prefill, decode, data["points"], strict=True):
        if not p.feasible:
            continue
        ax.text(x, a + b + top * 0.02, f"{a + b}\n{p.layout}\n{shape_cell(pd)}", ha="center",
                va="bottom", fontsize=9, fontweight="bold")
    ax.set_xticks(xs, [format_rate(p.rate_per_s) for p in points])
    ax.set_xlabel("arrival rate (requests per second)")
    ax.set_ylabel("chips")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, top * 1.35)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(loc="upper left", fontsize=9, frameon=False)
    ax.set_title(f"Chips to serve the traffic: {r.model} on {r.chip}\ncontexts "
                 f"{mix_text(data)}, {sla_text(data)}", fontsize=11, fontweight="bold")
    return save(fig, path, dpi, footnote=False)

