"""The N*(S) picture: chips per context length (prefill and decode stacked), TPOT on a second axis;
with several models, one N*(S) curve per model in one plot (and one TPOT curve each below).

matplotlib is imported lazily with the Agg backend, so nothing else pays for it and no display
is needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxplan.config.paths import check_writable
from ctxplan.config.units import format_short, format_tokens
from ctxplan.sweep import SweepResult

PLOT_FORMATS = (".png", ".svg", ".pdf")
PREFILL_COLOUR = "#4C72B0"
DECODE_COLOUR = "#DD8452"
TPOT_COLOUR = "#2A9D5C"
SLA_COLOUR = "#C44E52"


def check_plot_path(path: str | Path) -> Path:
    """Refuse a path matplotlib cannot write before anything is simulated."""
    return check_writable(path, "plot", PLOT_FORMATS)


def stacked_chips(ax: Any, prefill: list[int], decode: list[int], feasible: list[bool],
                  labels: tuple[str, str]) -> float:
    """Prefill chips stacked under decode chips, one bar per point, an infeasible point drawn
    hatched and named (the sweep's and the capacity plot's bars); the top of the tallest bar."""
    xs = list(range(len(prefill)))
    width = 0.62
    ax.bar(xs, prefill, width, color=PREFILL_COLOUR, label=labels[0])
    ax.bar(xs, decode, width, bottom=prefill, color=DECODE_COLOUR, label=labels[1])
    top = max([a + b for a, b in zip(prefill, decode, strict=True)] + [1])
    for x, ok in zip(xs, feasible, strict=True):
        if not ok:
            ax.bar([x], [top * 0.3], width, color="none", edgecolor="grey", hatch="//")
            ax.text(x, top * 0.32, "infeasible", ha="center", va="bottom", color="grey",
                    fontsize=10)
    return top


def save(fig: Any, path: str | Path, dpi: int, *, footnote: bool = True) -> Path:
    """Write the figure (with the footnote saying every latency is simulated) and close it."""
    import matplotlib.pyplot as plt

    if footnote:
        fig.text(0.99, 0.005, "every latency simulated by ctxplan (event-driven)", ha="right",
                 va="bottom", fontsize=7, color="grey")
    out = Path(path)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out


MODEL_COLOURS = ("#4C72B0", "#DD8452", "#55A868", "#8172B3", "#937860", "#DA8BC3")
MODEL_MARKERS = ("o", "s", "^", "D", "v", "P")


def plot_sweep(result: SweepResult, path: str | Path, *, dpi: int = 160) -> Path:
    check_plot_path(path)
    if len(result.models) > 1:
        return _plot_models(result, path, dpi)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    points = result.points
    xs = list(range(len(points)))
    prefill = [(p.best.prefill.chips or 0) if p.best else 0 for p in points]
    decode = [(p.best.decode.chips or 0) if p.best else 0 for p in points]
    tpot_ms = [p.best.decode.latency_s * 1e3 if p.best and p.best.decode.latency_s else None
               for p in points]
    searched = any(p.batch_searched for p in points)
    labels = [format_tokens(p.context_length)
              + (f"\nTTFT {format_short(p.best.prefill.latency_s)}" if p.best else "")
              for p in points]

    # Two panels sharing x: chips above, TPOT below. A twin y axis would put TPOT markers on
    # top of the bar labels whenever the two scales happen to line up.
    fig, (ax, ax2) = plt.subplots(
        2, 1, sharex=True, figsize=(max(7.0, 1.5 * len(points) + 3), 6.4),
        gridspec_kw={"height_ratios": [3, 1.25]}, layout="constrained")
    top = stacked_chips(ax, prefill, decode, [p.best is not None for p in points],
                        ("prefill chips (Np x TP)", "decode chips (Nd x TP)"))
    for x, p, a, b in zip(xs, points, prefill, decode, strict=True):
        if p.best is None:
            continue
        for base, h, name in ((0, a, "Np"), (a, b, "Nd")):
            if h >= top * 0.08:
                pool = p.best.prefill if name == "Np" else p.best.decode
                n = f"{pool.answer}" + (f" x TP{pool.tp}" if pool.tp > 1 else "")
                ax.text(x, base + h / 2, f"{name} {n}", ha="center", va="center",
                        color="white", fontsize=9, fontweight="bold")
        batch = f"\nbatch {p.best.decode.batch}" if p.batch_searched else ""
        ax.text(x, a + b + top * 0.02, f"N* = {a + b}\n{p.best.kv_tier}{batch}", ha="center",
                va="bottom", fontsize=10, fontweight="bold")
    ax.set_ylabel("chips")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # chips come whole
    ax.set_ylim(0, top * (1.35 if searched else 1.25))
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(loc="upper left", fontsize=9, frameon=False)

    sla_ms = _sla_ms(points)
    tx = [x for x, t in zip(xs, tpot_ms, strict=True) if t is not None]
    ty = [t for t in tpot_ms if t is not None]
    ax2.plot(tx, ty, "o-", color=TPOT_COLOUR, linewidth=2.2, markersize=6,
             label="TPOT at N* and its batch" if searched else "TPOT at N*")
    batches = {x: p.best.decode.batch for x, p in zip(xs, points, strict=True) if p.best}
    for x, t in zip(tx, ty, strict=True):
        text = f"{t:.3g} ms" + (f" at b {batches[x]}" if searched else "")
        ax2.annotate(text, (x, t), textcoords="offset points", xytext=(0, 7),
                     ha="center", fontsize=8, color=TPOT_COLOUR, fontweight="bold",
                     bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                           "alpha": 0.85})
    per_point = [p.sla.tpot_limit_s(p.chosen_batch or 1) * 1e3 for p in points]
    if len(set(per_point)) > 1:
        # per-batch reading with the batch searched: each point has its own limit, b * tpot_max.
        ax2.scatter(xs, per_point, marker="_", s=900, color=SLA_COLOUR, linewidths=2,
                    label="SLA at each point's batch")
        sla_ms = max(per_point)
    elif sla_ms is not None:
        ax2.axhline(sla_ms, color=SLA_COLOUR, linestyle="--", linewidth=1.5,
                    label=f"SLA {sla_ms:g} ms")
    ax2.set_ylim(0, max([*ty, sla_ms or 0, 1e-9]) * 1.3)
    ax2.set_ylabel("TPOT (ms)")
    ax2.spines[["top", "right"]].set_visible(False)
    ax2.legend(loc="lower left", fontsize=8, frameon=False, ncol=2)
    ax2.set_xticks(xs, labels)
    ax2.set_xlabel("context length S")
    ax2.set_xlim(-0.6, len(points) - 0.4)

    if points:
        ax.set_title(plot_title(result), fontsize=12, fontweight="bold")
    return save(fig, path, dpi)


def _plot_models(result: SweepResult, path: str | Path, dpi: int) -> Path:
    """One N*(S) line per model above (total chips, with Np + Nd at each point), one TPOT line
    per model below; the contexts on a shared categorical axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    models = result.models
    contexts = [p.context_length for p in result.curve(models[0])]
    xs = list(range(len(contexts)))
    fig, (ax, ax2) = plt.subplots(
        2, 1, sharex=True, figsize=(max(7.0, 1.6 * len(contexts) + 3.5), 6.6),
        gridspec_kw={"height_ratios": [3, 1.4]}, layout="constrained")
    top = 1
    infeasible = []
    at_x = {x: [(p.total_chips or 0) for m in models for p in result.curve(m)
                if p.context_length == s] for x, s in zip(xs, contexts, strict=True)}
    span = max([1, *(n for ns in at_x.values() for n in ns)])

    def label_at(x: int, i: int) -> tuple[float, int]:
        """Where model i's label goes at x: above its point, or, when other models' points lie
        close above it, above the highest of those, stacked in model order (a label never sits
        on another model's marker)."""
        own = at_x[x][i]
        near = [k for k, n in enumerate(at_x[x]) if abs(n - own) <= 0.12 * span]
        return max(at_x[x][k] for k in near), near.index(i)

    for i, model in enumerate(models):
        colour, marker = MODEL_COLOURS[i % len(MODEL_COLOURS)], MODEL_MARKERS[i % 6]
        curve = result.curve(model)
        n_star = [p.total_chips for p in curve]
        fx = [x for x, n in zip(xs, n_star, strict=True) if n is not None]
        fy = [n for n in n_star if n is not None]
        top = max([top, *fy])
        ax.plot(fx, fy, marker=marker, color=colour, linewidth=2.2, markersize=7, label=model)
        for x, p in zip(xs, curve, strict=True):
            if p.best is None:
                infeasible.append(f"{model} at {format_tokens(p.context_length)}")
                continue
            b = p.best
            batch = f", b {b.decode.batch}" if p.batch_searched else ""
            y, k = label_at(x, i)
            ax.annotate(f"{b.total_chips} = {b.prefill.answer}x{b.prefill.tp} + "
                        f"{b.decode.answer}x{b.decode.tp}{batch}", (x, y),
                        textcoords="offset points", xytext=(0, 10 + 12 * k), ha="center",
                        fontsize=8, color=colour, fontweight="bold")
        tpot = [(x, p.best.decode.latency_s * 1e3) for x, p in zip(xs, curve, strict=True)
                if p.best and p.best.decode.latency_s]
        ax2.plot([x for x, _ in tpot], [t for _, t in tpot], marker=marker, color=colour,
                 linewidth=2, markersize=6, label=model)
    ax.set_ylabel("minimum chips N* = prefill + decode")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, top * 1.35)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(loc="upper left", fontsize=9, frameon=False)
    if infeasible:
        ax.text(0.99, 0.02, "infeasible: " + ", ".join(infeasible), transform=ax.transAxes,
                ha="right", va="bottom", fontsize=8, color="grey")
    sla_ms = _sla_ms(result.points)
    limits = sorted({(xs[contexts.index(p.context_length)],
                      p.sla.tpot_limit_s(p.chosen_batch or 1) * 1e3) for p in result.points})
    if len({ms for _, ms in limits}) > 1:
        # Per-batch reading with the batch searched: each point's limit is its batch's.
        ax2.scatter([x for x, _ in limits], [ms for _, ms in limits], marker="_", s=900,
                    color=SLA_COLOUR, linewidths=2, label="SLA at each point's batch")
        sla_ms = max(ms for _, ms in limits)
    elif sla_ms is not None:
        ax2.axhline(sla_ms, color=SLA_COLOUR, linestyle="--", linewidth=1.5,
                    label=f"SLA {sla_ms:g} ms")
    # Room above the SLA line for the legend, clear of the curves (which stay below it).
    ax2.set_ylim(0, (sla_ms or 1.0) * 1.45)
    ax2.set_ylabel("TPOT at N* (ms)")
    ax2.spines[["top", "right"]].set_visible(False)
    ax2.legend(loc="upper left", fontsize=8, frameon=False, ncol=len(models) + 1)
    ax2.set_xticks(xs, [format_tokens(s) for s in contexts])
    ax2.set_xlabel("context length S")
    ax2.set_xlim(-0.5, len(contexts) - 0.5)
    ax.set_title(plot_title(result), fontsize=12, fontweight="bold")
    return save(fig, path, dpi)


def plot_title(result: SweepResult) -> str:
    """The picture's title: what was solved, and the SLA's shape (TTFT, batch)."""
    points = result.points
    first = points[0]
    ttft = ("TTFT not constrained" if first.sla.ttft_max_s is None
            else f"TTFT <= {format_short(first.sla.ttft_max_s)}")
    batch = ", batch: the largest within the SLA" if any(p.batch_searched for p in points) \
        else ""
    # Two lines, so the title fits a narrow figure (few context lengths) too.
    if len(result.models) > 1:
        return (f"Minimum chips N*(S), one curve per model\n{first.chip} ({first.cluster}); "
                f"{ttft}{batch}")
    return (f"Minimum chips N*(S) = prefill + decode\n{first.model} on {first.chip} "
            f"({first.cluster}); {ttft}{batch}")


def _sla_ms(points: Any) -> float | None:
    limits = {p.sla.tpot_limit_s(p.chosen_batch or 1) for p in points}
    return min(limits) * 1e3 if limits else None
