"""The report page: from a result's JSON and its assumptions to one self-contained HTML file.

:func:`build_page` lays out the sections for the kind of result (solve, sweep, capacity,
sensitivity); :func:`render_html` fills the Jinja2 template with them, the stylesheet and the
script inlined, so the file needs no network. Jinja2 is imported here only, when a report is
written (``ctxplan --help`` never loads it). Same inputs, same bytes: nothing in the page
depends on the clock or the machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from ctxplan.config.units import format_count as plural
from ctxplan.config.units import format_rate, format_tokens
from ctxplan.report.page import view
from ctxplan.report.page.view import Json, Page, Section
from ctxplan.report.view.sweep import models as sweep_models


@dataclass(frozen=True)
class ReportInputs:
    """Everything a report shows; plain JSON-like data (a result's ``to_dict()``)."""

    data: Json                      # solve / sweep / capacity / sensitivity JSON
    assumptions: Json               # chip, cluster, model facts (report.page.assumptions)
    validation: Json                # the validation rows on the chip (api.validation_for_chip)
    source: str                     # where the result came from, in words
    version: str                    # ctxplan's version
    sensitivity: Json | None = None  # a sensitivity study beside a solve


def build_page(inputs: ReportInputs) -> Page:
    data = inputs.data
    kind = view.kind_of(data)
    sections: list[Section] = []
    sens = inputs.sensitivity
    if kind == "solve":
        sens = sens or data.get("sensitivity")
        key = format_tokens(data["context_length"])
        answer, tiers, search = view.solve_sections(data, key)
        sections += [answer, view.nstar_section([data], key), tiers, search]
        headline, ok = view.headline(data), bool(data["feasible"])
        where = data
    elif kind == "sweep":
        points = data["points"]
        models = sweep_models(data)
        several = len(models) > 1
        for m in models:
            curve = [p for p in points if p["model"] == m]
            key = f"sweep-{anchor(m)}" if several else "sweep"
            section = view.nstar_section(curve, key)
            if several:
                section.title = f"N*(S): {m}"
            sections.append(section)
        for p in points:
            s_text = format_tokens(p["context_length"])
            key = f"{anchor(p['model'])}-{s_text}" if several else s_text
            title = f"{p['model']}, S = {s_text}" if several else f"S = {s_text}"
            sections.append(Section(f"point-{key}", title, parts=view.solve_sections(
                p, key), collapsed=True, summary=view.headline(p)))
        feasible = [p for p in points if p["feasible"]]
        headline = _sweep_headline(data)
        ok = len(feasible) == len(points)
        where = dict(points[0]) if points else dict(data)
        where["model"] = " vs ".join(models) or where.get("model")
    elif kind == "capacity":
        sections += view.capacity_sections(data)
        shapes = data.get("solve")
        if shapes:
            parts = view.solve_sections(shapes, "shapes")
            sections.append(Section("shapes", "The instance shapes: the solve at the longest "
                                    "context", parts=parts, collapsed=True,
                                    summary=view.headline(shapes)))
        headline, ok = _capacity_headline(data), bool(data["feasible"])
        where = data
    elif kind == "pareto":
        sections += view.pareto_sections(data)
        front = data["front"]
        headline = (f"Pareto front of the decode pool, {data['model']} on {data['chip']} at S "
                    f"= {format_tokens(data['context_length'])}: {len(front)} shapes")
        ok = bool(front)
        where = data
    else:
        headline = f"What the answer hinges on: {data['model']} on {data['chip']} at S = " \
            f"{format_tokens(data['context_length'])}"
        ok = bool(data["base"]["feasible"])
        where = data
        sens = data
    if sens is not None:
        sections.append(view.sensitivity_section(sens))
        if kind == "sensitivity":
            sections[-1].notes.append("A saved sensitivity result holds the base plan only; "
                                      "for its per-tier table and search path, render the study "
                                      "(ctxplan report --config FILE --sensitivity) or the JSON "
                                      "of ctxplan solve --sensitivity --json.")
    sections.append(view.assumptions_section(inputs.assumptions))
    sections.append(view.validation_section(inputs.validation))
    badges = _badges(inputs)
    return Page(title=f"ctxplan {kind}: {where['model']} on {where['chip']}",
                subtitle=f"{where['model']} on {where['chip']} ({where['cluster']})",
                kind=kind, headline=headline, headline_ok=ok, sections=sections,
                source=inputs.source, version=inputs.version, badges=badges)


def anchor(name: str) -> str:
    """A name as part of an HTML id (letters, digits and dashes: ``deepseek-v3-2``)."""
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")


def _sweep_headline(data: Json) -> str:
    models = sweep_models(data)
    chip = data["chip"]

    def curve(m: str) -> str:
        return "; ".join(f"{format_tokens(p['context_length'])}: "
                         + (f"N* = {p['total_chips']}" if p["feasible"] else "infeasible")
                         for p in data["points"] if p["model"] == m)

    if len(models) == 1:
        return f"N*(S) for {models[0]} on {chip}: {curve(models[0])}"
    return f"N*(S) on {chip}: " + " | ".join(f"{m}: {curve(m)}" for m in models)


def _capacity_headline(data: Json) -> str:
    parts = [f"{format_rate(p['rate_per_s'])}: "
             + (f"{p['layout']}, {plural(p['total_chips'], 'chip')}" if p["feasible"]
                else "infeasible")
             for p in data["points"]]
    return f"Chips for the traffic, {data['model']} on {data['chip']}: " + "; ".join(parts)


def _badges(inputs: ReportInputs) -> list[tuple[str, str]]:
    a = inputs.assumptions
    out = []
    chip = a.get("chip")
    if chip is not None:
        flags = chip["facts"][0][1]
        out.append((f"chip {chip['name']}: " + ("verified" if "verified: yes" in flags
                                               else "unverified"),
                    "ok" if "verified: yes" in flags else "warn"))
        out.append((f"chip {chip['name']}: " + ("calibrated" if "calibrated: yes" in flags
                                               else "uncalibrated"),
                    "ok" if "calibrated: yes" in flags else "warn"))
    cluster = a.get("cluster")
    if cluster is not None:
        out.append((f"cluster {cluster['name']}: "
                    + ("unverified" if cluster["warn"] else "verified"),
                    "warn" if cluster["warn"] else "ok"))
    v = inputs.validation
    n = len(v.get("cases", []))
    out.append((f"{n} validation rows on {v['chip']}" if n else
                f"no validation row on {v['chip']}", "ok" if n else "warn"))
    return out


def _asset(name: str) -> str:
    return resources.files("ctxplan.report.page").joinpath("assets", name).read_text("utf-8")


def render_html(page: Page) -> str:
    """The page as one HTML document (stylesheet, script and charts inline)."""
    import jinja2
    from markupsafe import Markup

    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: _asset(name)),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
        lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["svg"] = Markup   # the charts: SVG we wrote and escaped ourselves
    template = env.get_template("report.html.j2")
    return template.render(page=page, css=Markup(_asset("report.css")),
                           js=Markup(_asset("report.js")))


def render_report(inputs: ReportInputs) -> str:
    return render_html(build_page(inputs))

