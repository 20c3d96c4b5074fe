"""The two instance models, from the solved shapes, with every latency from the simulator.

A prefill instance is the solver's prefill pool (Np ranks x tp_p chips); its service time for a
request of context length S is the simulated TTFT of that pool at S (with the unhidden part of
the KV handoff to a decode instance when the handoff is simulated). A decode instance is the
solver's decode pool (Nd ranks x tp_d chips); the step time of a batch is the simulated TPOT of
that pool at that batch and context length, asked for only when the request-level simulation
needs it and kept (in this object, and in the evaluation cache and the result store under it).
Memory comes from the same per-chip accounting the solver's capacity wall uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ctxplan.evaluate import EvalConfig, check_memory
from ctxplan.solve.cache import EvalCache

GRID_STEPS_PER_DOUBLING = 8   # context grid for mixed batches: 2^(1/8) apart (< 9.1 % up)


@dataclass(frozen=True)
class InstanceShape:
    """One instance of a pool: CP ranks x TP chips, in ``pp`` pipeline stages."""

    cp: int
    tp: int
    pp: int = 1

    @property
    def chips(self) -> int:
        return self.pp * self.cp * self.tp


class SimulatedDecode:
    """Decode step times and memory of one decode instance (:class:`des.StepTimes`)."""

    def __init__(self, base: EvalConfig, cache: EvalCache) -> None:
        self.base = base          # the decode pool's configuration (cp, tp, KV tier, ...)
        self.cache = cache
        self._steps: dict[tuple[int, int], float] = {}
        self._fits: dict[tuple[int, int], bool] = {}

    def config(self, batch: int, context_length: int) -> EvalConfig:
        return replace(self.base, batch=batch, context_length=context_length)

    def step_s(self, batch: int, context_length: int) -> float:
        """The simulated step; infinite when the batch passes the capacity wall (``fits``) but
        its simulated peak does not fit, so that no TPOT target admits it."""
        key = (batch, context_length)
        got = self._steps.get(key)
        if got is None:
            result, _ = self.cache.evaluate(self.config(batch, context_length))
            got = self._steps[key] = (math.inf if result.latency_s is None
                                      else result.latency_s)
        return got

    def fits(self, batch: int, context_length: int) -> bool:
        key = (batch, context_length)
        got = self._fits.get(key)
        if got is None:
            got = self._fits[key] = check_memory(self.config(batch, context_length)).fits
        return got

    @property
    def evaluated(self) -> dict[tuple[int, int], float]:
        """The step times asked for so far, by (batch, context length)."""
        return dict(sorted((k, t) for k, t in self._steps.items() if t < math.inf))


def context_grid(lengths: tuple[int, ...]) -> tuple[int, ...]:
    """The context lengths at which mixed batches are simulated: the mix's own lengths and
    points 2^(1/8) apart between the shortest and the longest (a batch's mean length is
    rounded up to the next one: its KV reads are overstated by less than 9.1 %)."""
    lo, hi = min(lengths), max(lengths)
    points = set(lengths)
    x = float(lo)
    ratio = 2.0 ** (1.0 / GRID_STEPS_PER_DOUBLING)
    while x < hi:
        points.add(min(hi, round(x)))
        x *= ratio
    return tuple(sorted(points))


def max_batch(decode: SimulatedDecode, context_length: int, tpot_limit_s: float,
              bound: int) -> int:
    """The largest batch of ``context_length`` sequences a decode instance takes: it fits
    memory and (beyond one sequence) its simulated step meets ``tpot_limit_s``. Scans upward
    from 1, as the request-level simulation admits one request at a time."""
    b = 1
    while b < bound and decode.fits(b + 1, context_length) \
            and decode.step_s(b + 1, context_length) <= tpot_limit_s:
        b += 1
    return b
