"""The N*(S) picture: chips per context length (prefill and decode stacked), TPOT on a second axis.

matplotlib is imported lazily with the Agg backend, so nothing else pays for it and no display
is needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxplan.report.tables import format_duration, format_tokens
from ctxplan.sweep import SweepResult

PREFILL_COLOUR = "#4C72B0"
DECODE_COLOUR = "#DD8452"
TPOT_COLOUR = "#2A9D5C"
SLA_COLOUR = "#C44E52"


def plot_sweep(result: SweepResult, path: str | Path, *, dpi: int = 160) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = result.points
    xs = list(range(len(points)))
    prefill = [(p.best.prefill.chips or 0) if p.best else 0 for p in points]
    decode = [(p.best.decode.chips or 0) if p.best else 0 for p in points]
    tpot_ms = [p.best.decode.latency_s * 1e3 if p.best and p.best.decode.latency_s else None
               for p in points]
    labels = [format_tokens(p.context_length) + "\nTTFT "
              + (format_duration(p.best.prefill.latency_s) if p.best else "-") for p in points]

    fig, ax = plt.subplots(figsize=(max(6.5, 1.5 * len(points) + 3), 5.2))
    width = 0.6
    ax.bar(xs, prefill, width, color=PREFILL_COLOUR, label="prefill chips (Np x tp)")
    ax.bar(xs, decode, width, bottom=prefill, color=DECODE_COLOUR,
           label="decode chips (Nd x tp)")
    top = max([a + b for a, b in zip(prefill, decode, strict=True)] + [1])
    for x, p, a, b in zip(xs, points, prefill, decode, strict=True):
        if p.best is None:
            ax.bar([x], [top * 0.25], width, color="none", edgecolor="grey", hatch="//")
            ax.text(x, top * 0.27, "infeasible", ha="center", va="bottom", color="grey",
                    fontsize=9)
            continue
        for base, h in ((0, a), (a, b)):
            if h >= top * 0.08:
                ax.text(x, base + h / 2, str(h), ha="center", va="center", color="white",
                        fontsize=9, fontweight="bold")
        ax.text(x, a + b + top * 0.02, f"N* = {a + b}\n{p.best.kv_tier}", ha="center",
                va="bottom", fontsize=9, fontweight="bold")
    ax.set_xticks(xs, labels)
    ax.set_xlabel("context length S")
    ax.set_ylabel("chips")
    ax.set_ylim(0, top * 1.3)
    ax.spines[["top"]].set_visible(False)

    ax2 = ax.twinx()
    sla_ms = _sla_ms(points)
    tx = [x for x, t in zip(xs, tpot_ms, strict=True) if t is not None]
    ty = [t for t in tpot_ms if t is not None]
    ax2.plot(tx, ty, "o-", color=TPOT_COLOUR, linewidth=2, markersize=6, label="TPOT at N*")
    if sla_ms is not None:
        ax2.axhline(sla_ms, color=SLA_COLOUR, linestyle="--", linewidth=1.5,
                    label=f"TPOT SLA {sla_ms:g} ms")
    ax2.set_ylabel("TPOT (ms)", color=TPOT_COLOUR)
    ax2.tick_params(axis="y", colors=TPOT_COLOUR)
    ax2.set_ylim(0, max([*ty, sla_ms or 0, 1e-9]) * 1.3)
    ax2.spines[["top"]].set_visible(False)

    first = points[0] if points else None
    if first is not None:
        ax.set_title(f"Minimum chips N*(S) = prefill + decode: {first.model} on {first.chip}"
                     f" ({first.cluster})", fontsize=11, fontweight="bold")
    handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    names = ax.get_legend_handles_labels()[1] + ax2.get_legend_handles_labels()[1]
    ax.legend(handles, names, loc="upper left", fontsize=8, frameon=False, ncol=2)
    fig.text(0.99, 0.01, "every latency simulated by ctxplan (event-driven)", ha="right",
             va="bottom", fontsize=7, color="grey")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out


def _sla_ms(points: Any) -> float | None:
    limits = {p.sla.tpot_limit_s(p.batch) for p in points}
    return min(limits) * 1e3 if limits else None
