"""Sizing the two pools over a curve of arrival rates: the fewest prefill instances x, then the
fewest decode instances y, that meet the TTFT and TPOT targets at the percentile, at each rate
and at every lower rate of the curve (pools are sized for a peak: when the traffic is lighter
than the peak, the same pools must still meet the targets).

Why the lower rates are checked: the fewest decode instances meeting the TPOT target at one rate
is not monotone in the rate. A congested prefill pool releases requests to decode more evenly
than a lightly loaded one, and admission to a decode batch (memory, the batch limit) is first
come first served with a long request able to hold up the queue, so a pool that meets the
target at a rate can miss it at a lower one (docs/serving.md has a case). Sized at a peak rate,
such a pool would break its SLA when the traffic drops. So rates are taken in increasing order,
and the pools of rate k are the fewest that meet the targets at rates 1..k, at least those of
rate k - 1: chips never decrease along the curve.

x comes first: TTFT depends on the prefill pool alone. For a first-come-first-served queue of
identical servers with given service times, adding a server never delays any request (the
Kiefer-Wolfowitz workload recursion is monotone), and compressing the arrival times (a higher
rate) never hastens one, so "meets the TTFT target" is monotone in x and in the rate: galloping
(:func:`ctxplan.solve.search.search`) finds the fewest x at a rate exactly, and that x meets the
target at every lower rate. Without a TTFT target x is the stability minimum, the fewest
instances that keep up with the arrivals: x > rate x mean service time. Then y, with the
requests as that prefill pool releases them: the fewest decode instances whose attained TPOT
percentile meets the target at this rate (galloping from the decode pool's stability minimum,
checking its answer's neighbours and falling back to a scan where the percentiles are not
monotone), raised one at a time until the target holds at every lower rate of the curve too.

Percentiles are nearest-rank over the measured requests: the first and last
``WARMUP_FRACTION`` of the sequence are left out (the pools start empty and drain at the end).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxplan.serve.des import StepTimes, run_decode, run_prefill
from ctxplan.serve.result import CapacityPoint, PoolProbe
from ctxplan.solve.search import search

WARMUP_FRACTION = 0.1   # left out at each end of the request sequence

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Targets:
    ttft_max_s: float | None
    tpot_max_s: float
    percentile: float          # in (0, 100)


@dataclass(frozen=True)
class Workload:
    """One rate's requests and the instance figures the simulations use."""

    rate_per_s: float
    arrival_s: FloatArray                    # sorted
    lengths: npt.NDArray[np.int64]           # context length per request
    service_s: FloatArray                    # prefill service time per request
    steps_per_request: int                   # decode steps: output tokens - 1
    grid: tuple[int, ...]                    # decode batch context grid
    prefill_stable_min: int
    decode_stable_min: int
    # Requests one prefill instance serves at once: 1, or its DP ranks (a DP prefill instance
    # is that many FCFS servers, each with the service time of the instance prefilling one
    # request per DP rank)
    prefill_servers: int = 1


def measured(n: int) -> slice:
    """The requests whose latencies count (the middle of the sequence)."""
    cut = int(n * WARMUP_FRACTION)
    return slice(cut, n - cut)


def nearest_rank(values: FloatArray, percentile: float) -> float:
    """The smallest value with at least ``percentile`` % of the values at or below it."""
    ordered = np.sort(values)
    k = max(1, math.ceil(percentile / 100.0 * len(ordered)))
    return float(ordered[k - 1])


@dataclass(frozen=True)
class _Prefilled:
    attained_s: float          # TTFT percentile
    ready_s: FloatArray        # when each request's KV is in the decode pool
    utilisation: float


@dataclass(frozen=True)
class _Decoded:
    attained_s: float          # TPOT percentile
    utilisation: float
    mean_batch: float


class _Runs:
    """Request-level simulations of one curve, each run once."""

    def __init__(self, decode: StepTimes, targets: Targets) -> None:
        self.decode = decode
        self.targets = targets
        self._prefill: dict[tuple[float, int], _Prefilled] = {}
        self._decode: dict[tuple[float, int, int], _Decoded] = {}

    def prefill(self, work: Workload, x: int) -> _Prefilled:
        key = (work.rate_per_s, x)
        got = self._prefill.get(key)
        if got is None:
            servers = x * work.prefill_servers
            run = run_prefill(work.arrival_s, work.service_s, servers)
            ttft = (run.done_s - work.arrival_s)[measured(len(work.arrival_s))]
            got = self._prefill[key] = _Prefilled(
                nearest_rank(ttft, self.targets.percentile), run.done_s,
                run.busy_s / (servers * run.span_s) if run.span_s else 0.0)
        return got

    def decoded(self, work: Workload, x: int, y: int) -> _Decoded:
        key = (work.rate_per_s, x, y)
        got = self._decode.get(key)
        if got is None:
            ready = self.prefill(work, x).ready_s
            run = run_decode(ready, work.lengths, y, work.steps_per_request,
                             self.targets.tpot_max_s, work.grid, self.decode)
            tpot = ((run.done_s - ready) / work.steps_per_request)[measured(len(ready))]
            got = self._decode[key] = _Decoded(
                nearest_rank(tpot, self.targets.percentile),
                run.busy_s / (y * run.span_s) if run.span_s else 0.0, run.mean_batch)
        return got


def fewest_prefill(work: Workload, targets: Targets) -> int | None:
    """The fewest prefill instances meeting the TTFT target at ``work``'s rate with its service
    times, by the search :func:`size_curve` makes (the stability minimum without a target);
    None when one instance per request does not meet it (no more can)."""
    x_lo = work.prefill_stable_min
    limit = targets.ttft_max_s
    if limit is None:
        return x_lo
    n = len(work.arrival_s)

    def attained(x: int) -> float:
        run = run_prefill(work.arrival_s, work.service_s, x * work.prefill_servers)
        return nearest_rank((run.done_s - work.arrival_s)[measured(n)], targets.percentile)

    return search(range(x_lo, max(x_lo, n) + 1), attained, limit, "galloping").answer


def size_curve(works: Sequence[Workload], decode: StepTimes, targets: Targets,
               prefill_chips: int, decode_chips: int) -> list[CapacityPoint]:
    """The pools for each workload, rates in increasing order (see the module docstring)."""
    rates = [w.rate_per_s for w in works]
    if rates != sorted(set(rates)):
        raise ValueError("workloads must come in strictly increasing order of rate")
    runs = _Runs(decode, targets)
    points: list[CapacityPoint] = []
    x_floor = y_floor = 0
    for k in range(len(works)):
        point = _size_one(works[:k + 1], runs, targets, x_floor, y_floor, prefill_chips,
                          decode_chips)
        points.append(point)
        if not point.feasible:
            # Every higher rate needs at least as much: say so rather than search again.
            for later in works[k + 1:]:
                points.append(_infeasible(later, prefill_chips, decode_chips, (),
                                          f"a lower rate, {point.rate_per_s:g}/s, has no pools "
                                          "meeting the targets"))
            break
        x_floor = point.prefill_instances or 0
        y_floor = point.decode_instances or 0
    return points


def _size_one(curve: Sequence[Workload], runs: _Runs, targets: Targets, x_floor: int,
              y_floor: int, prefill_chips: int, decode_chips: int) -> CapacityPoint:
    work = curve[-1]
    n = len(work.arrival_s)
    probes: list[PoolProbe] = []
    rate = work.rate_per_s

    # x: monotone in x and in the rate, so the fewest at this rate meets every lower one.
    x_lo = work.prefill_stable_min
    bound = max(x_lo, x_floor, n)   # with one instance per request nobody queues
    if targets.ttft_max_s is None:
        x_min: int | None = x_lo
        runs.prefill(work, x_lo)
        probes.append(PoolProbe("prefill", rate, x_lo, runs.prefill(work, x_lo).attained_s,
                                True, "bound"))
    else:
        limit = targets.ttft_max_s
        outcome = search(range(x_lo, bound + 1), lambda x: runs.prefill(work, x).attained_s,
                         limit, "galloping")
        probes += [PoolProbe("prefill", rate, p.n, p.latency_s or 0.0, p.passed, p.step)
                   for p in outcome.probes]
        x_min = outcome.answer
    if x_min is None:
        best = min(runs.prefill(work, p.instances).attained_s for p in probes)
        return _infeasible(work, prefill_chips, decode_chips, tuple(probes),
                           f"no prefill pool up to {bound} instances meets TTFT <= "
                           f"{targets.ttft_max_s:g} s at p{targets.percentile:g}",
                           ttft_percentile_s=best)
    x = max(x_min, x_floor)

    # y: the fewest at this rate, then raised until every lower rate of the curve meets it.
    y_lo = work.decode_stable_min
    y_bound = max(y_lo, y_floor, n)
    outcome = search(range(y_lo, y_bound + 1), lambda y: runs.decoded(work, x, y).attained_s,
                     targets.tpot_max_s, "galloping")
    probes += [PoolProbe("decode", rate, p.n, p.latency_s or 0.0, p.passed, p.step)
               for p in outcome.probes]
    y_min = outcome.answer
    if y_min is None:
        return _infeasible(work, prefill_chips, decode_chips, tuple(probes),
                           f"no decode pool up to {y_bound} instances meets TPOT <= "
                           f"{targets.tpot_max_s:g} s at p{targets.percentile:g}",
                           prefill_instances=x, prefill_min_at_rate=x_min)
    y = max(y_min, y_floor)
    raised_by: float | None = None
    while True:
        missed = None
        for lower in curve:
            got = runs.decoded(lower, x, y).attained_s
            ok = got <= targets.tpot_max_s
            if lower is not work or y != y_min:
                probes.append(PoolProbe("decode", lower.rate_per_s, y, got, ok, "lower rate"))
            if not ok:
                missed = lower
                break
        if missed is None:
            break
        if y >= y_bound:
            return _infeasible(work, prefill_chips, decode_chips, tuple(probes),
                               f"no decode pool up to {y_bound} instances meets TPOT <= "
                               f"{targets.tpot_max_s:g} s at p{targets.percentile:g} at "
                               f"{missed.rate_per_s:g}/s and every rate up to {rate:g}/s",
                               prefill_instances=x, prefill_min_at_rate=x_min)
        raised_by = missed.rate_per_s
        y += 1
    pre, dec = runs.prefill(work, x), runs.decoded(work, x, y)
    return CapacityPoint(
        rate_per_s=rate, prefill_instances=x, decode_instances=y,
        prefill_chips_per_instance=prefill_chips, decode_chips_per_instance=decode_chips,
        ttft_percentile_s=pre.attained_s, tpot_percentile_s=dec.attained_s,
        prefill_utilisation=pre.utilisation, decode_utilisation=dec.utilisation,
        decode_mean_batch=dec.mean_batch, prefill_stable_min=work.prefill_stable_min,
        decode_stable_min=work.decode_stable_min, prefill_min_at_rate=x_min,
        decode_min_at_rate=y_min, decode_raised_by_rate_per_s=raised_by,
        probes=tuple(probes))


def _infeasible(work: Workload, prefill_chips: int, decode_chips: int,
                probes: tuple[PoolProbe, ...], reason: str, **known: Any) -> CapacityPoint:
    fields: dict[str, Any] = dict(
        prefill_instances=None, decode_instances=None, ttft_percentile_s=None,
        tpot_percentile_s=None, prefill_utilisation=None, decode_utilisation=None,
        decode_mean_batch=None, prefill_min_at_rate=None, decode_min_at_rate=None,
        decode_raised_by_rate_per_s=None)
    fields.update(known)
    return CapacityPoint(
        rate_per_s=work.rate_per_s, prefill_chips_per_instance=prefill_chips,
        decode_chips_per_instance=decode_chips, prefill_stable_min=work.prefill_stable_min,
        decode_stable_min=work.decode_stable_min, probes=probes, reason=reason, **fields)


def prefill_stable_min(rate_per_s: float, mean_service_s: float, servers: int = 1) -> int:
    """The fewest prefill instances that keep up: x servers > rate x mean service time, an
    instance ``servers`` of them (its DP ranks)."""
    return -(-(math.floor(rate_per_s * mean_service_s) + 1) // servers)


def decode_stable_min(rate_per_s: float, max_throughput_per_s: float) -> int:
    """The fewest decode instances that keep up: y > rate / (requests per second one instance
    finishes at its largest batch)."""
    return math.floor(rate_per_s / max_throughput_per_s) + 1
