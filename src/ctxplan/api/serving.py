"""Serving at scale: the instances and chips that meet the SLAs at each arrival rate."""

from __future__ import annotations

from pathlib import Path
from typing import Unpack

from ctxplan.api.inputs import ChipLike, ModelLike
from ctxplan.api.search import eval_cache, solve_request
from ctxplan.config import values
from ctxplan.config.options import (
    CapacityOptions,
    ServingOptions,
    complete,
    declared,
    with_options,
)
from ctxplan.config.units import parse_context_mix, parse_rate_list
from ctxplan.errors import UserInputError
from ctxplan.report.serving import plot_capacity
from ctxplan.serve import CapacityRequest, CapacityResult, ContextMix
from ctxplan.serve import capacity as _capacity
from ctxplan.serve.capacity import check_batch
from ctxplan.solve import EvalCache
from ctxplan.sweep.store import StoreLike


@with_options(CapacityOptions)
def capacity_request(model: ModelLike, chip: ChipLike,
                     **options: Unpack[CapacityOptions]) -> CapacityRequest:
    """Build and check a capacity study's inputs (no simulation): the solve of the instance
    shapes at the longest context of the mix, and the traffic. ``rates`` takes "0.2/s",
    "0.05/s,0.2/s", or numbers (requests per second); ``context_mix`` "128K:0.7,1M:0.3", "128K",
    a list of such items or a mapping {length: share}. ``batch`` takes only "auto" (the
    default here): the shapes are ``solve --batch auto``'s, and the decode batches the
    request-level simulation's, by the same rule, step by step."""
    if "batch" in options:
        check_batch(options["batch"])
    o = complete(CapacityOptions, options, "capacity_request")
    o["batch"] = "auto"   # the shapes: solve --batch auto (docs/serving.md)
    serving = {name: o.pop(name) for name in declared(ServingOptions)}
    if serving["rates"] is None:
        raise UserInputError("rates", None, "give the arrival rate(s), e.g. --rate 0.2/s or "
                             "--rates 0.05/s,0.2/s,0.5/s", "required option missing")
    if serving["context_mix"] is None:
        raise UserInputError("contexts", None, "give the context lengths of the requests with "
                             "their shares, e.g. --context 128K:0.7,1M:0.3 (or --context "
                             "128K)", "required option missing")
    rates = tuple(parse_rate_list(serving["rates"], "rates"))
    mix = ContextMix.of(parse_context_mix(serving["context_mix"], "contexts"))
    shapes = solve_request(model, chip, mix.longest, **o)
    return CapacityRequest(solve=shapes, mix=mix, rates_per_s=rates,
                           output_tokens=values.checked("output_tokens",
                                                        serving["output_tokens"],
                                                        values.output_tokens),
                           percentile=serving["percentile"], requests=serving["requests"],
                           seed=serving["seed"]).validated()


def check_capacity_batch(batch: object) -> None:
    """Refuse a fixed ``batch`` for :func:`capacity` (UserInputError naming the fix): its decode
    batches follow the rule of ``solve --batch auto``, step by step (docs/serving.md)."""
    check_batch(batch)


@with_options(CapacityOptions)
def capacity(model: ModelLike, chip: ChipLike, *, cache: EvalCache | None = None,
             store: StoreLike = None, **options: Unpack[CapacityOptions]) -> CapacityResult:
    """Prefill and decode instances (xPyD) and chips that meet the SLAs at each arrival rate.

    The instance shapes are the solve at the mix's longest context; a request-level
    discrete-event simulation over one seeded arrival sequence (scaled by each rate) sizes the
    pools, with every TTFT and decode step taken from the simulator (docs/serving.md).
    ``cache`` / ``store`` as in :func:`solve`.
    """
    return _capacity(capacity_request(model, chip, **options), cache=eval_cache(store, cache))


def write_capacity_plot(result: CapacityResult, path: str | Path) -> None:
    """Draw chips against the arrival rate (``ctxplan capacity --plot``)."""
    plot_capacity(result, path)
