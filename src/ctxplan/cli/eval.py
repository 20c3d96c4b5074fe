"""``ctxplan eval``: simulate one configuration."""

from __future__ import annotations

import time

from ctxplan.cli.app import api, app, emit_json, print_warnings, show
from ctxplan.cli.options import Invocation, command, require
from ctxplan.cli.run import wall_time
from ctxplan.config.options import EvalOptions
from ctxplan.report.screens import eval_screen

SUBJECT = ("model", "chip", "context", "phase", "cp")


@command(app, "eval", subject=SUBJECT, groups=(EvalOptions,), file_kind="point",
         cli=("as_json", "trace", "config", "set_", "timings", "store", "no_store"))
def eval_cmd(inv: Invocation) -> None:
    """Simulate one configuration: TTFT or TPOT, per-chip memory and CP bytes."""
    started = time.perf_counter()
    trace = inv["trace"]
    if trace is not None:
        api.check_output(trace, "trace")
    store = api.open_store(api.store_choice(inv["store"], inv["no_store"]))
    if inv.from_file():
        point = api.load_point(inv["config"], sets=inv["set_"] or (), flags=inv.typed_flags())
        result = api.evaluate_point(point, trace_path=trace, store=store)
    else:
        require(inv, *SUBJECT)
        result = api.evaluate(*(inv[name] for name in SUBJECT), trace_path=trace, store=store,
                              **inv.of(EvalOptions))
    wall = wall_time(inv, started)
    print_warnings(result.warnings)
    if inv["as_json"]:
        emit_json(result.to_dict(), wall)
    else:
        show(eval_screen(result.to_dict(), trace=trace, wall_s=wall))
