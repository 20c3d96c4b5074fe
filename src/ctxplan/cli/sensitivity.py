"""``ctxplan sensitivity``: what the answer hinges on."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ctxplan.cli.app import app, console, emit_json, lazy_module, print_warnings, timing_line
from ctxplan.cli.options import Invocation, command, require
from ctxplan.cli.solve import print_store_line
from ctxplan.config.options import SensitivityStudyOptions
from ctxplan.report.progress import progress_wanted, solve_progress
from ctxplan.report.sensitivity import sensitivity_notes, sensitivity_table

if TYPE_CHECKING:
    from ctxplan import api
else:
    api = lazy_module("ctxplan.api")  # loaded on first use: --help stays fast

CLI = ("plot", "as_json", "config", "set_", "timings", "store", "no_store")


@command(app, "sensitivity", subject=("model", "chip", "context"),
         groups=(SensitivityStudyOptions,), cli=CLI, file_kind="study",
         file_paths={"context": "contexts"})
def sensitivity_cmd(inv: Invocation) -> None:
    """N*, TTFT and TPOT when each chip and cluster figure and each SLA moves by a few steps
    (-25 %, -10 %, +10 %, +25 %): a table sorted by effect and a tornado plot (--plot)."""
    started = time.perf_counter()
    plot = inv["plot"]
    if plot is not None:
        api.check_sweep_outputs(None, plot)
    stored = api.eval_cache(api.store_choice(inv["store"], inv["no_store"]))
    with solve_progress(stored, "sensitivity", enabled=progress_wanted(inv["as_json"])) as cache:
        if inv.from_file():
            study = api.load_study(inv["config"], sets=inv["set_"] or (),
                                   flags=inv.typed_flags())
            result = api.sensitivity_study(study, cache=cache)
        else:
            require(inv, "model", "chip", "context")
            result = api.sensitivity(inv["model"], inv["chip"], inv["context"], cache=cache,
                                     **inv.of(SensitivityStudyOptions))
    wall = time.perf_counter() - started if inv["timings"] else None
    if plot is not None:
        api.write_tornado(result, plot)
    print_warnings(result.warnings)
    if inv["as_json"]:
        emit_json(result.to_dict(), wall)
        return
    console.print(sensitivity_table(result))
    for note in sensitivity_notes(result):
        console.print(note)
    if plot is not None:
        console.print(f"plot: {plot}")
    if wall is not None:
        console.print(timing_line(wall))
    print_store_line(cache, False)
