"""The critical path of a simulated schedule, and the time each task on it was binding.

Walking back from the task that completes last: a task started either when its last
dependency completed (it was waiting for data) or when the task before it released one of its
resources (it was waiting for a resource: the kernel is work-conserving, so there is no third
reason). That predecessor is the binding constraint; the walk moves to it and repeats until
time 0. Each task on the path is charged the interval during which it was the binding
constraint: from its start to the moment its successor on the path started (its completion,
latency tail included, for a dependency; its release of the resource for a resource wait). The
intervals tile [0, makespan], so the charges add up to the makespan exactly.

The kernels record each task's binding constraint as it starts (``SimResult.binder``: its
latest-completing dependency if that completed at its start, else the task that released one
of its resources at that instant), so the walk is a pointer chase: no dependency lists, no
resource histories. Ties (two dependencies completing at the same time, or a dependency
completing exactly when a resource is released) go to the dependency, then to the higher task
id: deterministic. (Reconstructing the releaser from start times alone is ambiguous when
zero-duration tasks hand a resource over several times within one nanosecond; the kernels know
the order.)

This module imports nothing from the rest of ctxplan; :mod:`ctxplan.evaluate` sums the charges
by op kind and layer (``EvalResult.breakdown``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from numba import njit

from ctxplan.sim.notice import compile_notice

if TYPE_CHECKING:
    from ctxplan.sim.graph import TaskGraph
    from ctxplan.sim.result import SimResult


@njit(cache=True)
def _follow(end, start, release, binder):
    """The walk along the binding constraints the kernel recorded while it ran."""
    n = len(end)
    path = np.empty(n, np.int64)
    charge = np.empty(n, np.int64)
    t = 0
    for i in range(n):
        if end[i] > end[t]:
            t = i
    until = end[t] if n else 0
    k = 0
    while k < n:
        s = start[t]
        path[k] = t
        charge[k] = until - s
        k += 1
        b = binder[t]
        if s <= 0 or b == -1:
            break
        if b >= 0:
            t = b
            until = end[t]
        else:
            t = -b - 2
            until = release[t]
    return path[:k], charge[:k]


def critical_path(graph: TaskGraph, result: SimResult
                  ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(tasks, ns): the critical path from the last completion back to time 0, latest first,
    and the time each task on it was the binding constraint (the ns add up to the makespan).

    It follows back the constraints the kernel recorded as each task started
    (``SimResult.binder``): no dependency lists or resource histories are needed."""
    if graph.n_tasks == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    end = result.end_ns
    with compile_notice():
        return _follow(end, result.start_ns, end - result.tail_ns, result.binder)


__all__ = ["critical_path"]
