"""``ctxplan capacity --plot``: chips against the arrival rate (its table and notes are the
view of :mod:`ctxplan.report.view.capacity`). matplotlib is imported lazily with the Agg backend
(as in :mod:`ctxplan.report.plot`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ctxplan.config.units import format_rate
from ctxplan.report.view.capacity import mix_text, sla_text

if TYPE_CHECKING:
    from ctxplan.serve import CapacityResult


def plot_capacity(r: CapacityResult, path: str | Path, *, dpi: int = 160) -> Path:
    """Chips against the arrival rate: prefill and decode chips stacked, xPyD on each bar."""
    from ctxplan.report.plot import DECODE_COLOUR, PREFILL_COLOUR, check_plot_path

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
    width = 0.62
    ax.bar(xs, prefill, width, color=PREFILL_COLOUR, label="prefill chips (x instances)")
    ax.bar(xs, decode, width, bottom=prefill, color=DECODE_COLOUR,
           label="decode chips (y instances)")
    top = max([a + b for a, b in zip(prefill, decode, strict=True)] + [1])
    for x, p, a, b in zip(xs, points, prefill, decode, strict=True):
        if not p.feasible:
            ax.bar([x], [top * 0.3], width, color="none", edgecolor="grey", hatch="//")
            ax.text(x, top * 0.32, "infeasible", ha="center", va="bottom", color="grey")
            continue
        ax.text(x, a + b + top * 0.02, f"{a + b}\n{p.layout}", ha="center", va="bottom",
                fontsize=10, fontweight="bold")
    ax.set_xticks(xs, [format_rate(p.rate_per_s) for p in points])
    ax.set_xlabel("arrival rate (requests per second)")
    ax.set_ylabel("chips")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, top * 1.25)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(loc="upper left", fontsize=9, frameon=False)
    data = r.to_dict()
    ax.set_title(f"Chips to serve the traffic: {r.model} on {r.chip}\ncontexts "
                 f"{mix_text(data)}, {sla_text(data)}", fontsize=11, fontweight="bold")
    out = Path(path)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out
