"""``ctxplan solve``: the minimum chip count at one context length (or each of a study's)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ctxplan.cli.app import api, app, console, emit_json, print_warnings, show, timing_line
from ctxplan.cli.options import Invocation, command, require
from ctxplan.cli.run import print_store_line, solving, study_of, wall_time
from ctxplan.config.options import SensitivityOptions, SolveOptions, SolveReportOptions
from ctxplan.report.progress import progress_of
from ctxplan.report.screens import sensitivity_screen, solve_screen, study_screen

if TYPE_CHECKING:
    from ctxplan.api import SensitivityStudy, SolveResult, SweepResult

STUDY_CLI = ("as_json", "config", "set_", "timings", "store", "no_store")


@command(app, "solve", subject=("model", "chip", "context"),
         groups=(SolveOptions, SolveReportOptions, SensitivityOptions), cli=(*STUDY_CLI, "brief"),
         file_kind="study", file_paths={"context": "contexts"})
def solve_cmd(inv: Invocation) -> None:
    """The minimum chip count N* = Np + Nd (and KV tier) meeting the SLAs at context S.

    The answer comes first (--brief: the answer alone), then the tables per KV tier, the TP
    degrees and the search path. With --config, a study file may list several context lengths:
    each is solved (several lengths on the command line: ctxplan sweep). --sensitivity also
    moves each chip / cluster figure and SLA (as ctxplan sensitivity)."""
    started = time.perf_counter()
    moves: SensitivityStudy | None = None
    with solving(inv, "solving") as cache:
        if inv.from_file():
            study = study_of(inv)
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
    wall = wall_time(inv, started)
    if study_result is not None and len(study_result.points) > 1:
        print_study(study_result, inv["as_json"], wall, brief=inv["brief"])
    else:
        print_solve(study_result.points[0] if study_result else result, inv["as_json"], wall,
                    moves, brief=inv["brief"])
    print_store_line(cache, inv["as_json"])


def print_solve(result: SolveResult, as_json: bool, wall: float | None,
                moves: SensitivityStudy | None = None, *, brief: bool = False) -> None:
    print_warnings(result.warnings)
    data = result.to_dict()
    if as_json:
        if moves is not None:
            data["sensitivity"] = moves.to_dict()
        emit_json(data, wall)
        return
    show(solve_screen(data, brief=brief))
    if moves is not None:
        show(sensitivity_screen(moves.to_dict()))
    if wall is not None:
        console.print(timing_line(wall))


def print_study(sweep: SweepResult, as_json: bool, wall: float | None, *,
                brief: bool = False) -> None:
    """A study with several context lengths: the sweep's JSON, or its table and answers."""
    print_warnings(sweep.warnings)
    if as_json:
        emit_json(sweep.to_dict(), wall)
        return
    show(study_screen(sweep.to_dict(), brief=brief))
    if wall is not None:
        console.print(timing_line(wall))
