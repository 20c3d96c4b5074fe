"""The human report of `ctxplan validate`: simulated vs measured per case, then the summary."""

from __future__ import annotations

from rich import box
from rich.console import RenderableType
from rich.table import Table

from ctxplan.config.units import format_seconds, format_tokens
from ctxplan.validate import ValidationReport


def validation_report(report: ValidationReport) -> list[RenderableType]:
    """The table, its numbered sources, the cases not simulated, and the summary line."""
    sources = list(dict.fromkeys(r.case.source for r in report.results))
    t = Table(title="ctxplan validate: simulated vs measured", box=box.SIMPLE_HEAD)
    for col in ("case", "metric", "layout", "S", "measured", "simulated", "error", "target",
                "role", "src"):
        t.add_column(col, no_wrap=True, justify="right" if col in (
            "S", "measured", "simulated", "error", "target") else "left")
    for r in report.results:
        c = r.case
        err = r.error
        shown = "-" if err is None else f"{err:+.1%}" + ("" if r.within else " !")
        t.add_row(c.name, c.metric, f"cp{c.cp} tp{c.tp} b{c.batch}",
                  format_tokens(c.context_length), format_seconds(c.measured_s),
                  format_seconds(r.simulated_s, missing="not simulated"), shown,
                  f"±{c.tolerance:.0%}", c.role, f"[{sources.index(c.source) + 1}]")
    out: list[RenderableType] = [t]
    out += [f"[{i}] {src}" for i, src in enumerate(sources, 1)]
    out += [f"{r.case.name}: not simulated: {r.reason}" for r in report.results
            if r.simulated_s is None]
    summ = report.summary()
    worst, median = summ["worst_abs_error"], summ["median_abs_error"]
    out.append(f"{summ['cases']} cases, {summ['within_tolerance']} within target; median "
               f"|error| " + ("-" if median is None else f"{median:.1%}") + ", worst |error| "
               + ("-" if worst is None else f"{worst:.1%} ({summ['worst_case']})"))
    return out
