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
from itertools import pairwise

from ctxplan.evaluate import EvalConfig, check_memory
from ctxplan.solve.cache import EvalCache

GRID_STEPS_PER_DOUBLING = 8   # context grid for mixed batches: 2^(1/8) apart (< 9.1 % up)


@dataclass(frozen=True)
class InstanceShape:
    """One instance of a pool: CP ranks x TP chips, in ``pp`` pipeline stages, or (decode)
    ``dp`` DP attention ranks of CP x TP chips each."""

    cp: int
    tp: int
    pp: int = 1
    dp: int = 1

    @property
    def chips(self) -> int:
        return self.pp * self.dp * self.cp * self.tp


class SimulatedDecode:
    """Decode step times and memory of one decode instance (:class:`des.StepTimes`)."""

    def __init__(self, base: EvalConfig, cache: EvalCache) -> None:
        self.base = base          # the decode pool's configuration (cp, tp, KV tier, ...)
        self.cache = cache
        self._steps: dict[tuple[int, int], float] = {}
        self._fits: dict[tuple[int, int], bool] = {}

    def config(self, batch: int, context_length: int) -> EvalConfig:
        """The step of ``batch`` sequences; with DP attention at least one per DP rank (an
        engine's idle DP ranks step too, with dummy batches: the step of a batch below DP is
        that of DP sequences, which is never faster, so no TPOT target admits more than it
        should)."""
        return replace(self.base, batch=max(batch, self.base.dp), context_length=context_length)

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
    memory and (beyond one sequence) its simulated step meets ``tpot_limit_s``; at most
    ``bound``. Found by doubling from 2 and bisecting between the last batch that held and the
    first that did not: the batch a scan upward from 1 stops at, since memory per chip and the
    step never fall as the batch grows (tests/serve/test_shapes.py checks the steps so), in
    O(log b) simulations instead of b."""

    def holds(b: int) -> bool:
        return b <= bound and decode.fits(b, context_length) and \
            decode.step_s(b, context_length) <= tpot_limit_s

    if not holds(2):
        return 1
    ok, over = 2, 4
    while holds(over):
        ok, over = over, 2 * over
    while over - ok > 1:   # bisection (solve/wall.py's boundary, not imported: serve's own)
        mid = (ok + over) // 2
        ok, over = (mid, over) if holds(mid) else (ok, mid)
    return ok


def rate_bound(decode: SimulatedDecode, context_length: int, b_top: int) -> float:
    """At least the most sequences per second one decode instance steps at batches up to
    ``b_top`` of ``context_length``: over the batches simulated so far up to it (``b_top``
    among them), b_hi / step(b_lo) between consecutive ones and b_top / step(b_top); for a
    batch b between two, b / step(b) <= b_hi / step(b_lo), steps never falling as b grows."""
    known = sorted(b for (b, n), t in decode.evaluated.items()
                   if n == context_length and b <= b_top)
    return max([b_hi / decode.step_s(b_lo, context_length)
                for b_lo, b_hi in pairwise(known)]
               + [b_top / decode.step_s(b_top, context_length)])
