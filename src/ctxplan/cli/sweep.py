"""``ctxplan sweep``: solve over several context lengths, the N*(S) curve."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ctxplan.cli.app import api, app
from ctxplan.cli.options import Invocation, command, require
from ctxplan.cli.run import print_result, store_cache, study_of, wall_time
from ctxplan.cli.solve import STUDY_CLI
from ctxplan.config.options import RunOptions, SolveOptions
from ctxplan.report.progress import progress_wanted, sweep_progress
from ctxplan.report.screens import sweep_screen

if TYPE_CHECKING:
    from ctxplan.api import SweepResult


@command(app, "sweep", subject=("model", "chip", "contexts"), groups=(SolveOptions, RunOptions),
         cli=("plot", "out", *STUDY_CLI), file_kind="study")
def sweep_cmd(inv: Invocation) -> None:
    """Solve every context length: the N*(S) curve, as a table, a CSV / JSON and a plot.

    --model a,b sweeps several models: one curve each, in one table and one plot.

    Points run in parallel (--backend, --workers); every evaluation is recorded in the result
    store as it finishes, so a sweep that is stopped resumes where it was."""
    started = time.perf_counter()
    run: Callable[..., SweepResult]
    if inv.from_file():
        study = study_of(inv)
        sizes = list(study.contexts)
        n_models = len(study.models)

        def run(**kw: Any) -> SweepResult:
            return api.solve_study(study, **kw)
    else:
        require(inv, "model", "chip", "contexts")
        sizes = api.context_lengths(inv["contexts"])
        models = api.resolve_models(inv["model"])
        n_models = len(models)

        def run(**kw: Any) -> SweepResult:
            return api.sweep(models, inv["chip"], sizes, **kw, **inv.of(SolveOptions))
    out, plot = inv["out"], inv["plot"]
    api.check_sweep_outputs(out, plot)
    cache = store_cache(inv)
    with sweep_progress(n_models * len(dict.fromkeys(sizes)),
                        enabled=progress_wanted(inv["as_json"])) as on_point:
        result = run(on_point=on_point, cache=cache, **inv.of(RunOptions))
    wall = wall_time(inv, started)
    api.write_sweep(result, out, plot)
    print_result(inv, result, sweep_screen, wall=wall, cache=cache,
                 files=[("results", out), ("plot", plot)])
