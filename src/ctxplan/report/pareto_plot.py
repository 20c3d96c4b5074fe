"""The Pareto picture: every simulated decode shape as a point, tokens/s per user across and
tokens/s per chip up (AIConfigurator's axes), the front drawn as a line through its shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxplan.config.units import format_tokens
from ctxplan.report.plot import DECODE_COLOUR, PREFILL_COLOUR, SLA_COLOUR, save


def plot_pareto(data: dict[str, Any], path: str | Path, *, dpi: int = 160) -> Path:
    """Write the plot of a Pareto result's JSON (``ParetoResult.to_dict()``) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.2))
    pts = [p for p in data["points"] if p["simulated"]]
    ax.scatter([p["tokens_per_s_per_user"] for p in pts],
               [p["tokens_per_s_per_chip"] for p in pts], s=14, color="#BBBBBB",
               label="shapes simulated")
    for key, y, colour, name in (("front", "tokens_per_s_per_chip", DECODE_COLOUR,
                                  "front (decode pool)"),
                                 ("plan_front", "plan_tokens_per_s_per_chip", PREFILL_COLOUR,
                                  "front (whole plan, prefill pool counted)")):
        front = [p for p in data[key] if p[y] is not None]
        if front:
            ax.plot([p["tokens_per_s_per_user"] for p in front], [p[y] for p in front],
                    marker="o", color=colour, label=name)
    limit = data["sla"]["tpot_limit_s"]
    ax.axvline(1.0 / limit, color=SLA_COLOUR, linestyle="--", linewidth=1,
               label=f"TPOT target ({limit * 1e3:g} ms)")
    ax.set_xlabel("tokens/s per user (1 / TPOT)")
    ax.set_ylabel("tokens/s per chip")
    ax.set_title(f"{data['model']} on {data['chip']}, S = "
                 f"{format_tokens(data['context_length'])}: decode shapes")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save(fig, path, dpi)
