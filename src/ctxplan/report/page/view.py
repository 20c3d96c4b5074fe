"""What the report page shows, from the JSON of a result: sections of the views and charts.

One path for both sources: a study solved now goes through ``result.to_dict()``, a saved
result through ``json.load``; either way the sections hold the views of
:mod:`ctxplan.report.view` (the same answers and tables the terminal draws) with the charts of
:mod:`ctxplan.report.page.charts` beside them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxplan.report.page import charts
from ctxplan.report.view import capacity, pareto, sensitivity, solve, sweep, validation
from ctxplan.report.view.base import Answer, Column, Row, TableView

__all__ = ["Chart", "Column", "Page", "Row", "Section", "TableView", "kind_of"]

Json = Mapping[str, Any]
KINDS = ("solve", "sweep", "capacity", "sensitivity", "pareto")


@dataclass
class Chart:
    id: str
    title: str
    svg: str
    caption: str = ""


@dataclass
class Section:
    id: str
    title: str
    facts: list[tuple[str, str]] = field(default_factory=list)   # label, value
    notes: list[str] = field(default_factory=list)
    tables: list[TableView] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    parts: list[Section] = field(default_factory=list)           # sub-sections
    collapsed: bool = False       # drawn in a <details> (opened for printing)
    summary: str = ""             # the <details> summary line


@dataclass
class Page:
    title: str
    subtitle: str
    kind: str
    headline: str                  # the answer in one line
    headline_ok: bool
    sections: list[Section]
    source: str
    version: str
    badges: list[tuple[str, str]] = field(default_factory=list)   # (text, "warn" | "ok")


def kind_of(data: Json) -> str:
    """Which command's JSON ``data`` is (solve, sweep, capacity, sensitivity, pareto), from its
    keys."""
    if "front" in data and "plan_front" in data and "points" in data:
        return "pareto"
    if "points" in data and "contexts" in data and "sim_calls" in data and "prefill_instance" \
            not in data:
        return "sweep"
    if "prefill_instance" in data and "points" in data:
        return "capacity"
    if "figures" in data and "base" in data and "steps" in data:
        return "sensitivity"
    if "tiers" in data and "candidates" in data and "total_chips" in data:
        return "solve"
    raise ValueError("not the --json output of ctxplan solve, sweep, capacity, sensitivity or "
                     "pareto")


def answer_facts(a: Answer, question: str | None = None) -> list[tuple[str, str]]:
    """An answer as the page's facts: the question (its title unless given), then every
    fact."""
    return [("question", question or a.title), *a.pairs()]


# ---------------------------------------------------------------------------------- solve


def solve_sections(s: Json, key: str) -> list[Section]:
    """The answer, the tiers, the TP options and the search path of one solve."""
    tiers, *rest = solve.tables(s, key)
    *tps, path = rest
    search = Section(f"search-{key}", "The search path", notes=[solve.search_fact(s)],
                     charts=[Chart(f"chart-search-{key}", "Simulated latency against chips",
                                   charts.search_chart(s, f"chart-search-{key}"),
                                   "Every simulated candidate of the search; hover for its "
                                   "values. Candidates that do not fit in memory have no "
                                   "latency and appear in the table only.")],
                     tables=[path])
    facts = answer_facts(solve.answer(s), solve.question(s))
    return [Section(f"answer-{key}", "The answer", facts=facts),
            Section(f"tiers-section-{key}", "Per KV tier", tables=[tiers, *tps]), search]


headline = solve.headline


# ---------------------------------------------------------------------------------- sweep


def nstar_section(points: Sequence[Json], key: str) -> Section:
    return Section(f"nstar-{key}", "N*(S)",
                   charts=[Chart(f"chart-nstar-{key}", "Minimum chips per context length",
                                 charts.nstar_chart(points, f"chart-nstar-{key}"),
                                 "Prefill chips (bottom) and decode chips (top) of the answer "
                                 "at each context length; hover a bar for its values.")],
                   tables=[sweep.sweep_table(points, f"nstar-table-{key}")],
                   notes=sweep.tier_flips(points))


# ------------------------------------------------------------------------------- capacity


def capacity_sections(cap: Json) -> list[Section]:
    return [Section("answer-capacity", "The answer: pools for the traffic",
                    facts=answer_facts(capacity.answer(cap)),
                    charts=[Chart("chart-capacity", "Chips against the arrival rate",
                                  charts.capacity_chart(cap, "chart-capacity"),
                                  "Prefill (bottom) and decode (top) chips per rate; hover a "
                                  "bar for its values.")],
                    tables=[capacity.capacity_table(cap), capacity.shapes_table(cap)])]


# --------------------------------------------------------------------------------- pareto


def pareto_sections(data: Json) -> list[Section]:
    """What was searched, the chart of every shape and the front's table."""
    return [Section("answer-pareto", "The Pareto front of the decode pool",
                    facts=answer_facts(pareto.answer(data)),
                    charts=[Chart("chart-pareto", "Tokens/s per chip against tokens/s per user",
                                  charts.pareto_chart(data, "chart-pareto"),
                                  "Every simulated decode shape; the front joins the shapes no "
                                  "other beats on both. Hover a dot for its shape.")],
                    tables=[pareto.front_table(data)])]


# ---------------------------------------------------------------------------- sensitivity


def sensitivity_section(sens: Json) -> Section:
    steps = [sensitivity.step_text(x) for x in sens["steps"]]
    return Section("sensitivity", "What the answer hinges on",
                   facts=[("base plan", sensitivity.plan_text(sens["base"])),
                          ("steps", ", ".join(steps))],
                   charts=[Chart("chart-tornado", "Tornado: each figure moved",
                                 charts.tornado_chart(sens, "chart-tornado"),
                                 "Blue: the figure moved down; orange: up; the larger steps "
                                 "drawn thicker and paler. Hover a bar for its value.")],
                   tables=[sensitivity.sensitivity_table(sens)])


# ----------------------------------------------------------------------- the assumptions


def assumptions_section(facts: Json) -> Section:
    """The chip, cluster and model figures with their sources and flags (see
    :mod:`ctxplan.report.page.assumptions`)."""
    parts = []
    items = [("chip", facts.get("chip")), ("cluster", facts.get("cluster"))]
    items += [("model", m) for m in facts.get("models", [])]
    for what, item in items:
        if item is None:
            continue
        tables = []
        for tv in item.get("tables", []):
            t = TableView(tv["id"], tv["title"], [Column(c, n, wrap=c in ("note", "value"))
                                                   for c, n in tv["columns"]])
            for r in tv["rows"]:
                t.add(*r)
            tables.append(t)
        sid = f"assumptions-{what}" + (f"-{item['anchor']}" if item.get("anchor") else "")
        parts.append(Section(sid, f"{what.capitalize()}: {item['name']}",
                             facts=[(str(a), str(b)) for a, b in item.get("facts", [])],
                             notes=list(item.get("notes", [])), tables=tables))
    return Section("assumptions", "Assumptions: chip, cluster and model figures",
                   notes=list(facts.get("notes", [])), parts=parts)


# ----------------------------------------------------------------------------- validation


def validation_section(v: Json) -> Section:
    """The simulator against published measurements on this chip (``ctxplan validate``)."""
    chip = v["chip"]
    if v.get("error"):
        return Section("validation", f"Validation on {chip}", notes=[v["error"]])
    cases = v.get("cases", [])
    if not cases:
        return Section("validation", f"Validation on {chip}", notes=[
            f"No validation row covers chip {chip}: none of the {v.get('total_cases', 0)} "
            "published measurements in validation/ was taken on it, so the latencies above are "
            "unchecked against hardware for this chip."], facts=[("rows", "none")])
    t = validation.cases_table(cases, f"Published measurements on {chip} against the "
                               "simulator", validation.sources(cases), "validation-table")
    t.notes += validation.source_notes(cases)
    t.caption += (". Calibration rows were used to set figures of the presets: their error "
                  "shows a fit, not evidence.")
    parts = [validation.parts_table(c) for c in cases if c["breakdown"]]
    notes = []
    if not v["by_role"].get("prediction", {}).get("cases"):
        notes.append(f"Every row on {chip} is a calibration row (used to set figures): no "
                     "prediction row checks this chip yet.")
    return Section("validation", f"Validation on {chip}", facts=validation.chip_facts(v),
                   tables=[t, *parts], notes=notes)
