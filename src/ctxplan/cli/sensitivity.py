"""``ctxplan sensitivity``: what the answer hinges on."""

from __future__ import annotations

import time

from ctxplan.cli.app import api, app
from ctxplan.cli.options import Invocation, command, require
from ctxplan.cli.run import print_result, solving, study_of, wall_time
from ctxplan.config.options import SensitivityStudyOptions
from ctxplan.report.screens import sensitivity_screen

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
    with solving(inv, "sensitivity") as cache:
        if inv.from_file():
            result = api.sensitivity_study(study_of(inv), cache=cache)
        else:
            require(inv, "model", "chip", "context")
            result = api.sensitivity(inv["model"], inv["chip"], inv["context"], cache=cache,
                                     **inv.of(SensitivityStudyOptions))
    wall = wall_time(inv, started)
    if plot is not None:
        api.write_tornado(result, plot)
    print_result(inv, result, sensitivity_screen, wall=wall, cache=cache, files=[("plot", plot)])
