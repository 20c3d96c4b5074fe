"""``ctxplan solve``: the minimum chip count at one context length (or each of a study's)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ctxplan.cli.app import app, console, emit_json, lazy_module, print_warnings, timing_line
from ctxplan.cli.options import Invocation, command, require
from ctxplan.config.options import SensitivityOptions, SolveOptions, SolveReportOptions
from ctxplan.report.progress import progress_of, progress_wanted, solve_progress
from ctxplan.report.sensitivity import sensitivity_notes, sensitivity_table
from ctxplan.report.store import store_use_line
from ctxplan.report.tables import (
    search_path_table,
    solve_answer_line,
    solve_notes,
    solve_tiers_table,
    sweep_table,
    tp_table,
)

if TYPE_CHECKING:
    from ctxplan import api
else:
    api = lazy_module("ctxplan.api")  # loaded on first use: --help stays fast

if TYPE_CHECKING:
    from ctxplan.api import SensitivityStudy, SolveResult, SweepResult

STUDY_CLI = ("as_json", "config", "set_", "timings", "store", "no_store")


@command(app, "solve", subject=("model", "chip", "context"),
         groups=(SolveOptions, SolveReportOptions, SensitivityOptions), cli=STUDY_CLI,
         file_kind="study", file_paths={"context": "contexts"})
def solve_cmd(inv: Invocation) -> None:
    """The minimum chip count N* = Np + Nd (and KV tier) meeting the SLAs at context S.

    With --config, a study file may list several context lengths: each is solved.
    --sensitivity also moves each chip / cluster figure and SLA (as ctxplan sensitivity)."""
    started = time.perf_counter()
    stored = api.eval_cache(api.store_choice(inv["store"], inv["no_store"]))
    moves: SensitivityStudy | None = None
    with solve_progress(stored, "solving", enabled=progress_wanted(inv["as_json"])) as cache:
        if inv.from_file():
            study = api.load_study(inv["config"], sets=inv["set_"] or (),
                                   flags=inv.typed_flags())
            study_result = api.solve_study(study, cache=cache)
            if inv["sensitivity"]:
                moves = api.sensitivity_study(study, cache=cache)
        else:
            require(inv, "model", "chip", "context")
            result = api.solve(inv["model"], inv["chip"], inv["context"], cache=cache,
                               progress=progress_of(cache), **inv.of(SolveOptions))
            study_result = None
            if inv["sensitivity"]:
                moves = api.sensitivity(inv["model"], inv["chip"], inv["context"], cache=cache,
                                        **inv.of(SolveOptions), **inv.of(SensitivityOptions))
    wall = time.perf_counter() - started if inv["timings"] else None
    if study_result is not None and len(study_result.points) > 1:
        print_study(study_result, inv["as_json"], wall)
    else:
        print_solve(study_result.points[0] if study_result else result, inv["as_json"], wall,
                    moves)
    print_store_line(cache, inv["as_json"])


def print_store_line(cache: object, as_json: bool) -> None:
    """The result store's path and whether its hits came from earlier runs (not in JSON)."""
    line = None if as_json else store_use_line(cache)
    if line is not None:
        console.print(line, soft_wrap=True)   # a path stays whole


def print_solve(result: SolveResult, as_json: bool, wall: float | None,
                moves: SensitivityStudy | None = None) -> None:
    print_warnings(result.warnings)
    if as_json:
        data = result.to_dict()
        if moves is not None:
            data["sensitivity"] = moves.to_dict()
        emit_json(data, wall)
        return
    console.print(solve_tiers_table(result))
    for note in solve_notes(result):
        console.print(note)
    tps = tp_table(result)
    if tps is not None:
        console.print(tps)
    console.print(search_path_table(result))
    console.print(solve_answer_line(result))
    if moves is not None:
        console.print(sensitivity_table(moves))
        for note in sensitivity_notes(moves):
            console.print(note)
    if wall is not None:
        console.print(timing_line(wall))


def print_study(sweep: SweepResult, as_json: bool, wall: float | None) -> None:
    """A study with several context lengths: the sweep's JSON, or its table and answers."""
    print_warnings(sweep.warnings)
    if as_json:
        emit_json(sweep.to_dict(), wall)
        return
    console.print(sweep_table(sweep))
    for r in sweep.points:
        console.print(solve_answer_line(r))
    if wall is not None:
        console.print(timing_line(wall))
