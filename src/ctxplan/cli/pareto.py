"""``ctxplan pareto``: the decode shapes' tokens/s per chip against tokens/s per user."""

from __future__ import annotations

import time

from ctxplan.cli.app import api, app
from ctxplan.cli.options import Invocation, command, require
from ctxplan.cli.run import print_result, solving, wall_time
from ctxplan.config.options import SolveOptions
from ctxplan.report.progress import progress_of
from ctxplan.report.screens import pareto_screen

CLI = ("plot", "as_json", "timings", "store", "no_store")


@command(app, "pareto", subject=("model", "chip", "context"), groups=(SolveOptions,), cli=CLI)
def pareto_cmd(inv: Invocation) -> None:
    """The Pareto front of the decode pool: every searched shape (KV tier, TP, Nd, batch) by
    tokens/s per chip against tokens/s per user (1 / TPOT), the shapes no other beats on both.

    Each KV tier's prefill pool is sized as solve sizes it (for --ttft-max, or its capacity
    minimum), so each shape has the whole plan's tokens/s per chip too. Every simulation goes
    through the result store: a second call is instant."""
    started = time.perf_counter()
    plot = inv["plot"]
    if plot is not None:
        api.check_sweep_outputs(None, plot)
    require(inv, "model", "chip", "context")
    with solving(inv, "pareto") as cache:
        result = api.pareto(inv["model"], inv["chip"], inv["context"], cache=cache,
                            progress=progress_of(cache), **inv.of(SolveOptions))
    wall = wall_time(inv, started)
    if plot is not None:
        api.write_pareto_plot(result, plot)
    print_result(inv, result, pareto_screen, wall=wall, cache=cache, files=[("plot", plot)])
