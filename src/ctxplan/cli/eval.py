"""``ctxplan eval``: simulate one configuration."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ctxplan.cli.app import app, console, emit_json, lazy_module, print_warnings
from ctxplan.cli.options import Invocation, command, require
from ctxplan.config.options import EvalOptions
from ctxplan.report.eval import eval_table

if TYPE_CHECKING:
    from ctxplan import api
else:
    api = lazy_module("ctxplan.api")  # loaded on first use: --help stays fast

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
    wall = time.perf_counter() - started if inv["timings"] else None
    print_warnings(result.warnings)
    if inv["as_json"]:
        emit_json(result.to_dict(), wall)
    else:
        console.print(eval_table(result, trace=trace, wall_s=wall))
