"""The request-level discrete-event simulation: prefill instances, then decode instances.

This is a second simulator, a level above :mod:`ctxplan.sim`: its events are requests arriving,
prefills finishing and decode batches changing, and every duration in it is one the event-driven
simulator measured for a whole instance (a prefill's TTFT, a decode step of a given batch).
docs/serving.md says what it models and what it does not.

Prefill: ``x`` identical instances, one request at a time each (the spec's prefill is one
sequence), first come first served from one queue: a request starts on the instance that frees
first. Its service time is the simulated TTFT of its context length on the instance (prefill
plus the part of the KV handoff not hidden behind it).

Decode: ``y`` identical instances with continuous batching (Orca, OSDI '22; vLLM): a request
joins a running batch at the next step boundary and leaves after its last token. Every sequence
of a batch gains one token per step; the step takes the simulated TPOT of that batch
(:class:`StepTimes`). A request ready for decode goes to the instance with the fewest sequences
among those that can take it; if none can, it waits in one first-come-first-served queue, and
every instance takes the queue's head at a step boundary where it can (the first to reach one).
An instance can take a request while (1) the batch with it still fits the instance's memory (KV
capacity) and (2) its simulated step still meets the TPOT target (the batch limit); an empty
instance always takes one.

Between two changes of a batch every step lasts the same, so the simulation jumps from one
change to the next (a join, a departure) instead of stepping token by token: the result is the
same as stepping, at O(requests) events instead of O(requests x tokens).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class StepTimes(Protocol):
    """Decode step times and memory of one decode instance, as the simulator gives them."""

    def step_s(self, batch: int, context_length: int) -> float:
        """The simulated TPOT of ``batch`` sequences of ``context_length`` tokens."""
        ...

    def fits(self, batch: int, context_length: int) -> bool:
        """Whether that batch fits the instance's memory."""
        ...


@dataclass(frozen=True)
class PrefillRun:
    done_s: FloatArray        # per request: prefill (and unhidden handoff) finished
    busy_s: float             # summed service time over instances
    span_s: float             # first arrival to last finish


def run_prefill(arrival_s: FloatArray, service_s: FloatArray, instances: int) -> PrefillRun:
    """First come first served over ``instances`` identical servers (arrivals sorted)."""
    free = [(0.0, i) for i in range(instances)]   # (time the instance frees, index)
    heapq.heapify(free)
    done = np.empty(len(arrival_s), np.float64)
    for r, (t, s) in enumerate(zip(arrival_s.tolist(), service_s.tolist(), strict=True)):
        at, i = heapq.heappop(free)
        finish = (at if at > t else t) + s
        done[r] = finish
        heapq.heappush(free, (finish, i))
    span = float(done.max() - arrival_s[0]) if len(done) else 0.0
    return PrefillRun(done, float(service_s.sum()), span)


@dataclass(frozen=True)
class DecodeRun:
    done_s: FloatArray        # per request: its last token
    busy_s: float             # summed over instances: time with a non-empty batch
    span_s: float             # first request ready to last token
    mean_batch: float         # sequences per step, averaged over the steps run
    steps: int                # decode steps run over all instances


class _Decode:
    """The decode pool's state while :func:`run_decode` runs."""

    def __init__(self, instances: int, steps_per_request: int, tpot_limit_s: float,
                 grid: tuple[int, ...], times: StepTimes) -> None:
        self.n_steps = steps_per_request
        self.limit = tpot_limit_s
        self.grid = grid
        self.times = times
        n = instances
        self.t_boundary = [0.0] * n      # time of the instance's last step boundary
        self.counter = [0] * n           # steps the instance has run up to that boundary
        self.step = [0.0] * n            # duration of its current step
        self.leaving: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # (finish, r)
        self.count = [0] * n
        self.tokens = [0] * n            # summed context length of its batch
        self.version = [0] * n           # invalidates scheduled events after a change
        self.busy = 0.0
        self.steps = 0
        self.batch_steps = 0
        self._step_cache: dict[tuple[int, int], float] = {}
        self._fit_cache: dict[tuple[int, int], bool] = {}

    def shape(self, batch: int, tokens: int) -> tuple[int, int]:
        """The simulated point standing for a batch: its size and its mean context length
        rounded up to the grid (the same KV bytes read and attention work per rank, or more)."""
        mean = -(-tokens // batch)
        return batch, self.grid[bisect_left(self.grid, mean)]

    def step_of(self, batch: int, tokens: int) -> float:
        return _memo(self._step_cache, self.shape(batch, tokens), self.times.step_s)

    def fits(self, batch: int, tokens: int) -> bool:
        return _memo(self._fit_cache, self.shape(batch, tokens), self.times.fits)

    def admits(self, i: int, length: int) -> bool:
        if self.count[i] == 0:
            return True
        b, tokens = self.count[i] + 1, self.tokens[i] + length
        return self.fits(b, tokens) and self.step_of(b, tokens) <= self.limit

    def advance(self, i: int, k: int) -> None:
        """Run ``k`` steps of instance i's current batch."""
        if k <= 0:
            return
        span = k * self.step[i]
        self.counter[i] += k
        self.t_boundary[i] += span
        self.busy += span
        self.steps += k
        self.batch_steps += k * self.count[i]

    def next_step(self, i: int, now: float) -> int:
        """Steps of instance i from its last boundary to the first boundary at or after
        ``now`` (busy instance)."""
        return max(0, math.ceil((now - self.t_boundary[i]) / self.step[i] - 1e-9))

    def next_boundary(self, i: int, now: float) -> float:
        return self.t_boundary[i] + self.next_step(i, now) * self.step[i]

    def join(self, i: int, r: int, length: int, now: float) -> None:
        """Request r joins instance i at the first step boundary at or after ``now``."""
        if self.count[i] == 0:
            self.t_boundary[i] = now
        else:
            self.advance(i, self.next_step(i, now))
        heapq.heappush(self.leaving[i], (self.counter[i] + self.n_steps, r))
        self.count[i] += 1
        self.tokens[i] += length


def run_decode(ready_s: FloatArray, lengths: IntArray, instances: int, steps_per_request: int,
               tpot_limit_s: float, grid: tuple[int, ...], times: StepTimes) -> DecodeRun:
    """Continuous batching over ``instances`` decode instances (see the module docstring).

    ``ready_s[r]``: when request r's KV is in the decode pool (its first token is out);
    ``lengths[r]``: its context length; ``grid``: ascending context lengths at which batches
    are simulated (a batch's mean length is rounded up to it; it must reach the longest)."""
    n = len(ready_s)
    pool = _Decode(instances, steps_per_request, tpot_limit_s, grid, times)
    done = np.full(n, np.nan, np.float64)
    lens = lengths.tolist()
    # Events: (time, 0 = at a step boundary / 1 = a request ready, tie-breaker, kind, who,
    # version). Boundaries first at equal times, so a freed slot is there for the arrival.
    # Kinds: ARRIVAL (who = request), DEPARTURE (who = instance, version = the instance's),
    # OFFER (who = instance; version = the queue's: the head it was offered).
    events: list[tuple[float, int, int, int, int, int]] = [
        (t, 1, r, _ARRIVAL, r, 0) for r, t in enumerate(ready_s.tolist())]
    heapq.heapify(events)
    seq = n
    queue: deque[int] = deque()
    queue_version = 0

    def schedule(i: int) -> None:
        nonlocal seq
        pool.version[i] += 1
        if pool.count[i] == 0:
            return
        pool.step[i] = pool.step_of(pool.count[i], pool.tokens[i])
        first = pool.leaving[i][0][0]
        at = pool.t_boundary[i] + (first - pool.counter[i]) * pool.step[i]
        heapq.heappush(events, (at, 0, seq, _DEPARTURE, i, pool.version[i]))
        seq += 1

    def take_queued(i: int, now: float) -> None:
        """Instance i, at its step boundary ``now``, takes queued requests while it can; a
        new head of the queue is then offered to the others."""
        nonlocal queue_version
        taken = False
        while queue and pool.admits(i, lens[queue[0]]):
            r = queue.popleft()
            pool.join(i, r, lens[r], now)
            taken = True
        schedule(i)
        if taken:
            queue_version += 1
            offer(now)

    def offer(now: float) -> None:
        """The head of the queue goes to the busy instance that can take it whose next step
        boundary comes first (instances check the queue at every boundary; between two
        changes of the queue's head or of a batch, whether they can take it does not
        change, so only that first boundary matters)."""
        nonlocal seq
        if not queue:
            return
        length = lens[queue[0]]
        best: tuple[float, int] | None = None
        for j in range(instances):
            if pool.count[j] and pool.admits(j, length):
                at = pool.next_boundary(j, now)
                if best is None or at < best[0]:
                    best = (at, j)
        if best is not None:
            heapq.heappush(events, (best[0], 0, seq, _OFFER, best[1], queue_version))
            seq += 1

    while events:
        now, _, _, kind, who, version = heapq.heappop(events)
        if kind == _ARRIVAL:
            r = who
            if queue:
                queue.append(r)   # first come, first served: no overtaking the queue
                continue
            best = -1
            for i in range(instances):
                if (best < 0 or pool.count[i] < pool.count[best]) and pool.admits(i, lens[r]):
                    best = i
            if best < 0:
                queue.append(r)   # the new head: no instance can take it until one changes
                continue
            pool.join(best, r, lens[r], now)
            schedule(best)
            continue
        i = who
        if kind == _OFFER:
            if version != queue_version or not pool.count[i]:
                continue          # the head changed since (its own offer was made then)
            pool.advance(i, pool.next_step(i, now))
            take_queued(i, now)
            continue
        if version != pool.version[i]:
            continue   # the batch changed since this departure was scheduled
        pool.advance(i, pool.leaving[i][0][0] - pool.counter[i])
        while pool.leaving[i] and pool.leaving[i][0][0] == pool.counter[i]:
            _, r = heapq.heappop(pool.leaving[i])
            done[r] = pool.t_boundary[i]
            pool.count[i] -= 1
            pool.tokens[i] -= lens[r]
        take_queued(i, pool.t_boundary[i])
    span = float(np.max(done) - np.min(ready_s)) if n else 0.0
    mean_batch = pool.batch_steps / pool.steps if pool.steps else 0.0
    return DecodeRun(done, pool.busy, span, mean_batch, pool.steps)


_ARRIVAL, _DEPARTURE, _OFFER = 0, 1, 2


V = TypeVar("V")


def _memo(cache: dict[tuple[int, int], V], key: tuple[int, int],
          compute: Callable[[int, int], V]) -> V:
    """``compute(*key)``, asked once per key (a decode step's time, whether a batch fits)."""
    got = cache.get(key)
    if got is None:
        got = cache[key] = compute(*key)
    return got
