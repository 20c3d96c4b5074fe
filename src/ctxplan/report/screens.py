"""What each command prints on the terminal, in order, from its result's JSON: the answer first,
then the detail (the views of :mod:`ctxplan.report.view`, drawn by
:mod:`ctxplan.report.terminal`)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import RenderableType

from ctxplan.config.units import format_tokens
from ctxplan.report import terminal
from ctxplan.report.view import capacity, eval, pareto, sensitivity, solve, sweep, validation
from ctxplan.report.view.base import TableView
from ctxplan.report.view.solve import Json


def solve_screen(data: Json, *, brief: bool = False) -> list[RenderableType]:
    """The answer (N*, the pools with their TTFT and TPOT, the KV tier, what binds, the SLA;
    ``brief``: that alone), then how it was reached and the tables: per KV tier, the TP
    degrees, the search path."""
    out = [terminal.answer(solve.answer(data), brief=brief)]
    if brief:
        return out
    for view in solve.tables(data, format_tokens(data["context_length"]), grouped=True):
        out += terminal.with_notes(view)
    return out


def sweep_screen(data: Json) -> list[RenderableType]:
    """The N*(S) table and its notes."""
    table = sweep.sweep_table(data["points"], "nstar", sweep.sweep_title(data))
    return [terminal.table(table), *map(terminal.text, sweep.sweep_notes(data))]


def study_screen(data: Json, *, brief: bool = False) -> list[RenderableType]:
    """A study of several context lengths solved by ``ctxplan solve``: the N*(S) table and its
    notes, then each point's answer alone (``brief``: the answers alone)."""
    out = [] if brief else sweep_screen(data)
    return out + [terminal.answer(solve.answer(p), brief=True) for p in data["points"]]


def capacity_screen(data: Json) -> list[RenderableType]:
    """The traffic, the SLA and the instance shapes; the pools per rate and their notes."""
    return [terminal.answer(capacity.answer(data)),
            *terminal.with_notes(capacity.capacity_table(data))]


def pareto_screen(data: Json) -> list[RenderableType]:
    """What was searched, then the front's shapes and the notes."""
    return [terminal.answer(pareto.answer(data)), *terminal.with_notes(pareto.front_table(data))]


def sensitivity_screen(data: Json) -> list[RenderableType]:
    """The figures sorted by effect, and the moves that could not be made."""
    return terminal.with_notes(sensitivity.sensitivity_table(data))


def eval_screen(data: Json, *, trace: str | None = None,
                wall_s: float | None = None) -> list[RenderableType]:
    """What was simulated and measured; the critical path per layer when simulated."""
    out = [terminal.answer(eval.answer(data, trace=trace, wall_s=wall_s))]
    bd = eval.breakdown_table(data)
    return out + ([terminal.table(bd)] if bd is not None else [])


def validation_screen(data: Json) -> list[RenderableType]:
    """Per role its table, its breakdown parts and its summary; the sources and the rest."""
    return [terminal.table(x) if isinstance(x, TableView) else terminal.text(x)
            for x in validation.role_views(data)]


def validation_sensitivity_screen(moves: Sequence[Json]) -> list[RenderableType]:
    """``validate --sensitivity``: a column per case (wide by nature)."""
    found = validation.sensitivity_table(moves)
    if found is None:
        return []
    view, lines = found
    return [terminal.table(view), *map(terminal.text, lines)]
