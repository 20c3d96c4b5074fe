"""``ctxplan capacity``: prefill and decode instances and chips for an arrival rate."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ctxplan.cli.app import app, console, emit_json, lazy_module, print_warnings, timing_line
from ctxplan.cli.options import Invocation, command, require
from ctxplan.cli.solve import print_store_line
from ctxplan.config.options import CapacityOptions
from ctxplan.errors import UserInputError
from ctxplan.report.progress import progress_wanted, solve_progress
from ctxplan.report.serving import capacity_header, capacity_notes, capacity_table

if TYPE_CHECKING:
    from ctxplan import api
else:
    api = lazy_module("ctxplan.api")  # loaded on first use: --help stays fast

CLI = ("plot", "as_json", "config", "set_", "timings", "store", "no_store")


@command(app, "capacity", subject=("model", "chip"), groups=(CapacityOptions,), cli=CLI,
         file_kind="study")
def capacity_cmd(inv: Invocation) -> None:
    """Prefill and decode instances (xPyD) and chips that meet the SLAs at an arrival rate.

    A request-level simulation (seeded Poisson arrivals, queueing at the prefill instances,
    continuous batching in the decode instances) over instance latencies from the simulator."""
    started = time.perf_counter()
    plot = inv["plot"]
    if plot is not None:
        api.check_sweep_outputs(None, plot)
    options = inv.of(CapacityOptions)
    source = inv.ctx.get_parameter_source("batch")
    if source is not None and source.name == "COMMANDLINE":
        api.check_capacity_batch(options["batch"])   # with --config too (batch: 1 there is
                                                      # read as the default)
    else:
        del options["batch"]   # not given: capacity's batches are auto
    stored = api.eval_cache(api.store_choice(inv["store"], inv["no_store"]))
    with solve_progress(stored, "capacity", enabled=progress_wanted(inv["as_json"])) as cache:
        if inv.from_file():
            if inv["config"] is None:
                raise UserInputError("--set", inv["set_"], "give a study file with --config "
                                     "FILE to change with --set, or give the values as flags "
                                     "(--rates, --contexts, ...)", "nothing to set")
            study = api.load_study(inv["config"], sets=inv["set_"] or (),
                                   flags=inv.typed_flags())
            result = api.capacity_study(study, cache=cache)
        else:
            require(inv, "model", "chip")
            result = api.capacity(inv["model"], inv["chip"], cache=cache, **options)
    wall = time.perf_counter() - started if inv["timings"] else None
    if plot is not None:
        api.write_capacity_plot(result, plot)
    print_warnings(result.warnings)
    if inv["as_json"]:
        emit_json(result.to_dict(), wall)
        return
    console.print(capacity_header(result))
    console.print(capacity_table(result))
    for note in capacity_notes(result):
        console.print(note)
    if plot is not None:
        console.print(f"plot: {plot}")
    if wall is not None:
        console.print(timing_line(wall))
    print_store_line(cache, False)
