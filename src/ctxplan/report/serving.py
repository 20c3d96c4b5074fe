"""``ctxplan capacity``: the table of pools per rate, the notes, and chips against the rate.

Numbers are written by the formatters of :mod:`ctxplan.config.units`; matplotlib is imported
lazily with the Agg backend (as in :mod:`ctxplan.report.plot`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from ctxplan.config.units import format_duration, format_rate, format_seconds, format_tokens
from ctxplan.report.layout import compact_table

if TYPE_CHECKING:
    from ctxplan.serve import CapacityResult


def _mix(r: CapacityResult) -> str:
    parts = [format_tokens(n) + (f":{s:g}" if len(r.mix.lengths) > 1 else "")
             for n, s in zip(r.mix.lengths, r.mix.shares, strict=True)]
    return ",".join(parts)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def capacity_header(r: CapacityResult) -> Text:
    """The instance shapes and the targets, one line."""
    ttft = "TTFT not constrained" if r.ttft_max_s is None else \
        f"TTFT <= {format_duration(r.ttft_max_s)}"
    head = (f"{r.model} on {r.chip} ({r.cluster}), contexts {_mix(r)}, {r.output_tokens} output "
            f"tokens; {ttft}, TPOT <= {format_seconds(r.tpot_max_s)} at p{r.percentile:g}")
    if r.prefill_shape is None or r.decode_shape is None:
        return Text(head + f": INFEASIBLE: {r.reason}", style="bold red")
    p, d = r.prefill_shape, r.decode_shape
    service = ", ".join(f"{format_duration(s)} at {format_tokens(n)}"
                        for n, s in zip(r.mix.lengths, r.prefill_service_s, strict=True))
    batch = ", ".join(f"{b} at {format_tokens(n)}"
                      for n, b in zip(r.mix.lengths, r.decode_max_batch, strict=True))
    handoff = f" (with its KV handoff, {r.kv_handoff})" if r.kv_handoff else ""
    return Text(head + f"\nprefill instance: Np {p.cp} x tp {p.tp} = {p.chips} chips, TTFT "
                f"{service}{handoff}; decode instance: Nd {d.cp} x tp {d.tp} = {d.chips} "
                f"chips, batch up to {batch}; KV tier {r.kv_tier}")


def capacity_table(r: CapacityResult) -> Table:
    t = compact_table(title=f"Pools per arrival rate: {r.requests} requests (seed {r.seed}), "
              f"{r.sim_calls} simulations, {r.cache_hits} cache hits"
              + (f" ({r.earlier_run_hits} from earlier runs)" if r.earlier_run_hits else ""),
              caption="xPyD: prefill and decode instances; chips: total (prefill + decode); "
              "util: busy fraction of each pool; batch: mean sequences per decode step")
    pct = f"p{r.percentile:g}"
    for col in ("rate", "xPyD", "chips", f"TTFT {pct}", f"TPOT {pct}", "util P / D", "batch"):
        t.add_column(col, no_wrap=col in ("rate", "xPyD"),
                     justify="left" if col == "xPyD" else "right")
    for p in r.points:
        if not p.feasible:
            t.add_row(format_rate(p.rate_per_s), "-", "-", format_duration(p.ttft_percentile_s),
                      format_seconds(p.tpot_percentile_s), "-", "-", style="red")
            continue
        t.add_row(format_rate(p.rate_per_s), p.layout or "-",
                  f"{p.total_chips} ({p.prefill_chips} + {p.decode_chips})",
                  format_duration(p.ttft_percentile_s), format_seconds(p.tpot_percentile_s),
                  f"{_pct(p.prefill_utilisation)} / {_pct(p.decode_utilisation)}",
                  f"{p.decode_mean_batch:.2f}" if p.decode_mean_batch is not None else "-")
    return t


def capacity_notes(r: CapacityResult) -> list[str]:
    notes = []
    if r.ttft_max_s is None:
        notes.append("TTFT not constrained: the prefill pool is the fewest instances that keep "
                     "up with the arrivals (queues stay bounded); give --ttft-max for a target")
    for p in r.points:
        if p.reason:
            notes.append(f"{format_rate(p.rate_per_s)}: {p.reason}")
        elif p.decode_raised_by_rate_per_s is not None:
            notes.append(f"{format_rate(p.rate_per_s)}: {p.decode_min_at_rate} decode instances "
                         f"meet TPOT at this rate; {p.decode_instances} meet it at every lower "
                         f"rate given ({format_rate(p.decode_raised_by_rate_per_s)} needed "
                         "more): pools are sized for the peak")
    return notes


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
    ttft = "TTFT not constrained" if r.ttft_max_s is None else \
        f"TTFT <= {format_duration(r.ttft_max_s)}"
    ax.set_title(f"Chips to serve the traffic: {r.model} on {r.chip}\ncontexts {_mix(r)}, "
                 f"{ttft}, TPOT <= {format_seconds(r.tpot_max_s)} at p{r.percentile:g}",
                 fontsize=11, fontweight="bold")
    out = Path(path)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out
