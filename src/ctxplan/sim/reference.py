"""The reference kernel: the simulation algorithm in plain Python, kept for the tests.

It is the algorithm the compiled kernel (:mod:`ctxplan.sim.compiled`) implements, written for
reading rather than speed (Python lists and ``heapq``), and the tests check the two against each
other and against a SimPy oracle, schedule for schedule. The semantics are those of
:mod:`ctxplan.sim.graph`'s docstring.
"""

from __future__ import annotations

import heapq
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ctxplan.sim.result import SimulationError


class FrozenGraph(Protocol):
    """What the kernel reads of a frozen :class:`ctxplan.sim.graph.TaskGraph` (named here, not
    imported: the graph module runs this kernel, so it cannot be imported back)."""

    @property
    def n_tasks(self) -> int: ...
    @property
    def n_resources(self) -> int: ...
    @property
    def duration_ns(self) -> npt.NDArray[np.int64]: ...
    @property
    def tail_ns(self) -> npt.NDArray[np.int32]: ...
    @property
    def nbytes(self) -> npt.NDArray[np.int64]: ...
    @property
    def res_ptr(self) -> npt.NDArray[np.int32]: ...
    @property
    def res_idx(self) -> npt.NDArray[np.int32]: ...

    def dependencies(self) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]: ...
    def name_of(self, t: int) -> str: ...

# Event kinds in the heap. RELEASE frees the task's resources; COMPLETE finishes it. A task with
# no tail posts a single RELEASE_COMPLETE event (the common case: one heap operation, not two).
_RELEASE = 0
_COMPLETE = 1
_RELEASE_COMPLETE = 2


def _queue_head(queue: list[int], waiting_on: list[int], resource: int) -> int:
    """Lowest live task id in a resource's wait queue (dropping stale entries), or -1."""
    while queue and waiting_on[queue[0]] != resource:
        heapq.heappop(queue)
    return queue[0] if queue else -1


def run_reference(g: FrozenGraph, limit: int) -> tuple:
    """Simulate a frozen graph. Returns (status, end, busy, res_bytes, events, done, now,
    binder)
    like the compiled kernel (status 1: the event limit was reached)."""
    n = g.n_tasks
    n_res = g.n_resources
    duration = g.duration_ns.tolist()
    tail = g.tail_ns.tolist()
    nbytes = g.nbytes.tolist()
    res_ptr = g.res_ptr.tolist()
    res_idx = g.res_idx.tolist()
    task_res = [tuple(res_idx[res_ptr[t]:res_ptr[t + 1]]) for t in range(n)]
    dep_ptr_a, dep_idx_a = g.dependencies()
    dep_ptr = dep_ptr_a.tolist()
    dep_idx = dep_idx_a.tolist()

    # Successor lists and pending-dependency counts.
    succ: list[list[int]] = [[] for _ in range(n)]
    pending = [0] * n
    for t in range(n):
        deps = dep_idx[dep_ptr[t]:dep_ptr[t + 1]]
        for d in deps:
            if not 0 <= d < n:
                raise SimulationError(
                    f"task {g.name_of(t)!r} (id {t}) depends on task id {d}, which "
                    "does not exist: it can never start"
                )
            succ[d].append(t)
        pending[t] = len(deps)

    start = [-1] * n
    end = [-1] * n
    busy_ns = [0] * n_res
    res_bytes = [0] * n_res
    owner = [-1] * n_res  # task holding each resource, -1 if free
    # Per resource, a min-heap of the ids of ready tasks blocked on it. Entries are deleted
    # lazily: an entry is live only while waiting_on[task] still names that resource.
    waitq: list[list[int]] = [[] for _ in range(n_res)]
    waiting_on = [-1] * n
    # What each task's start waited for last (the critical path follows these back): its
    # latest-completing dependency (ties: the higher id), or -(id + 2) of the task that
    # released one of its resources just as it started (ties: the higher id); -1: none.
    binder = [-1] * n
    rel_task = [-1] * n_res   # per resource: its last releaser, and when
    rel_time = [-1] * n_res
    heap: list[tuple[int, int, int, int]] = []  # (time, seq, kind, task)
    seq = 0
    events = 0
    done = 0
    push = heapq.heappush
    pop = heapq.heappop

    ready = [t for t in range(n) if pending[t] == 0]
    freed: list[int] = []
    now = 0

    def result(status: int) -> tuple:
        return (status, np.array(end, np.int64),
                np.array(busy_ns, np.int64), np.array(res_bytes, np.int64), events, done, now,
                np.array(binder, np.int32))

    while True:
        # ---- dispatch: newly ready tasks and heads of freed resources' queues, by id ----
        if ready or freed:
            cand = ready
            heapq.heapify(cand)
            for r in freed:
                if owner[r] < 0:
                    h = _queue_head(waitq[r], waiting_on, r)
                    if h >= 0:
                        push(cand, h)
            ready = []
            freed = []
            while cand:
                t = pop(cand)
                if start[t] >= 0:
                    continue  # pushed twice (e.g. head of two freed queues); already running
                blocked = -1
                for r in task_res[t]:
                    if owner[r] >= 0:
                        blocked = r
                        break
                was = waiting_on[t]
                if blocked < 0:
                    # Start: take every resource at once. Its queue entry, if any, goes stale.
                    waiting_on[t] = -1
                    d = duration[t]
                    nb = nbytes[t]
                    for r in task_res[t]:
                        owner[r] = t
                        busy_ns[r] += d
                        res_bytes[r] += nb
                    start[t] = now
                    b = binder[t]
                    if b < 0 or end[b] != now:   # not its data: a resource released now
                        best = max((rel_task[r] for r in task_res[t] if rel_time[r] == now),
                                   default=-1)
                        if best >= 0:
                            binder[t] = -(best + 2)
                    kind = _RELEASE_COMPLETE if tail[t] == 0 else _RELEASE
                    push(heap, (now + d, seq, kind, t))
                    seq += 1
                elif blocked != was:
                    # Wait in the queue of the resource now blocking t; the old entry goes
                    # stale, and the old queue's next head may be able to start.
                    push(waitq[blocked], t)
                    waiting_on[t] = blocked
                    if was >= 0 and owner[was] < 0:
                        h = _queue_head(waitq[was], waiting_on, was)
                        if h >= 0:
                            push(cand, h)
                # else: blocked again on the queue it waits in (taken this round): stays.

        if not heap:
            break

        # ---- apply every event at the next time ------------------------------------------
        now = heap[0][0]
        while heap and heap[0][0] == now:
            _, _, kind, t = pop(heap)
            events += 1
            if events > limit:
                return result(1)
            if kind != _COMPLETE:
                for r in task_res[t]:
                    owner[r] = -1
                    freed.append(r)
                    rel_task[r] = t
                    rel_time[r] = now
                if kind == _RELEASE:
                    push(heap, (now + tail[t], seq, _COMPLETE, t))
                    seq += 1
                    continue
            end[t] = now
            done += 1
            for s in succ[t]:
                b = binder[s]
                if b < 0 or end[b] < now or t > b:
                    binder[s] = t
                pending[s] -= 1
                if pending[s] == 0:
                    ready.append(s)
    return result(0)
