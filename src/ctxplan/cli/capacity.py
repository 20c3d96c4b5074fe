"""``ctxplan capacity``: prefill and decode instances and chips for an arrival rate."""

from __future__ import annotations

import time

from ctxplan.cli.app import api, app
from ctxplan.cli.options import Invocation, command, require
from ctxplan.cli.run import print_result, solving, study_of, wall_time
from ctxplan.config.options import CapacityOptions
from ctxplan.errors import UserInputError
from ctxplan.report.screens import capacity_screen

CLI = ("plot", "as_json", "config", "set_", "timings", "store", "no_store")
# A search's options capacity takes one value of (--batch auto, --tps-reading per-seq): not
# listed in --help; another value is refused with the reason (serve/capacity.py).
HIDDEN = ("batch", "tps_reading")


@command(app, "capacity", subject=("model", "chip"), groups=(CapacityOptions,), cli=CLI,
         file_kind="study", hidden=HIDDEN)
def capacity_cmd(inv: Invocation) -> None:
    """Prefill and decode instances (xPyD) and chips that meet the SLAs at an arrival rate.

    A request-level simulation (seeded Poisson arrivals, queueing at the prefill instances,
    continuous batching in the decode instances) over instance latencies from the simulator."""
    started = time.perf_counter()
    plot = inv["plot"]
    if plot is not None:
        api.check_sweep_outputs(None, plot)
    options = inv.of(CapacityOptions)   # --batch and --tps-reading only when typed: hidden
    if inv.typed("batch"):
        api.check_capacity_batch(options["batch"])   # with --config too (batch: 1 there is
                                                      # read as the default)
    with solving(inv, "capacity") as cache:
        if inv.from_file():
            if inv["config"] is None:
                raise UserInputError("--set", inv["set_"], "give a study file with --config "
                                     "FILE to change with --set, or give the values as flags "
                                     "(--rates, --context, ...)", "nothing to set")
            result = api.capacity_study(study_of(inv), cache=cache)
        else:
            require(inv, "model", "chip")
            result = api.capacity(inv["model"], inv["chip"], cache=cache, **options)
    wall = wall_time(inv, started)
    if plot is not None:
        api.write_capacity_plot(result, plot)
    print_result(inv, result, capacity_screen, wall=wall, cache=cache, files=[("plot", plot)])
