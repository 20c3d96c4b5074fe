"""The tables of `ctxplan validate`: calibration and prediction rows apart, and sensitivities."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from ctxplan.validate import ROLES, CaseResult, SensitivityResult, ValidationReport

_TITLES = {
    "calibration": "calibration rows: used to set figures of the presets (a fit, not evidence)",
    "prediction": "prediction rows: used for nothing (what the simulator predicts)",
}


def _seconds(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.3f} s" if x >= 1 else f"{x * 1e3:,.3f} ms"


def _size(tokens: int) -> str:
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else str(tokens)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def print_validation(report: ValidationReport, console: Console) -> None:
    """One table per role, each with its own summary line, then the sources."""
    sources = list(dict.fromkeys(r.case.source for r in report.results))
    summary = report.summary()
    for role in ROLES:
        results = report.of_role(role)
        stats = summary["by_role"][role]
        if not results:
            console.print(f"{_TITLES[role]}: none in this directory.\n")
            continue
        console.print(_table(results, _TITLES[role], sources))
        console.print(_summary_line(stats) + "\n")
    for i, src in enumerate(sources, 1):
        console.print(f"[{i}] {src}")
    for r in report.results:
        if r.simulated_s is None:
            console.print(f"{r.case.name}: not simulated: {r.reason}")
    console.print("all rows: " + _summary_line(summary))


def _table(results: Sequence[CaseResult], title: str, sources: list[str]) -> Table:
    t = Table(title=title, box=box.SIMPLE_HEAD)
    for col in ("case", "metric", "layout", "S", "measured", "simulated", "error", "target",
                "src"):
        t.add_column(col, no_wrap=True, justify="right" if col in (
            "S", "measured", "simulated", "error", "target") else "left")
    for r in results:
        c = r.case
        err = r.error
        shown = "-" if err is None else f"{err:+.1%}" + ("" if r.within else " !")
        t.add_row(c.name, c.metric, f"cp{c.cp} tp{c.tp} b{c.batch}", _size(c.context_length),
                  _seconds(c.measured_s),
                  _seconds(r.simulated_s) if r.simulated_s is not None else "not simulated",
                  shown, f"±{c.tolerance:.0%}", f"[{sources.index(c.source) + 1}]")
    return t


def _summary_line(stats: dict[str, Any]) -> str:
    worst = stats["worst_abs_error"]
    return (f"{stats['cases']} cases, {stats['within_tolerance']} within target; median |error| "
            f"{_pct(stats['median_abs_error'])}, worst |error| "
            + ("-" if worst is None else f"{worst:.1%} ({stats['worst_case']})"))


def print_sensitivity(results: Sequence[SensitivityResult], console: Console) -> None:
    """Rows: figures; columns: cases; cells: the change of the simulated latency in %."""
    if not results:
        return
    cases = list(dict.fromkeys(r.case for r in results))
    names = list(dict.fromkeys(r.figure for r in results))
    cell = {(r.case, r.figure): r for r in results}
    factor = results[0].factor
    t = Table(title=f"change of the simulated latency with one figure x {factor:g}",
              box=box.SIMPLE_HEAD)
    t.add_column("figure", no_wrap=True)
    for i in range(len(cases)):
        t.add_column(f"#{i + 1}", justify="right", no_wrap=True)
    for name in names:
        row = [name]
        for case in cases:
            r = cell.get((case, name))
            row.append("" if r is None else "n/a" if r.change is None else f"{r.change:+.1%}")
        t.add_row(*row)
    console.print(t)
    for i, case in enumerate(cases, 1):
        console.print(f"#{i} {case}")
    for r in results:
        if r.change is None:
            console.print(f"{r.case} / {r.figure}: n/a: {r.reason}")
