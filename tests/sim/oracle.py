"""Two independent SimPy implementations of the kernel's scheduling policy, used as oracles.

Neither shares code or data structures with :mod:`ctxplan.sim.kernel`; both take the graph as
plain per-task sequences (duration, tail, resource ids, dependency ids).

``simulate`` (exact oracle)
    Written for obviousness, not speed. Releases and completions are SimPy events scheduled with
    priority URGENT; whenever one is applied, a single *dispatch* event is scheduled with priority
    NORMAL at delay 0. SimPy orders its queue by (time, priority, insertion), so every event at
    time t is applied before the dispatch at t: exactly the kernel's rounds. The dispatch walks
    *all* ready-but-not-started tasks in id order and starts each whose resources are all free
    (all-at-once, work-conserving, no reservation). A zero-duration task started by a dispatch
    posts its release at the same t with URGENT priority; it lands after the dispatch that is
    running, so it is applied in a new round at the same t, and that round gets its own dispatch.

``simulate_idiomatic`` (the textbook SimPy model)
    One process per task: wait for ``AllOf(deps)``, ``PriorityResource.request(priority=id)``,
    hold for the duration, release, wait for the tail. Valid only when every task holds at most
    one resource. It agrees with the kernel only when no ties occur: SimPy hands a released
    resource to the head of its queue *immediately*, before a lower-id task that becomes ready
    at the same instant has even requested it, while the kernel's round applies all events at
    t first and then lets every contender compete by id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import simpy
from simpy.events import NORMAL, URGENT  # the same objects as simpy.core.NORMAL/URGENT


@dataclass(frozen=True)
class OracleResult:
    makespan_ns: int
    start_ns: list[int]
    end_ns: list[int]


def _successors(n: int, deps: Sequence[Sequence[int]]) -> list[list[int]]:
    succ: list[list[int]] = [[] for _ in range(n)]
    for t, ds in enumerate(deps):
        for d in ds:
            succ[d].append(t)
    return succ


def simulate(
    n_resources: int,
    duration: Sequence[int],
    tail: Sequence[int],
    resources: Sequence[Sequence[int]],
    deps: Sequence[Sequence[int]],
) -> OracleResult:
    """Exact oracle for the kernel (any number of resources per task, ties, zero durations)."""
    env = simpy.Environment()
    n = len(duration)
    succ = _successors(n, deps)
    pending = [len(ds) for ds in deps]
    free = [True] * n_resources
    waiting = {t for t in range(n) if pending[t] == 0}  # ready, not started
    start = [-1] * n
    end = [-1] * n
    dispatch_posted = False

    def post(delay: int, priority: Any, fn: Callable[[int], None], task: int) -> None:
        ev = simpy.Event(env)
        ev._ok = True  # a pre-triggered event, like Timeout, but with our own priority
        ev._value = task
        ev.callbacks.append(lambda e: fn(e.value))
        env.schedule(ev, priority=priority, delay=delay)

    def want_dispatch() -> None:
        nonlocal dispatch_posted
        if not dispatch_posted:
            dispatch_posted = True
            post(0, NORMAL, dispatch, -1)

    def dispatch(_: int) -> None:
        nonlocal dispatch_posted
        dispatch_posted = False
        for t in sorted(waiting):
            if all(free[r] for r in resources[t]):
                waiting.discard(t)
                for r in resources[t]:
                    free[r] = False
                start[t] = int(env.now)
                post(duration[t], URGENT, release, t)

    def release(t: int) -> None:
        for r in resources[t]:
            free[r] = True
        want_dispatch()
        if tail[t]:
            post(tail[t], URGENT, complete, t)
        else:
            complete(t)

    def complete(t: int) -> None:
        end[t] = int(env.now)
        for s in succ[t]:
            pending[s] -= 1
            if pending[s] == 0:
                waiting.add(s)
        want_dispatch()

    want_dispatch()
    env.run()
    if min(end, default=0) < 0:
        raise RuntimeError("oracle: some tasks never completed (cycle or missing dependency?)")
    return OracleResult(max(end, default=0), start, end)


def simulate_idiomatic(
    n_resources: int,
    duration: Sequence[int],
    tail: Sequence[int],
    resources: Sequence[Sequence[int]],
    deps: Sequence[Sequence[int]],
) -> OracleResult:
    """Plain SimPy processes + PriorityResource; every task holds at most one resource."""
    if any(len(rs) > 1 for rs in resources):
        raise ValueError("simulate_idiomatic: a task holds more than one resource")
    env = simpy.Environment()
    n = len(duration)
    res = [simpy.PriorityResource(env, capacity=1) for _ in range(n_resources)]
    done = [env.event() for _ in range(n)]
    start = [-1] * n
    end = [-1] * n

    def task(t: int) -> Any:
        yield simpy.AllOf(env, [done[d] for d in deps[t]])
        if resources[t]:
            with res[resources[t][0]].request(priority=t) as req:
                yield req
                start[t] = int(env.now)
                yield env.timeout(duration[t])
        else:
            start[t] = int(env.now)
            yield env.timeout(duration[t])
        yield env.timeout(tail[t])
        end[t] = int(env.now)
        done[t].succeed()

    for t in range(n):
        env.process(task(t))
    env.run()
    if min(end, default=0) < 0:
        raise RuntimeError("oracle: some tasks never completed (cycle or missing dependency?)")
    return OracleResult(max(end, default=0), start, end)
