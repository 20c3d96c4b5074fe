"""The view of a validation run, from its JSON (``ValidationReport.to_dict()``, or the rows of
one chip, ``api.validation_for_chip``): the published measurements against the simulator, one
table per role (calibration rows set figures of the presets, prediction rows set nothing), the
named parts of breakdown cases, the summary lines and the kernel-level rows; and
``validate --sensitivity``'s table.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ctxplan.config.units import format_seconds, format_short, format_tokens
from ctxplan.report.view.base import BAD, Column, TableView

Json = Mapping[str, Any]
ROLES = ("calibration", "prediction")   # ctxplan.validate.ROLES (tested)
ROLE_TITLES = {
    "calibration": "calibration rows: used to set figures of the presets (a fit, not evidence)",
    "prediction": "prediction rows: used for nothing (what the simulator predicts)",
}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def sources(cases: Sequence[Json]) -> list[str]:
    """The sources the cases cite, in order, each once (cited as [1], [2] ...)."""
    return list(dict.fromkeys(c["source"] for c in cases))


def source_notes(cases: Sequence[Json]) -> list[str]:
    return [f"[{i}] {src}" for i, src in enumerate(sources(cases), 1)]


def _error(err: float | None, within: bool) -> str:
    return "-" if err is None else f"{err:+.1%}" + ("" if within else " !")


def cases_table(cases: Sequence[Json], title: str, cited: Sequence[str], tid: str
                ) -> TableView:
    """One row per case: its name whole, what was measured (the source as [i] of ``cited``,
    the metric, the layout, S) as words that wrap, and the figures."""
    t = TableView(tid, title, [Column("case", name_col=True), Column("what", wrap=True),
                               Column("meas.", True), Column("sim.", True),
                               Column("error", True), Column("tol.", True)],
                  caption="what: [source] metric, layout, context; meas. / sim.: measured / "
                  "simulated; error = simulated / measured - 1 (! outside the target); tol.: "
                  "the target on |error|")
    for c in cases:
        layout = f"cp{c['cp']} tp{c['tp']} b{c['batch']}" + (
            f" {c['pass_q']}" if c.get("pass_q") and c["cp"] > 1 else "")
        what = (f"[{list(cited).index(c['source']) + 1}] {c['metric']} {layout} "
                f"{format_tokens(c['context_length'])}")
        t.add(c["name"], what, format_short(c["measured"]),
              "none" if c["simulated"] is None else format_short(c["simulated"]),
              _error(c["error"], c["within_tolerance"]), f"±{c['tolerance']:.0%}",
              cls="" if c["within_tolerance"] else BAD)
    return t


def parts_table(c: Json) -> TableView:
    """The named parts of a breakdown case (Table 8), measured against the critical path."""
    t = TableView(f"parts-{c['name']}", f"{c['name']}: the parts (critical path per layer; "
                  "docs/validation.md)",
                  [Column("part", name_col=True), Column("measured", True),
                   Column("simulated", True), Column("error", True), Column("target", True)])
    for p in c["breakdown"]:
        t.add(p["part"], format_seconds(p["measured"]),
              format_seconds(p["simulated"], missing="not simulated"),
              _error(p["error"], p["within_tolerance"]),
              "reported" if p["tolerance"] is None else f"±{p['tolerance']:.0%}")
    return t


def summary_text(stats: Json) -> str:
    """'3 cases, 2 within target; median |error| 4.1%, worst |error| 12.0% (case-x)'."""
    worst = stats["worst_abs_error"]
    return (f"{stats['cases']} cases, {stats['within_tolerance']} within target; median |error| "
            f"{_pct(stats['median_abs_error'])}, worst |error| "
            + ("-" if worst is None else f"{worst:.1%} ({stats['worst_case']})"))


def role_views(data: Json) -> list[TableView | str]:
    """Per role its table (and the parts of its breakdown cases) and its summary line, then the
    sources, the cases not simulated and the summary of all rows."""
    cases = data["cases"]
    summary = data["summary"]
    cited = sources(cases)
    out: list[TableView | str] = []
    for role in ROLES:
        mine = [c for c in cases if c["role"] == role]
        if not mine:
            out.append(f"{ROLE_TITLES[role]}: none in this directory.\n")
            continue
        out.append(cases_table(mine, ROLE_TITLES[role], cited, f"validation-{role}"))
        out += [parts_table(c) for c in mine if c["breakdown"]]
        out.append(summary_text(summary["by_role"][role]) + "\n")
    out += source_notes(cases)
    out += [f"{c['name']}: not simulated: {c['reason']}" for c in cases if c["simulated"] is None]
    out.append("all rows: " + summary_text(summary))
    out += kernel_views(data.get("kernels") or [], summary.get("kernels") or {})
    return out


KERNEL_TITLES = {
    "calibration": "kernel rows, calibration tables: the kernel model is fitted to them",
    "prediction": "kernel rows, prediction tables: other GPUs' kernels, never fitted",
}


def kernel_views(rows: Sequence[Json], stats: Json) -> list[TableView | str]:
    """The kernel-level rows (ctxplan.validate_kernels), one line per published table (its
    chip, rows, median and worst |error|), calibration tables apart from prediction tables,
    each role with its median against the target and per kernel class; every row is in
    --json."""
    out: list[TableView | str] = []
    for role in ROLES:
        mine = [r for r in rows if r["role"] == role]
        if not mine:
            continue
        t = TableView(f"kernels-{role}", KERNEL_TITLES[role],
                      [Column("table", name_col=True), Column("chip"), Column("rows", True),
                       Column("median", True), Column("worst", True)],
                      caption="per table: median and worst |error| of its rows")
        for table in dict.fromkeys(r["table"] for r in mine):
            errs = [abs(r["error"]) for r in mine if r["table"] == table]
            chip = next(r["chip"] for r in mine if r["table"] == table)
            t.add(table, chip, len(errs), f"{statistics.median(errs):.1%}", f"{max(errs):.1%}")
        out.append(t)
        x = stats[role]
        by = ", ".join(f"{c} {y['median_abs_error']:.1%} ({y['rows']})"
                       for c, y in x["by_class"].items())
        met = "meets" if x["within_target"] else "misses"
        out.append(f"{role} kernel rows: {x['rows']}, median |error| "
                   f"{_pct(x['median_abs_error'])} ({met} the {x['median_target']:.0%} target), "
                   f"worst {_pct(x['worst_abs_error'])}; by class: {by}\n")
    return out


def chip_facts(v: Json) -> list[tuple[str, str]]:
    """Per role, how the rows of one chip fare (``api.validation_for_chip``)."""
    facts = []
    for role, stats in v["by_role"].items():
        if not stats["cases"]:
            facts.append((f"{role} rows", "none on this chip"))
            continue
        facts.append((f"{role} rows", summary_text(stats)))
    return facts


def sensitivity_table(moves: Sequence[Json]) -> tuple[TableView, list[str]] | None:
    """``validate --sensitivity``: rows are figures, columns cases (#1, #2 ...), cells the change
    of the simulated latency in %; and the lines naming the cases and the moves not simulated.
    None when nothing was moved."""
    if not moves:
        return None
    cases = list(dict.fromkeys(m["case"] for m in moves))
    names = list(dict.fromkeys(m["figure"] for m in moves))
    cell = {(m["case"], m["figure"]): m for m in moves}
    t = TableView("validation-sensitivity", f"change of the simulated latency with one figure x "
                  f"{moves[0]['factor']:g}",
                  [Column("figure", name_col=True),
                   *(Column(f"#{i + 1}", True) for i in range(len(cases)))])
    for name in names:
        row = [name]
        for case in cases:
            m = cell.get((case, name))
            row.append("" if m is None else "n/a" if m["change"] is None
                       else f"{m['change']:+.1%}")
        t.add(*row)
    lines = [f"#{i} {case}" for i, case in enumerate(cases, 1)]
    lines += [f"{m['case']} / {m['figure']}: n/a: {m['reason']}" for m in moves
              if m["change"] is None]
    return t, lines
