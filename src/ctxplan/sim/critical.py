"""The critical path of a simulated schedule, and the time each task on it was binding.

Walking back from the task that completes last: a task started either when its last
dependency completed (it was waiting for data) or when the task before it released one of its
resources (it was waiting for a resource: the kernel is work-conserving, so there is no third
reason). That predecessor is the binding constraint; the walk moves to it and repeats until
time 0. Each task on the path is charged the interval during which it was the binding
constraint: from its start to the moment its successor on the path started (its completion,
latency tail included, for a dependency; its release of the resource for a resource wait). The
intervals tile [0, makespan], so the charges add up to the makespan exactly.

Ties (two dependencies completing at the same time, or a dependency completing exactly when a
resource is released) go to the dependency, then to the higher task id: deterministic.

This module imports nothing from the rest of ctxplan; :mod:`ctxplan.evaluate` sums the charges
by op kind and layer (``EvalResult.breakdown``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from numba import njit

if TYPE_CHECKING:
    from ctxplan.sim.graph import TaskGraph
    from ctxplan.sim.result import SimResult


@njit(cache=True)
def _walk(end, start, release, res_ptr, res_idx, dep_ptr, dep_idx, n_res):
    n = len(end)
    # Per resource, its holders (task ids, in id order: a counting sort of the entries), put in
    # (start, id) order only for the resources the walk asks about (a few of them).
    n_e = len(res_idx)
    seg = np.zeros(n_res + 1, np.int64)
    for e in range(n_e):
        seg[res_idx[e] + 1] += 1
    for r in range(n_res):
        seg[r + 1] += seg[r]
    fill = seg[:-1].copy()
    holders = np.empty(n_e, np.int64)
    for t in range(n):
        for e in range(res_ptr[t], res_ptr[t + 1]):
            r = res_idx[e]
            holders[fill[r]] = t
            fill[r] += 1
    ordered = np.zeros(n_res, np.bool_)
    # The walk.
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
        if s <= 0:
            break
        best = -1
        for e in range(dep_ptr[t], dep_ptr[t + 1]):
            d = dep_idx[e]
            if end[d] == s and d > best:
                best = d
        if best >= 0:
            t = best
            until = end[t]
            continue
        # A resource wait: the holder just before t on one of its resources released at s.
        for e in range(res_ptr[t], res_ptr[t + 1]):
            r = res_idx[e]
            a, z = seg[r], seg[r + 1]
            if not ordered[r]:
                keys = np.empty(z - a, np.int64)
                for i in range(a, z):
                    keys[i - a] = start[holders[i]]
                order = np.argsort(keys, kind="mergesort")   # stable: ties stay in id order
                tmp = holders[a:z].copy()
                for i in range(z - a):
                    holders[a + i] = tmp[order[i]]
                ordered[r] = True
            # Binary search for t by (start, id).
            lo, hi = a, z
            while lo < hi:
                mid = (lo + hi) // 2
                h = holders[mid]
                if start[h] < s or (start[h] == s and h < t):
                    lo = mid + 1
                else:
                    hi = mid
            if lo > a:
                h = holders[lo - 1]
                if release[h] == s and h > best:
                    best = h
        if best >= 0:
            t = best
            until = release[t]
            continue
        # Unreachable for a schedule of the kernel (it is work-conserving); end the walk
        # rather than loop.
        break
    return path[:k], charge[:k]


def critical_path(graph: TaskGraph, result: SimResult
                  ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(tasks, ns): the critical path from the last completion back to time 0, latest first,
    and the time each task on it was the binding constraint (the ns add up to the makespan)."""
    if graph.n_tasks == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    dep_ptr, dep_idx = graph.dependencies()
    end = result.end_ns
    start = result.start_ns
    release = end - result.tail_ns
    return _walk(end, start, release, graph.res_ptr, graph.res_idx, dep_ptr, dep_idx,
                 graph.n_resources)


__all__ = ["critical_path"]
