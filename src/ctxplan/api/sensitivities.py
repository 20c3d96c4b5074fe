"""What the answer hinges on: solves with one chip / cluster figure or SLA moved at a time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Unpack

from ctxplan.api.inputs import ChipLike, ModelLike
from ctxplan.api.search import eval_cache, solve_request
from ctxplan.config.options import (
    SensitivityOptions,
    SensitivityStudyOptions,
    complete,
    declared,
    with_options,
)
from ctxplan.config.units import parse_steps
from ctxplan.report.sensitivity import plot_tornado
from ctxplan.sensitivity import SensitivityStudy, resolve_figures, run_sensitivity
from ctxplan.solve import EvalCache
from ctxplan.sweep.store import StoreLike


@with_options(SensitivityStudyOptions)
def sensitivity(model: ModelLike, chip: ChipLike, context_length: int | str, *,
                cache: EvalCache | None = None, store: StoreLike = None,
                on_solve: Callable[[str, float], None] | None = None,
                **options: Unpack[SensitivityStudyOptions]) -> SensitivityStudy:
    """What the answer hinges on: N*, TTFT and TPOT when each chip and cluster figure, and each
    SLA, moves by each of ``steps`` ("-25%,-10%,+10%,+25%" by default), one at a time; the
    figures sorted by effect. ``figures`` names others than the default set (any figure
    ctxplan.hardware.perturb names, and sla.tpot_max / sla.ttft_max). ``on_solve(figure,
    factor)`` is called after each moved solve; ``cache`` / ``store`` as in :func:`solve`
    (docs/sensitivity.md)."""
    o = complete(SensitivityStudyOptions, options, "sensitivity")
    moves = {name: o.pop(name) for name in declared(SensitivityOptions)}
    request = solve_request(model, chip, context_length, **o)
    decode = (request.pool_chip("decode"), request.pool_cluster("decode")) \
        if request.mixed else None
    figures = resolve_figures(moves["figures"], request.chip, request.cluster,
                              request.sla.ttft_max_s is not None, decode)
    return run_sensitivity(request, figures, parse_steps(moves["steps"]),
                           cache=eval_cache(store, cache), on_solve=on_solve)


def write_tornado(result: SensitivityStudy, path: str | Path) -> None:
    """Draw the tornado plot of a sensitivity study (``--plot``)."""
    plot_tornado(result, path)
