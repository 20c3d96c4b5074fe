"""The report of `ctxplan validate`: calibration and prediction rows apart, and sensitivities."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import RenderableType
from rich.table import Table

from ctxplan.config.units import format_seconds, format_short, format_tokens
from ctxplan.report.layout import add_name_column, compact_table, words_column

if TYPE_CHECKING:
    from ctxplan.validate import CaseResult, SensitivityResult, ValidationReport
    from ctxplan.validate_kernels import KernelResult

_TITLES = {
    "calibration": "calibration rows: used to set figures of the presets (a fit, not evidence)",
    "prediction": "prediction rows: used for nothing (what the simulator predicts)",
}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def validation_report(report: ValidationReport) -> list[RenderableType]:
    """One table per role, each with its own summary line, then the sources, the cases not
    simulated and the summary of all rows."""
    from ctxplan.validate import ROLES

    sources = list(dict.fromkeys(r.case.source for r in report.results))
    summary = report.summary()
    out: list[RenderableType] = []
    for role in ROLES:
        results = report.of_role(role)
        stats = summary["by_role"][role]
        if not results:
            out.append(f"{_TITLES[role]}: none in this directory.\n")
            continue
        out.append(_table(results, _TITLES[role], sources))
        out += [_parts_table(r) for r in results if r.parts]
        out.append(_summary_line(stats) + "\n")
    out += [f"[{i}] {src}" for i, src in enumerate(sources, 1)]
    out += [f"{r.case.name}: not simulated: {r.reason}" for r in report.results
            if r.simulated_s is None]
    out.append("all rows: " + _summary_line(summary))
    out += kernel_report(report.kernels)
    return out


_KERNEL_TITLES = {
    "calibration": "kernel rows, calibration tables: the kernel model is fitted to them",
    "prediction": "kernel rows, prediction tables: other GPUs' kernels, never fitted",
}


def kernel_report(results: Sequence[KernelResult]) -> list[RenderableType]:
    """The kernel-level rows, one line per published table (its chip, rows, median and worst
    |error|), calibration tables apart from prediction tables, each role with its median
    against the target and per kernel class; every row is in --json."""
    from ctxplan.validate_kernels import ROLES as KERNEL_ROLES
    from ctxplan.validate_kernels import summary

    if not results:
        return []
    stats = summary(results)
    out: list[RenderableType] = []
    for role in KERNEL_ROLES:
        rows = [r for r in results if r.row.role == role]
        if not rows:
            continue
        t = compact_table(title=_KERNEL_TITLES[role],
                          caption="per table: median and worst |error| of its rows")
        add_name_column(t, "table", list(dict.fromkeys(r.row.table for r in rows)))
        for col in ("chip", "rows", "median", "worst"):
            t.add_column(col, no_wrap=True, justify="left" if col == "chip" else "right")
        for table in dict.fromkeys(r.row.table for r in rows):
            errs = sorted(abs(r.error) for r in rows if r.row.table == table)
            chip = next(r.row.chip.name for r in rows if r.row.table == table)
            mid = errs[len(errs) // 2] if len(errs) % 2 else (
                errs[len(errs) // 2 - 1] + errs[len(errs) // 2]) / 2
            t.add_row(table, chip, str(len(errs)), f"{mid:.1%}", f"{errs[-1]:.1%}")
        out.append(t)
        x = stats[role]
        by = ", ".join(f"{c} {y['median_abs_error']:.1%} ({y['rows']})"
                       for c, y in x["by_class"].items())
        met = "meets" if x["within_target"] else "misses"
        out.append(f"{role} kernel rows: {x['rows']}, median |error| "
                   f"{_pct(x['median_abs_error'])} ({met} the {x['median_target']:.0%} target), "
                   f"worst {_pct(x['worst_abs_error'])}; by class: {by}\n")
    return out


def _table(results: Sequence[CaseResult], title: str, sources: list[str]) -> Table:
    """One row per case: its name whole, what was measured (source, metric, layout, S) as
    words that wrap, and the figures; fits 80 columns."""
    t = compact_table(title=title, caption="what: \\[source] metric, layout, context; meas. / "
                      "sim.: measured / simulated; tol.: the target on |error|")
    add_name_column(t, "case", [r.case.name for r in results])
    whats = []
    for r in results:
        c = r.case
        layout = f"cp{c.cp} tp{c.tp} b{c.batch}" + (f" {c.pass_q}" if c.pass_q and c.cp > 1
                                                    else "")
        whats.append(f"[{sources.index(c.source) + 1}] {c.metric} {layout} "
                     f"{format_tokens(c.context_length)}")
    words_column(t, "what", whats)
    for col in ("meas.", "sim.", "error", "tol."):
        t.add_column(col, no_wrap=True, justify="right")
    for r, what in zip(results, whats, strict=True):
        c = r.case
        err = r.error
        shown = "-" if err is None else f"{err:+.1%}" + ("" if r.within else " !")
        t.add_row(c.name, what, format_short(c.measured_s),
                  format_short(r.simulated_s) if r.simulated_s is not None else "none",
                  shown, f"±{c.tolerance:.0%}")
    return t


def _parts_table(r: CaseResult) -> Table:
    """The named parts of a breakdown case (Table 8), measured against the critical path."""
    t = Table(title=f"{r.case.name}: the parts (critical path per layer; docs/validation.md)",
              box=box.SIMPLE_HEAD)
    for col in ("part", "measured", "simulated", "error", "target"):
        t.add_column(col, no_wrap=True, justify="left" if col == "part" else "right")
    for p in r.parts:
        err = p.error
        shown = "-" if err is None else f"{err:+.1%}" + ("" if p.within else " !")
        t.add_row(p.name, format_seconds(p.measured_s),
                  format_seconds(p.simulated_s, missing="not simulated"), shown,
                  "reported" if p.tolerance is None else f"±{p.tolerance:.0%}")
    return t


def _summary_line(stats: dict[str, Any]) -> str:
    worst = stats["worst_abs_error"]
    return (f"{stats['cases']} cases, {stats['within_tolerance']} within target; median |error| "
            f"{_pct(stats['median_abs_error'])}, worst |error| "
            + ("-" if worst is None else f"{worst:.1%} ({stats['worst_case']})"))


def sensitivity_report(results: Sequence[SensitivityResult]) -> list[RenderableType]:
    """Rows: figures; columns: cases; cells: the change of the simulated latency in %."""
    if not results:
        return []
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
    out: list[RenderableType] = [t]
    out += [f"#{i} {case}" for i, case in enumerate(cases, 1)]
    out += [f"{r.case} / {r.figure}: n/a: {r.reason}" for r in results if r.change is None]
    return out
