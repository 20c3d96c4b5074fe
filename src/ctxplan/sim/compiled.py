"""The kernel compiled with numba: the reference kernel's algorithm on flat arrays.

Same semantics as :mod:`ctxplan.sim.reference`, decision for decision (tests compare the two, and
SimPy, task by task): a round at time t applies every event at t, then dispatches ready tasks in
order of id; a task takes all of its resources at once or waits in the queue of the first busy
one. Only the data structures differ, chosen for speed:

* the event heap holds (time, payload) with payload = 2 * task + (1 if the event only completes
  a task whose resources were released earlier). No sequence number: the events of one time are
  all applied before anything is dispatched, and applying them commutes (releases mark
  resources free, completions count down successors), so their order cannot change a schedule;
* ready tasks go straight into the candidate heap (a min-heap of ids) as they become ready,
  which is the reference's "heapify the ready list" done incrementally;
* every resource's wait queue is a min-heap of task ids living in one shared int32 pool: a queue
  that outgrows its segment moves to the end of the pool with twice the room (stale entries are
  dropped lazily, exactly as in the reference).

Compiled once per machine: ``cache=True`` stores the machine code beside this file (or in
numba's user cache directory when that is not writable), so later runs only load it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# LLVM's cttz; numba's own integer code uses it too (numba.cpython.unsafe.numbers).
from numba.cpython.unsafe.numbers import trailing_zeros

# Status codes returned by run_compiled.
OK = 0
EVENT_LIMIT = 1
LANE_FULL = 2    # a FIFO lane overflowed: run again with longer lanes
POOL_FULL = 3    # the wait queues outgrew their pool: run again with a larger pool


@njit(cache=True)
def build_successors(n, dep_ptr, dep_idx):
    """Successor lists in CSR form (counting sort of the dependency edges by their source), and
    the pending-dependency count of every task. Returns (succ_ptr, succ_idx, pending, bad):
    ``bad`` is the first task with a dependency outside [0, n), or -1."""
    counts = np.zeros(n + 1, np.int32)
    bad = -1
    for t in range(n):
        for e in range(dep_ptr[t], dep_ptr[t + 1]):
            d = dep_idx[e]
            if d < 0 or d >= n:
                if bad < 0:
                    bad = t
                continue
            counts[d + 1] += 1
    succ_ptr = np.zeros(n + 1, np.int32)
    for t in range(n):
        succ_ptr[t + 1] = succ_ptr[t] + counts[t + 1]
    fill = succ_ptr[:-1].copy()
    succ_idx = np.empty(succ_ptr[n], np.int32)
    pending = np.zeros(n, np.int32)
    for t in range(n):
        for e in range(dep_ptr[t], dep_ptr[t + 1]):
            d = dep_idx[e]
            if d < 0 or d >= n:
                continue
            succ_idx[fill[d]] = t
            fill[d] += 1
            pending[t] += 1
    return succ_ptr, succ_idx, pending, bad


# -- binary min-heaps on arrays (hot path: small, inlined by LLVM) ---------------------------

@njit(cache=True, inline="always")
def _ev_push(ev_t, ev_p, size, time, payload):
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if ev_t[parent] <= time:
            break
        ev_t[i] = ev_t[parent]
        ev_p[i] = ev_p[parent]
        i = parent
    ev_t[i] = time
    ev_p[i] = payload


@njit(cache=True, inline="always")
def _ev_pop(ev_t, ev_p, size):
    """Remove the root of a heap of ``size`` entries (the caller read it first)."""
    size -= 1
    time = ev_t[size]
    payload = ev_p[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and ev_t[c + 1] < ev_t[c]:
            c += 1
        if ev_t[c] >= time:
            break
        ev_t[i] = ev_t[c]
        ev_p[i] = ev_p[c]
        i = c
    if size > 0:
        ev_t[i] = time
        ev_p[i] = payload


@njit(cache=True, inline="always")
def _id_push(h, base, size, x):
    """Push ``x`` on the min-heap h[base : base + size] (room must exist)."""
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if h[base + parent] <= x:
            break
        h[base + i] = h[base + parent]
        i = parent
    h[base + i] = x


@njit(cache=True, inline="always")
def _id_pop(h, base, size):
    """Remove the root of the min-heap h[base : base + size]."""
    size -= 1
    x = h[base + size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and h[base + c + 1] < h[base + c]:
            c += 1
        if h[base + c] >= x:
            break
        h[base + i] = h[base + c]
        i = c
    if size > 0:
        h[base + i] = x


# -- the candidate set: a multiset of task ids with pop-min, as a hierarchy of bit words ------
# Level 0 has one bit per task id, level k + 1 one bit per non-zero word of level k; pop-min
# walks down from the top word by word with count-trailing-zeros. Beside it, a count per id (a
# task can be pushed twice in one round, as in the reference's heap, and pops once per push).
# Insert and pop-min cost one word per level (5 levels for 2^30 ids) instead of a heap's
# log2(size) swaps, which is what the dispatch loop spends most of its time on.

@njit(cache=True)
def _bits_layout(n):
    """Offsets of each level's words in one array, and the number of levels."""
    offsets = np.zeros(8, np.int64)
    words = max(1, (n + 63) >> 6)
    total = 0
    levels = 0
    while True:
        offsets[levels] = total
        total += words
        levels += 1
        if words == 1:
            break
        words = (words + 63) >> 6
    return offsets, levels, total


@njit(cache=True, inline="always")
def _bits_insert(bits, offsets, levels, count, x):
    count[x] += 1
    if count[x] > 1:
        return
    for lvl in range(levels):
        i = offsets[lvl] + (x >> 6)
        w = bits[i]
        bits[i] = w | (np.uint64(1) << np.uint64(x & 63))
        if w != 0:
            return
        x >>= 6


@njit(cache=True, inline="always")
def _bits_pop_min(bits, offsets, levels, count):
    x = 0
    for lvl in range(levels - 1, -1, -1):
        x = (x << 6) | trailing_zeros(bits[offsets[lvl] + x])
    t = x
    count[t] -= 1
    if count[t] == 0:
        for lvl in range(levels):
            i = offsets[lvl] + (x >> 6)
            w = bits[i] & ~(np.uint64(1) << np.uint64(x & 63))
            bits[i] = w
            if w != 0:
                break
            x >>= 6
    return t


@njit(cache=True, inline="always")
def _complete(t, now, end, succ_ptr, succ_idx, pending, bits, offsets, levels, count, binder):
    """Task t completes at ``now``: count down its successors; returns how many became ready
    (they join the candidates). Each successor remembers its latest-completing dependency
    (ties: the higher id; completions come in time order) for the critical path."""
    end[t] = now
    ready = 0
    for e in range(succ_ptr[t], succ_ptr[t + 1]):
        s = succ_idx[e]
        b = binder[s]
        if b < 0 or end[b] < now or t > b:
            binder[s] = t
        pending[s] -= 1
        if pending[s] == 0:
            _bits_insert(bits, offsets, levels, count, s)
            ready += 1
    return ready


@njit(cache=True, inline="always")
def _lane_of(lane_tails, n_lanes, tail):
    for k in range(n_lanes):
        if lane_tails[k] == tail:
            return k
    return -1


@njit(cache=True)
def _compact_pool(pool, wq_base, wq_cap, wq_n, waiting_on, n_res):
    """Move every wait queue to the front of the pool, dropping its stale entries (tasks no
    longer waiting on that resource: the lazy deletion of the reference, done early, which
    changes no queue head) and shrinking its room to twice what is left (at least 4, at most
    what it had); returns
    the new end of the used part. Queues move in the order they sit in the pool, so each one
    moves down over space already freed and never over a queue not yet moved. (Rare: not
    inlined, so the main loop stays free of the array it allocates.)"""
    end = 0
    for r in np.argsort(wq_base, kind="mergesort"):
        b = wq_base[r]
        live = 0
        for i in range(wq_n[r]):
            x = pool[b + i]
            if waiting_on[x] == r:
                pool[end + live] = x
                live += 1
        # The kept entries are in their old heap order minus some: restore the heap.
        for i in range(live // 2 - 1, -1, -1):
            x = pool[end + i]
            j = i
            while True:
                c = 2 * j + 1
                if c >= live:
                    break
                if c + 1 < live and pool[end + c + 1] < pool[end + c]:
                    c += 1
                if pool[end + c] >= x:
                    break
                pool[end + j] = pool[end + c]
                j = c
            pool[end + j] = x
        # Room: twice what is left, but never more than before (a queue never moves up over
        # one not yet moved).
        cap = 4
        while cap < 2 * live:
            cap *= 2
        cap = min(cap, wq_cap[r])
        wq_base[r] = end
        wq_n[r] = live
        wq_cap[r] = cap
        end += cap
    return end


@njit(cache=True, error_model="numpy")
def run_compiled(duration, tail, nbytes, res_ptr, res_idx, succ_ptr, succ_idx, pending,
                 n_res, event_limit, lane_tails, lane_cap, pool_cap):
    """Simulate. ``pending`` is consumed (pass a copy). ``lane_tails``: distinct positive tail
    values whose completions go through FIFO lanes instead of the heap (see below), each lane
    holding up to ``lane_cap`` completions in flight; ``pool_cap``: room for the wait queues.
    Returns (status, end, busy, res_bytes, events, done, now, binder); a task's start is
    end - duration - tail; binder[t] is what t's start waited for (see ctxplan.sim.critical).
    Status LANE_FULL or POOL_FULL: run again with more room.

    Completions after a tail: a task released at ``now`` completes at now + tail, and ``now``
    never decreases, so the completions of one tail value arrive in time order. They wait in
    a FIFO lane per value (a cluster has a handful of link latencies) rather than in the heap:
    half the heap traffic of a graph full of transfers, for the same events at the same times.

    Hot path (why it is written this way): no array variable is ever reassigned inside the
    loop. Numba reference-counts arrays, and a reassigned one costs an atomic increment and
    decrement on every iteration: that was a third of the run time. So every array is sized
    up front (the heap by an upper bound, lanes and pool by the caller, who reruns with twice
    the room in the rare case they overflow).
    """
    n = duration.shape[0]
    end = np.full(n, -1, np.int64)
    busy = np.zeros(n_res, np.int64)
    res_bytes = np.zeros(n_res, np.int64)
    owner = np.full(n_res, -1, np.int32)
    # -1: not waiting; r >= 0: waiting in resource r's queue; -2: started.
    waiting_on = np.full(n, -1, np.int32)
    # Per task, what its start waited for last (the critical path walks these back): a
    # dependency id, or -(id + 2) of the task that released a resource it needed; -1: none.
    binder = np.full(n, -1, np.int32)
    rel_task = np.full(n_res, -1, np.int32)   # per resource: its last releaser, and when
    rel_time = np.full(n_res, -1, np.int64)
    n_lanes = lane_tails.shape[0]

    # Event heap: releases and completions of tails without a lane. At most one release per
    # resource holder (each holds a resource exclusively), per task without resources, and
    # one tail completion per task whose tail has no lane: that bounds its size.
    heap_cap = n_res + 1
    for t in range(n):
        if res_ptr[t + 1] == res_ptr[t]:
            heap_cap += 1
        if tail[t] > 0 and _lane_of(lane_tails, n_lanes, tail[t]) < 0:
            heap_cap += 1
    ev_t = np.empty(heap_cap, np.int64)
    ev_p = np.empty(heap_cap, np.int64)
    ev_n = 0
    # Lanes: FIFO ring buffers of (time, task), one per tail value.
    lane_t = np.empty((n_lanes, lane_cap), np.int64)
    lane_x = np.empty((n_lanes, lane_cap), np.int32)
    lane_head = np.zeros(n_lanes, np.int64)
    lane_len = np.zeros(n_lanes, np.int64)
    # Candidate multiset (ready tasks and queue heads), popped by lowest id.
    offsets, levels, words = _bits_layout(n)
    bits = np.zeros(words, np.uint64)
    count = np.zeros(n, np.uint8)
    cand_n = 0
    # Wait queues: segment [wq_base[r], wq_base[r] + wq_cap[r]) of the pool, wq_n[r] entries.
    pool = np.empty(max(pool_cap, 4 * n_res), np.int32)
    wq_cap = np.full(n_res, 4, np.int64)
    wq_base = np.arange(n_res).astype(np.int64) * 4
    wq_n = np.zeros(n_res, np.int64)
    pool_end = 4 * n_res
    freed = np.empty(max(1, n_res), np.int32)
    n_freed = 0

    for t in range(n):
        if pending[t] == 0:
            _bits_insert(bits, offsets, levels, count, t)
            cand_n += 1

    events = 0
    done = 0
    now = 0
    big = np.iinfo(np.int64).max
    while True:
        # ---- dispatch: heads of freed resources' queues, then every candidate by id -------
        for k in range(n_freed):
            r = freed[k]
            if owner[r] < 0:
                # head of r's queue, dropping stale entries
                b = wq_base[r]
                while wq_n[r] > 0 and waiting_on[pool[b]] != r:
                    _id_pop(pool, b, wq_n[r])
                    wq_n[r] -= 1
                if wq_n[r] > 0:
                    _bits_insert(bits, offsets, levels, count, pool[b])
                    cand_n += 1
        n_freed = 0
        while cand_n > 0:
            t = _bits_pop_min(bits, offsets, levels, count)
            cand_n -= 1
            was = waiting_on[t]
            if was == -2:
                continue  # pushed twice (head of two freed queues); already running
            blocked = -1
            for e in range(res_ptr[t], res_ptr[t + 1]):
                r = res_idx[e]
                if owner[r] >= 0:
                    blocked = r
                    break
            if blocked < 0:
                waiting_on[t] = -2
                # The binding constraint of t's start, for the critical path: its latest
                # dependency if that completed just now, else the task that released one of
                # its resources just now (ties: the higher id), stored as -(id + 2).
                b = binder[t]
                if b < 0 or end[b] != now:
                    best = -1
                    for e in range(res_ptr[t], res_ptr[t + 1]):
                        r = res_idx[e]
                        if rel_time[r] == now and rel_task[r] > best:
                            best = rel_task[r]
                    if best >= 0:
                        binder[t] = -(best + 2)
                d = duration[t]
                nb = nbytes[t]
                for e in range(res_ptr[t], res_ptr[t + 1]):
                    r = res_idx[e]
                    owner[r] = t
                    busy[r] += d
                    res_bytes[r] += nb
                _ev_push(ev_t, ev_p, ev_n, now + d, 2 * t)
                ev_n += 1
            elif blocked != was:
                # Wait in the queue of the resource now blocking t (the old entry goes stale).
                if wq_n[blocked] == wq_cap[blocked] and pool_end + 2 * wq_cap[blocked] \
                        > pool.shape[0]:
                    # No room left at the end of the pool: compact it (drops stale entries).
                    pool_end = _compact_pool(pool, wq_base, wq_cap, wq_n, waiting_on, n_res)
                if wq_n[blocked] == wq_cap[blocked]:
                    # Full: move the queue to the end of the pool with twice the room.
                    cap = 2 * wq_cap[blocked]
                    if pool_end + cap > pool.shape[0]:
                        return POOL_FULL, end, busy, res_bytes, events, done, now, binder
                    old = wq_base[blocked]
                    for i in range(wq_n[blocked]):
                        pool[pool_end + i] = pool[old + i]
                    wq_base[blocked] = pool_end
                    wq_cap[blocked] = cap
                    pool_end += cap
                _id_push(pool, wq_base[blocked], wq_n[blocked], t)
                wq_n[blocked] += 1
                waiting_on[t] = blocked
                if was >= 0 and owner[was] < 0:
                    b = wq_base[was]
                    while wq_n[was] > 0 and waiting_on[pool[b]] != was:
                        _id_pop(pool, b, wq_n[was])
                        wq_n[was] -= 1
                    if wq_n[was] > 0:
                        _bits_insert(bits, offsets, levels, count, pool[b])
                        cand_n += 1
            # else: blocked again on the queue it waits in: it stays there.

        # ---- the next time: the earliest of the heap and the lane heads ----------------
        now = ev_t[0] if ev_n > 0 else big
        for k in range(n_lanes):
            if lane_len[k] > 0 and lane_t[k, lane_head[k]] < now:
                now = lane_t[k, lane_head[k]]
        if now == big:
            break

        # ---- apply every event at that time ----------------------------------------------
        while ev_n > 0 and ev_t[0] == now:
            payload = ev_p[0]
            _ev_pop(ev_t, ev_p, ev_n)
            ev_n -= 1
            events += 1
            if events > event_limit:
                return EVENT_LIMIT, end, busy, res_bytes, events, done, now, binder
            t = payload >> 1
            if (payload & 1) == 0:
                for e in range(res_ptr[t], res_ptr[t + 1]):
                    r = res_idx[e]
                    owner[r] = -1
                    rel_task[r] = t
                    rel_time[r] = now
                    freed[n_freed] = r
                    n_freed += 1
                if tail[t] > 0:
                    k = _lane_of(lane_tails, n_lanes, tail[t])
                    if k < 0:
                        _ev_push(ev_t, ev_p, ev_n, now + tail[t], 2 * t + 1)
                        ev_n += 1
                        continue
                    if lane_len[k] == lane_cap:
                        return LANE_FULL, end, busy, res_bytes, events, done, now, binder
                    slot = (lane_head[k] + lane_len[k]) % lane_cap
                    lane_t[k, slot] = now + tail[t]
                    lane_x[k, slot] = t
                    lane_len[k] += 1
                    continue
            cand_n += _complete(t, now, end, succ_ptr, succ_idx, pending, bits, offsets,
                                levels, count, binder)
            done += 1
        for k in range(n_lanes):
            while lane_len[k] > 0 and lane_t[k, lane_head[k]] == now:
                t = lane_x[k, lane_head[k]]
                lane_head[k] = (lane_head[k] + 1) % lane_cap
                lane_len[k] -= 1
                events += 1
                if events > event_limit:
                    return EVENT_LIMIT, end, busy, res_bytes, events, done, now, binder
                cand_n += _complete(t, now, end, succ_ptr, succ_idx, pending, bits, offsets,
                                    levels, count, binder)
                done += 1
    return OK, end, busy, res_bytes, events, done, now, binder
