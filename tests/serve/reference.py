"""A token-by-token reference of the decode pool (test helper): every step of every instance
is an event, with the admission and routing rules of ctxplan.serve.des written out plainly.
The fast simulation jumps over runs of equal steps; on the same inputs it must give the same
finish times."""

from __future__ import annotations

import math
from collections import deque

import numpy as np


def reference_decode(ready_s, lengths, instances, steps_per_request, limit_s, grid, times):
    n = len(ready_s)
    order = sorted(range(n), key=lambda r: (ready_s[r], r))
    done = np.full(n, np.nan)
    active = [dict() for _ in range(instances)]      # r -> steps left
    step_end = [None] * instances                   # end time of the step in progress
    step_len = [0.0] * instances
    pending = [[] for _ in range(instances)]         # requests joining at the next boundary
    queue = deque()

    def shape(members):
        b = len(members)
        tokens = sum(lengths[r] for r in members)
        mean = -(-tokens // b)
        return b, min(g for g in grid if g >= mean)

    def admits(i, r):
        members = list(active[i]) + pending[i]
        if not members:
            return True
        key = shape([*members, r])
        return times.fits(*key) and times.step_s(*key) <= limit_s

    def start_step(i, now):
        members = list(active[i])
        if not members:
            step_end[i] = None
            return
        step_len[i] = times.step_s(*shape(members))
        step_end[i] = now + step_len[i]

    k = 0
    while k < n or any(e is not None for e in step_end):
        next_arrival = ready_s[order[k]] if k < n else math.inf
        ends = [(e, i) for i, e in enumerate(step_end) if e is not None]
        t_end, i_end = min(ends) if ends else (math.inf, -1)
        if t_end <= next_arrival:
            i = i_end
            now = t_end
            # the rule of the fast DES: the boundary at which a step ends is where requests
            # leave; joins land on the same boundary
            for r in list(active[i]):
                active[i][r] -= 1
                if active[i][r] == 0:
                    done[r] = now
                    del active[i][r]
            for r in pending[i]:
                active[i][r] = steps_per_request
            pending[i] = []
            while queue and admits(i, queue[0]):
                active[i][queue.popleft()] = steps_per_request
            start_step(i, now)
            continue
        r = order[k]
        k += 1
        now = next_arrival
        if queue:
            queue.append(r)
            continue
        best = -1
        for i in range(instances):
            count = len(active[i]) + len(pending[i])
            best_count = len(active[best]) + len(pending[best]) if best >= 0 else None
            if (best < 0 or count < best_count) and admits(i, r):
                best = i
        if best < 0:
            queue.append(r)
            continue
        if step_end[best] is None:
            active[best][r] = steps_per_request
            start_step(best, now)
        else:
            pending[best].append(r)
    return done
