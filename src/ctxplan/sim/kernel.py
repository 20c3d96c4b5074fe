"""The event-driven kernel: a task graph on exclusive resources, simulated in integer nanoseconds.

Model
-----
* A **resource** is anything that does one thing at a time: a chip's compute engine, one
  direction of a link, a switch port.
* A **task** has a duration, a set of resources it holds for that duration, dependencies, an
  optional ``tail_ns`` and a byte count. It becomes *ready* when every dependency has completed,
  *starts* when it is ready and all of its resources are free (it takes them all at once, never
  a partial set, so there is no hold-and-wait deadlock), releases its resources after
  ``duration_ns`` and *completes* ``tail_ns`` later. The tail models latency that does not
  occupy a resource (a link's propagation and switch latency: the next message may enter the
  wire while this one is still in flight).
* **Contention** is exclusive and work-conserving: when several ready tasks want a resource, the
  one with the lowest task id (emission order = program order) goes first; a task whose
  resources are free is never kept waiting for a lower-priority reason (no reservation, so a
  small task may overtake a blocked one). Two equal transfers on one link therefore take twice
  as long as one.
* **Time** advances in rounds. In a round at time t the kernel first applies every event at t
  (releases and completions), then dispatches ready tasks in priority order. A zero-duration
  task started in that dispatch completes at t and triggers another round at the same t.

Overlap of compute and communication is never written down anywhere: it appears because a
transfer and a compute that do not depend on each other hold different resources.

This module imports nothing from the rest of ctxplan.
"""

from __future__ import annotations

import gc
import heapq
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["EventLimitError", "SimResult", "SimulationError", "TaskGraph", "paused_gc"]

# Event kinds in the heap. RELEASE frees the task's resources; COMPLETE finishes it. A task with
# no tail posts a single RELEASE_COMPLETE event (the common case: one heap operation, not two).
_RELEASE = 0
_COMPLETE = 1
_RELEASE_COMPLETE = 2


class SimulationError(Exception):
    """The task graph cannot be simulated: a cycle, a task that can never start, or a runaway."""


class EventLimitError(SimulationError):
    """The simulation processed more events than its limit allows (``run(event_limit=...)``)."""

    def __init__(self, message: str, limit: int, events: int, done: int, total: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.done = done
        self.total = total


@dataclass(frozen=True)
class SimResult:
    """What one simulation measured."""

    makespan_ns: int              # completion time of the last task
    start_ns: list[int]           # per task id: when it took its resources
    end_ns: list[int]             # per task id: when it completed (release + tail)
    resource_busy_ns: list[int]   # per resource id: total time held
    resource_bytes: list[int]     # per resource id: bytes of the tasks that held it
    events: int                   # heap events processed

    def utilisation(self, resource: int) -> float:
        """Fraction of the makespan the resource was held; never above 1 by construction."""
        return self.resource_busy_ns[resource] / self.makespan_ns if self.makespan_ns else 0.0


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a block.

    Building and running a graph allocates millions of small lists and tuples that hold no
    reference cycles; the collector's generation-0 passes over them cost about a quarter of the
    run time (measured with cProfile, docs/benchmarks.md). Reference counting still frees
    everything; the collector is restored (if it was on) when the block exits.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _queue_head(queue: list[int], waiting_on: list[int], resource: int) -> int:
    """Lowest live task id in a resource's wait queue (dropping stale entries), or -1."""
    while queue and waiting_on[queue[0]] != resource:
        heapq.heappop(queue)
    return queue[0] if queue else -1


class TaskGraph:
    """Build a task graph, then :meth:`run` it once.

    Storage is struct-of-arrays (one list per field, indexed by id) because graphs reach
    hundreds of thousands of tasks and per-task objects would dominate memory and time.
    """

    def __init__(self, namer: Callable[[int], str] | None = None) -> None:
        # Names are optional: a builder that keeps its own per-task metadata passes "" and a
        # ``namer`` that makes a task's name on demand (only error messages need it here).
        self.namer = namer
        self.resource_names: list[str] = []
        self.task_names: list[str] = []
        self.duration_ns: list[int] = []
        self.tail_ns: list[int] = []
        self.nbytes: list[int] = []
        self.resources: list[tuple[int, ...]] = []
        self.deps: list[list[int]] = []

    # -- building ---------------------------------------------------------------------------

    def add_resource(self, name: str) -> int:
        self.resource_names.append(name)
        return len(self.resource_names) - 1

    def add_task(
        self,
        name: str,
        duration_ns: int,
        resources: Sequence[int] = (),
        deps: Sequence[int] = (),
        *,
        tail_ns: int = 0,
        nbytes: int = 0,
    ) -> int:
        """Add a task and return its id (ids are dense, in order; lower id = higher priority)."""
        if duration_ns < 0 or tail_ns < 0:
            raise ValueError(f"task {name!r}: negative duration ({duration_ns} ns, tail {tail_ns})")
        n_res = len(self.resource_names)
        res = tuple(resources)
        for r in res:
            if not 0 <= r < n_res:
                raise ValueError(f"task {name!r}: unknown resource id {r}")
        if len(set(res)) != len(res):
            raise ValueError(f"task {name!r}: resource listed twice in {res}")
        self.task_names.append(name)
        self.duration_ns.append(int(duration_ns))
        self.tail_ns.append(int(tail_ns))
        self.nbytes.append(int(nbytes))
        self.resources.append(res)
        self.deps.append(list(deps))
        return len(self.task_names) - 1

    def add_dep(self, task: int, dep: int) -> None:
        """Make ``task`` wait for ``dep`` (may create a cycle; :meth:`run` reports it)."""
        self.deps[task].append(dep)

    def name_of(self, t: int) -> str:
        """A task's name: the one it was given, else the namer's."""
        name = self.task_names[t]
        return name if name or self.namer is None else self.namer(t)

    @property
    def n_tasks(self) -> int:
        return len(self.task_names)

    @property
    def n_resources(self) -> int:
        return len(self.resource_names)

    # -- running ----------------------------------------------------------------------------

    def run(self, event_limit: int | None = None) -> SimResult:
        with paused_gc():
            return self._run(event_limit)

    def _run(self, event_limit: int | None) -> SimResult:
        n = len(self.task_names)
        n_res = len(self.resource_names)
        duration = self.duration_ns
        tail = self.tail_ns
        task_res = self.resources

        # Successor lists and pending-dependency counts.
        succ: list[list[int]] = [[] for _ in range(n)]
        pending = [0] * n
        for t, deps in enumerate(self.deps):
            for d in deps:
                if not 0 <= d < n:
                    raise SimulationError(
                        f"task {self.name_of(t)!r} (id {t}) depends on task id {d}, which "
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
        heap: list[tuple[int, int, int, int]] = [] # (time, seq, kind, task)
        seq = 0
        events = 0
        # event_limit caps the events processed: N allows exactly N (0 allows none).
        limit = sys.maxsize if event_limit is None else event_limit
        done = 0
        nbytes = self.nbytes
        push = heapq.heappush
        pop = heapq.heappop

        ready = [t for t in range(n) if pending[t] == 0]
        freed: list[int] = []
        now = 0

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
                    raise EventLimitError(
                        f"event limit {event_limit} reached at t = {now} ns after "
                        f"{done} of {n} tasks; raise the limit if the graph is really this large",
                        limit, events, done, n,
                    )
                if kind != _COMPLETE:
                    for r in task_res[t]:
                        owner[r] = -1
                        freed.append(r)
                    if kind == _RELEASE:
                        push(heap, (now + tail[t], seq, _COMPLETE, t))
                        seq += 1
                        continue
                end[t] = now
                done += 1
                for s in succ[t]:
                    pending[s] -= 1
                    if pending[s] == 0:
                        ready.append(s)

        if done != n:
            raise SimulationError(self._diagnose_stuck(end, pending))
        return SimResult(
            makespan_ns=max(end, default=0),
            start_ns=start,
            end_ns=end,
            resource_busy_ns=busy_ns,
            resource_bytes=res_bytes,
            events=events,
        )

    def _diagnose_stuck(self, end: list[int], pending: list[int]) -> str:
        """Name a task on a dependency cycle (or, failing that, the first unfinished task)."""
        unfinished = [t for t in range(len(end)) if end[t] < 0]
        # Depth-first search over the dependency edges of unfinished tasks for a back edge.
        colour = dict.fromkeys(unfinished, 0)  # 0 new, 1 on stack, 2 finished
        for root in unfinished:
            if colour[root]:
                continue
            stack = [(root, iter(self.deps[root]))]
            colour[root] = 1
            path = [root]
            while stack:
                node, it = stack[-1]
                nxt = next((d for d in it if d in colour and colour[d] != 2), None)
                if nxt is None:
                    colour[node] = 2
                    stack.pop()
                    path.pop()
                elif colour[nxt] == 1:
                    cycle = path[path.index(nxt):]
                    names = " -> ".join(f"{self.name_of(c)!r}" for c in [*cycle, nxt])
                    return (
                        f"dependency cycle through task {self.name_of(nxt)!r} "
                        f"(id {nxt}): {names}"
                    )
                else:
                    colour[nxt] = 1
                    stack.append((nxt, iter(self.deps[nxt])))
                    path.append(nxt)
        t = unfinished[0]
        return (
            f"task {self.name_of(t)!r} (id {t}) can never start: "
            f"{pending[t]} dependencies never complete"
        )
