"""Collectives and point-to-point operations expanded into transfers on the topology.

Nothing here assumes a collective's cost: each algorithm is written out as the sends it makes
and the dependencies between them, and the kernel measures the time (so contention on shared
ports and per-hop latency are simulated). Every function takes, per participating chip, a row of
the tasks after which that chip's input is ready (a 2-D array, one row per position, padded with
-1), and returns, per position, a row of tasks after which that chip's output is ready.

**Operations.** Each function is one operation as an NCCL-like library runs it (one kernel per
rank: ``ncclAllReduce``, a grouped all-to-all, one SendRecv): every position taking part pays
the operation's fixed cost once (launch, proxy, synchronisation of the peers; the cluster
level's ``op_overhead`` for a point-to-point SendRecv, ``collective_overhead`` for a collective)
as a task that holds no resource (:func:`start_op`), and a transfer of the operation starts only
once both its ends have paid it (the receiver has posted its receive). docs/mapping.md,
"Operations", has the reasoning.

Emission order is priority, but only between tasks that hold a common resource. Chips of
different TP groups share no link, so the rings of all groups are emitted step by step together;
the schedule is the one of emitting group after group.

Algorithms (the usual NCCL-style choices and the engines' custom all-reduce; docs/mapping.md):
* all-reduce, by size (:func:`allreduce_algorithm`): the ring (reduce-scatter then all-gather
  around the ring, 2 * (n - 1) steps, each sending nbytes / n to the next chip; a step waits for
  the previous step's receive), or where the level offers them one-shot (every rank sends its
  whole buffer to every peer at once) and two-shot (a direct reduce-scatter, then a direct
  all-gather).
* ring reduce-scatter / all-gather: the two halves of the above.
* all-to-all: every ordered pair sends directly (its bytes given by a matrix), each rank to its
  peers in staggered order with at most the cluster's ``all_to_all_peers_in_flight`` transfers
  in flight (its k-th transfer waits for its (k - w)-th to arrive).
* SendRecv: each position sends one message to a peer and receives one (a ring step).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ctxplan.hardware.cluster import COMBINE, DISPATCH, ONE_SHOT, RING, TWO_SHOT
from ctxplan.mapping.builder import NONE, GraphBuilder, IdArray, deps_of
from ctxplan.mapping.ops import MOE_COMBINE, MOE_DISPATCH, op_kind

# Operations a cluster level may give its own fixed cost (Level.overhead_ns).
_SPECIAL = {MOE_DISPATCH: DISPATCH, MOE_COMBINE: COMBINE}

Rows = IdArray
"""Per position (chip), the tasks after which something is ready: an (n, w) int64 array of task
ids padded with -1 (a join without a join task)."""


def rows_of(ids: Any) -> Rows:
    """One task per position as rows."""
    return np.asarray(ids, np.int64).reshape(-1, 1)


def scatter_rows(n: int, target: npt.NDArray[np.int64], ids: npt.NDArray[np.int64]) -> Rows:
    """Rows for positions 0..n-1 holding, in order, the ``ids`` whose ``target`` is that
    position (a stable group-by)."""
    if len(ids) == 0:
        return np.full((n, 0), NONE, np.int64)
    order = np.argsort(target, kind="stable")
    tgt = target[order]
    counts = np.bincount(tgt, minlength=n)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    col = np.arange(len(tgt)) - starts[tgt]
    out = np.full((n, int(counts.max())), NONE, np.int64)
    out[tgt, col] = ids[order]
    return out


def start_op(b: GraphBuilder, chips: npt.NDArray[np.int64], src_pos: npt.NDArray[np.int64],
             dst_pos: npt.NDArray[np.int64], ready: Rows, kind: str, layer: int, *,
             collective: bool, step: Any = -1, overhead_ns: int | None = None) -> IdArray:
    """The fixed cost of one operation on every position that sends or receives in it.

    ``chips[p]`` is position p's chip; the operation's transfers go from position ``src_pos``
    to ``dst_pos``. A position pays the cost of the costliest level it talks over in this
    operation (``overhead_ns``: a given cost, an all-reduce algorithm's), after its ``ready``
    row. Returns per position its op task (-1: no traffic)."""
    n = len(chips)
    out = np.full(n, NONE, np.int64)
    if len(src_pos) == 0:
        return out
    topo = b.topology
    if overhead_ns is not None:
        cost = np.full(len(src_pos), overhead_ns, np.int64)
    else:
        cost = topo.op_overhead_ns(topo.levels_of(chips[src_pos], chips[dst_pos]), collective,
                                   _SPECIAL.get(kind))
    per = np.full(n, -1, np.int64)
    np.maximum.at(per, src_pos, cost)
    np.maximum.at(per, dst_pos, cost)
    busy = np.flatnonzero(per >= 0)
    out[busy] = b.delay(chips[busy], op_kind(kind), per[busy], ready[busy], layer=layer,
                        step=step)
    return out


def sendrecv(b: GraphBuilder, src: npt.NDArray[np.int64], dst_pos: npt.NDArray[np.int64],
             nbytes: Any, kind: str, ready: Rows, layer: int, step: Any = -1
             ) -> tuple[IdArray, IdArray]:
    """One SendRecv (a point-to-point operation) on each position: position p (chip
    ``src[p]``) sends ``nbytes`` to position ``dst_pos[p]`` and receives what is sent to it.
    Returns (op task per position, send per position)."""
    pos = np.arange(len(src))
    op = start_op(b, src, pos, dst_pos, ready, kind, layer, collective=False, step=step)
    sends = b.send(src, src[dst_pos], nbytes, kind, deps_of(op, op[dst_pos]), layer=layer,
                   step=step)
    return op, sends


def _ring_steps(b: GraphBuilder, groups: npt.NDArray[np.int64], ready: Rows, nbytes: Any,
                n_steps: int, kind: str, layer: int) -> Rows:
    """One ring collective in every group at once. ``groups`` is (G, n): G rings of n chips
    (chips of different groups hold different links, so their sends never contend); ``ready``
    and the result have one row per chip of ``groups.ravel()``; ``nbytes`` is per group (or one
    for all). One operation per chip: its fixed cost, then ``n_steps`` ring steps."""
    g, n = groups.shape
    if n == 1:
        return ready
    chunk = np.repeat(-(-np.broadcast_to(np.asarray(nbytes, np.int64), (g,)) // n), n)
    src = groups.ravel()
    nxt = np.roll(np.arange(g * n).reshape(g, n), -1, axis=1).ravel()  # position i -> i + 1
    op = start_op(b, src, np.arange(g * n), nxt, ready, kind, layer, collective=True)
    last = deps_of(op, op[nxt])   # both ends have started the operation
    for step in range(n_steps):
        # Position i sends what it has (its state, and what came from i - 1 last step).
        sends = b.send(src, src[nxt], chunk, kind, last, layer=layer, step=step)
        # Next step, position i needs its own send done (buffer free) and i - 1's arrived.
        last = deps_of(sends, np.roll(sends.reshape(g, n), 1, axis=1).ravel())
    return last


def all_reduce(b: GraphBuilder, groups: npt.NDArray[np.int64], ready: Rows, nbytes: Any,
               layer: int, kind: str = "tp_allreduce") -> Rows:
    """All-reduce of ``nbytes`` held on every chip, in each group (row) of ``groups``, by the
    algorithm the library would pick for that size (:func:`allreduce_algorithm`): the ring,
    or where the level offers them one-shot or two-shot."""
    g, n = groups.shape
    if n == 1:
        return ready
    algorithm, cost, rate = allreduce_algorithm(b, groups, nbytes)
    if algorithm == RING:
        return _ring_steps(b, groups, ready, nbytes, 2 * (n - 1), kind, layer)
    chunk = np.broadcast_to(np.asarray(nbytes, np.int64), (g,))
    src_g = np.repeat(np.arange(n), n - 1)
    dst_g = (src_g + np.tile(np.arange(1, n), n)) % n          # staggered, as exchange issues
    base = (np.arange(g) * n)[:, None]
    src = (base + src_g[None, :]).ravel()
    dst = (base + dst_g[None, :]).ravel()
    chips = groups.ravel()
    if algorithm == ONE_SHOT:
        # Every rank writes its whole buffer to every peer, which reduces locally.
        return exchange(b, chips, src, dst, np.repeat(chunk, n * (n - 1)), ready, layer, kind,
                        overhead_ns=cost, rate=rate)
    # Two-shot: a direct reduce-scatter (a 1 / n shard to each peer), then a direct
    # all-gather of the reduced shards; one operation (its fixed cost paid once).
    shard = np.repeat(-(-chunk // n), n * (n - 1))
    first = exchange(b, chips, src, dst, shard, ready, layer, kind, overhead_ns=cost,
                     rate=rate)
    second = b.send(chips[src], chips[dst], shard, kind, deps_of(first[src], first[dst]),
                    layer=layer, step=1, rate=rate)
    return np.concatenate([first, scatter_rows(len(chips), dst, second),
                           scatter_rows(len(chips), src, second)], axis=1)


def allreduce_algorithm(b: GraphBuilder, groups: npt.NDArray[np.int64],
                        nbytes: Any) -> tuple[str, int | None, float]:
    """The all-reduce algorithm for groups like ``groups`` (G, n) and a message of ``nbytes``
    (the largest group's), its fixed cost (None: the level's collective figure) and the
    fraction of the link's bandwidth its transfers reach: the one with the least estimated
    time, as NCCL's tuner and the engines' custom all-reduce pick by
    size (latency-bandwidth estimates: the fixed cost, one hop per step, the bytes each port
    carries). One-shot and two-shot only where every pair of a group talks at one level that
    offers them (inside an NVLink domain); the ring otherwise and on a tie."""
    n = groups.shape[1]
    topo = b.topology
    level = topo.levels_of(np.repeat(groups[:, :1], n - 1, axis=1).ravel(),
                           groups[:, 1:].ravel())
    index = int(level.max())
    lv = topo.cluster.levels[index]
    if not lv.allreduce or int(level.min()) != index:
        return RING, None, 1.0
    size = float(np.max(np.asarray(nbytes, np.float64)))
    hop = lv.latency_ns
    shard = -(-size // n)
    # (estimated ns, fixed cost, bandwidth fraction) per algorithm offered.
    ring = lv.collective_ns + 2 * (n - 1) * hop + topo.link_ns(index, 2 * (n - 1) * shard)
    estimates: dict[str, tuple[float, int | None, float]] = {RING: (ring, None, 1.0)}
    for name, steps, port_bytes in ((ONE_SHOT, 1, (n - 1) * size),
                                    (TWO_SHOT, 2, 2 * (n - 1) * shard)):
        a = lv.allreduce.get(name)
        if a is not None:
            cost = a.ns(n)
            estimates[name] = (cost + steps * hop + topo.link_ns(index, port_bytes) / a.efficiency,
                               cost, a.efficiency)
    best = min(estimates, key=lambda a: (estimates[a][0], (RING, ONE_SHOT, TWO_SHOT).index(a)))
    return best, estimates[best][1], estimates[best][2]


def reduce_scatter(b: GraphBuilder, groups: npt.NDArray[np.int64], ready: Rows, nbytes: Any,
                   layer: int, kind: str = "tp_reducescatter") -> Rows:
    """Ring reduce-scatter: ``nbytes`` in on every chip, nbytes / n out."""
    return _ring_steps(b, groups, ready, nbytes, groups.shape[1] - 1, kind, layer)


def all_gather(b: GraphBuilder, groups: npt.NDArray[np.int64], ready: Rows, nbytes: Any,
               layer: int, kind: str = "tp_allgather") -> Rows:
    """Ring all-gather: nbytes / n in on every chip, ``nbytes`` out."""
    return _ring_steps(b, groups, ready, nbytes, groups.shape[1] - 1, kind, layer)


def all_to_all(b: GraphBuilder, chips: npt.NDArray[np.int64], ready: Rows,
               sends: npt.NDArray[np.int64], layer: int, kind: str) -> Rows:
    """All-to-all, one collective operation (a window of peers in flight: :func:`exchange`).
    ``sends[i, j]`` is the bytes position i sends position j (0: nothing; the diagonal is kept
    locally and not sent).

    Returns, per position, what must be done before its next op: for a position taking part,
    its operation (its fixed cost, its incoming and its outgoing sends: the kernel ends when
    both are done); for a position without traffic, its ``ready`` row.
    """
    n = len(chips)
    if n == 1:
        return ready
    # Destinations in staggered order (i+1, i+2, ...) as real implementations issue them, so
    # the senders do not all hit the same receiver first.
    src = np.repeat(np.arange(n), n - 1)
    dst = (src + np.tile(np.arange(1, n), n)) % n
    nb = sends[src, dst]
    keep = nb > 0
    src, dst, nb = src[keep], dst[keep], nb[keep]
    return exchange(b, chips, src, dst, nb, ready, layer, kind)


def _window_prev(src: npt.NDArray[np.int64], window: int) -> npt.NDArray[np.int64]:
    """Per transfer, the index of the transfer of the same source ``window`` places earlier
    in issue order (-1: none, or ``window`` 0: no window)."""
    m = len(src)
    out = np.full(m, NONE, np.int64)
    if window <= 0 or m == 0:
        return out
    order = np.argsort(src, kind="stable")
    s = src[order]
    starts = np.r_[0, np.flatnonzero(np.diff(s)) + 1]
    counts = np.diff(np.r_[starts, m])
    rank = np.arange(m) - np.repeat(starts, counts)
    has = rank >= window
    out[order[has]] = order[np.flatnonzero(has) - window]
    return out


def exchange(b: GraphBuilder, chips: npt.NDArray[np.int64], src: npt.NDArray[np.int64],
             dst: npt.NDArray[np.int64], nbytes: Any, ready: Rows, layer: int, kind: str, *,
             collective: bool = True, overhead_ns: int | None = None,
             rate: float = 1.0) -> Rows:
    """One operation made of the transfers ``src[k] -> dst[k]`` (positions; ``chips`` maps
    them to chips), issued in the order given, each source with at most the cluster's
    ``all_to_all_peers_in_flight`` of its transfers in flight. Returns rows as
    :func:`all_to_all` does."""
    n = len(chips)
    op = start_op(b, chips, src, dst, ready, kind, layer, collective=collective,
                  overhead_ns=overhead_ns)
    # A rank has transfers in flight to at most w peers: its k-th waits for its (k - w)-th
    # (the cluster's all_to_all_peers_in_flight; ids are consecutive from ``first``).
    first = b.n_tasks
    ahead = _window_prev(src, b.topology.cluster.all_to_all_peers_in_flight)
    prev = np.where(ahead >= 0, first + ahead, NONE)
    ids = b.send(chips[src], chips[dst], nbytes, kind, deps_of(op[src], op[dst], prev),
                 layer=layer, rate=rate)
    # A position taking part: its op (which waited for its ready row) and its sends both ways.
    base = np.full((n, max(ready.shape[1], 1)), NONE, np.int64)
    base[:, :ready.shape[1]] = ready
    part = op >= 0
    base[part] = NONE
    base[part, 0] = op[part]
    return np.concatenate([base, scatter_rows(n, dst, ids), scatter_rows(n, src, ids)], axis=1)
