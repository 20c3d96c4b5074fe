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
  all-gather); across hosts, where each host holds as many of the group's ranks, the
  hierarchical all-reduce (a ring reduce-scatter in each host, a ring all-reduce of the shard
  between the hosts on every rail at once, a ring all-gather in each host).
* ring reduce-scatter / all-gather: the two halves of the ring (across hosts too).
* all-to-all: every ordered pair sends directly (its bytes given by a matrix), each rank to its
  peers in staggered order with at most the cluster's ``all_to_all_peers_in_flight`` transfers
  in flight (its k-th transfer waits for its (k - w)-th to arrive).
* SendRecv: each position sends one message to a peer and receives one (a ring step).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ctxplan.hardware.cluster import COMBINE, DISPATCH, HIERARCHICAL, ONE_SHOT, RING, TWO_SHOT
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
    chunk = -(-np.broadcast_to(np.asarray(nbytes, np.int64), (g,)) // n)
    src = groups.ravel()
    rings = np.arange(g * n).reshape(g, n)
    nxt = np.roll(rings, -1, axis=1).ravel()  # position i -> i + 1
    op = start_op(b, src, np.arange(g * n), nxt, ready, kind, layer, collective=True)
    last = deps_of(op, op[nxt])   # both ends have started the operation
    return _ring_sends(b, src, rings, last, chunk, n_steps, kind, layer)


def _ring_sends(b: GraphBuilder, chips: npt.NDArray[np.int64], rings: npt.NDArray[np.int64],
                last: Rows, chunk: npt.NDArray[np.int64], n_steps: int, kind: str, layer: int,
                first_step: int = 0) -> Rows:
    """``n_steps`` ring steps in every ring of ``rings`` at once: a (R, r) array of positions
    (``chips`` maps them to chips; every position in at most one ring), ring k sending
    ``chunk[k]`` bytes per step. ``last`` holds per position what its first send waits for;
    returns it updated (positions in no ring keep theirs). A step's send waits for the
    previous step's send of its position (buffer free) and its predecessor's (arrived)."""
    k, r = rings.shape
    if r == 1 or n_steps == 0:
        return last
    src = rings.ravel()
    dst = np.roll(rings, -1, axis=1).ravel()
    # Index (in ``src`` order) of the send arriving at each ring position.
    prev = np.roll(np.arange(k * r).reshape(k, r), 1, axis=1).ravel()
    size = np.repeat(np.asarray(chunk, np.int64), r)
    identity = bool(np.array_equal(src, np.arange(len(last))))
    for step in range(n_steps):
        deps = last if identity else last[src]
        sends = b.send(chips[src], chips[dst], size, kind, deps, layer=layer,
                       step=first_step + step)
        got = deps_of(sends, sends[prev])
        if identity:
            last = got
        else:
            out = np.full((len(last), max(last.shape[1], 2)), NONE, np.int64)
            out[:, :last.shape[1]] = last
            out[src] = NONE
            out[src, :2] = got
            last = out
    return last


def all_reduce(b: GraphBuilder, groups: npt.NDArray[np.int64], ready: Rows, nbytes: Any,
               layer: int, kind: str = "tp_allreduce") -> Rows:
    """All-reduce of ``nbytes`` held on every chip, in each group (row) of ``groups``, by the
    algorithm the library would pick for that size (:func:`allreduce_algorithm`): the ring,
    or where the level offers them one-shot or two-shot, or across the groups of a level
    (hosts) the hierarchical all-reduce (:func:`_hierarchical`)."""
    g, n = groups.shape
    if n == 1:
        return ready
    algorithm, cost, rate = allreduce_algorithm(b, groups, nbytes)
    if algorithm == RING:
        return _ring_steps(b, groups, ready, nbytes, 2 * (n - 1), kind, layer)
    if algorithm == HIERARCHICAL:
        split = hierarchy(b, groups)
        assert split is not None
        return _hierarchical(b, groups, ready, nbytes, split[1], split[2], kind, layer)
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


def hierarchy(b: GraphBuilder, groups: npt.NDArray[np.int64]
              ) -> tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """How groups like ``groups`` (G, n) split across the outermost level they span: (that
    level's index, the intra rings, the inter rings), or None where they do not split evenly.

    Every group must span h > 1 groups of the level below (hosts), m > 1 of its ranks in each;
    the intra rings are the (G * h, m) positions of each host's ranks (in the group's order),
    the inter rings the (G * m, h) positions of the j-th rank of every host (rail j: each rank's
    own NIC, the rails in parallel). Positions index ``groups.ravel()``."""
    g, n = groups.shape
    top = int(b.topology.levels_of(np.repeat(groups[:, :1], n - 1, axis=1).ravel(),
                                   groups[:, 1:].ravel()).max())
    if top == 0 or n < 4:
        return None
    below = b.topology.cluster.levels[top - 1].chips_per_group
    domain = groups // below
    order = np.argsort(domain, axis=1, kind="stable")
    dom = np.take_along_axis(domain, order, axis=1)
    starts = np.diff(dom, axis=1) != 0
    h = int(starts[0].sum()) + 1
    if h < 2 or n % h or not (starts.sum(axis=1) == h - 1).all():
        return None
    m = n // h
    if m < 2:
        return None
    # Every host holds m ranks: the sorted domains run in blocks of m.
    if not (dom.reshape(g, h, m) == dom.reshape(g, h, m)[:, :, :1]).all():
        return None
    pos = order + (np.arange(g) * n)[:, None]           # positions sorted by host
    intra = pos.reshape(g * h, m)
    inter = pos.reshape(g, h, m).transpose(0, 2, 1).reshape(g * m, h)
    return top, intra, inter


def _hierarchical(b: GraphBuilder, groups: npt.NDArray[np.int64], ready: Rows, nbytes: Any,
                  intra: npt.NDArray[np.int64], inter: npt.NDArray[np.int64], kind: str,
                  layer: int) -> Rows:
    """NCCL's hierarchical all-reduce across hosts, one operation: a ring reduce-scatter in
    each host (m - 1 steps of ceil(S / m)), an all-reduce of that shard between the hosts by
    a ring per rail, all rails at once (2 (h - 1) steps of ceil(ceil(S / m) / h)), and a ring
    all-gather in each host (m - 1 steps of ceil(S / m)). Every rank pays the fixed cost of
    the costliest level it talks over (the inter-host one) once."""
    g, n = groups.shape
    m, h = intra.shape[1], inter.shape[1]
    chips = groups.ravel()
    size = np.broadcast_to(np.asarray(nbytes, np.int64), (g,))
    shard = -(-size // m)
    piece = -(-shard // h)
    intra_next = np.roll(intra, -1, axis=1)
    src = np.concatenate([intra.ravel(), inter.ravel()])
    dst = np.concatenate([intra_next.ravel(), np.roll(inter, -1, axis=1).ravel()])
    op = start_op(b, chips, src, dst, ready, kind, layer, collective=True)
    nxt = np.empty(g * n, np.int64)
    nxt[intra.ravel()] = intra_next.ravel()
    last = deps_of(op, op[nxt])   # both ends of the first ring step have started
    intra_chunk = np.repeat(shard, h)           # intra ring k is of group k // h
    last = _ring_sends(b, chips, intra, last, intra_chunk, m - 1, kind, layer)
    last = _ring_sends(b, chips, inter, last, np.repeat(piece, m), 2 * (h - 1), kind, layer,
                       first_step=m - 1)
    return _ring_sends(b, chips, intra, last, intra_chunk, m - 1, kind, layer,
                       first_step=m - 1 + 2 * (h - 1))


def allreduce_algorithm(b: GraphBuilder, groups: npt.NDArray[np.int64],
                        nbytes: Any) -> tuple[str, int | None, float]:
    """The all-reduce algorithm for groups like ``groups`` (G, n) and a message of ``nbytes``
    (the largest group's), its fixed cost (None: the level's collective figure) and the
    fraction of the link's bandwidth its transfers reach: the one with the least estimated
    time, as NCCL's tuner and the engines' custom all-reduce pick by
    size (latency-bandwidth estimates: the fixed cost, one hop per step, the bytes each port
    carries). One-shot and two-shot only where every pair of a group talks at one level that
    offers them (inside an NVLink domain); across hosts the flat ring or the hierarchical
    all-reduce (:func:`hierarchy`: each host holding as many of the group's ranks); the ring
    otherwise and on a tie."""
    n = groups.shape[1]
    topo = b.topology
    level = topo.levels_of(np.repeat(groups[:, :1], n - 1, axis=1).ravel(),
                           groups[:, 1:].ravel())
    index = int(level.max())
    lv = topo.cluster.levels[index]
    size = float(np.max(np.asarray(nbytes, np.float64)))
    shard = -(-size // n)
    ring = lv.collective_ns + 2 * (n - 1) * lv.latency_ns + topo.link_ns(index,
                                                                         2 * (n - 1) * shard)
    # (estimated ns, fixed cost, bandwidth fraction) per algorithm offered.
    estimates: dict[str, tuple[float, int | None, float]] = {RING: (ring, None, 1.0)}
    if int(level.min()) != index:
        split = hierarchy(b, groups)
        if split is not None:
            top, intra, inter = split
            m, h = intra.shape[1], inter.shape[1]
            inner = int(topo.levels_of(groups.ravel()[intra.ravel()],
                                       groups.ravel()[np.roll(intra, -1, axis=1).ravel()]).max())
            hop_in = topo.cluster.levels[inner].latency_ns
            part = -(-size // m)
            piece = -(-part // h)
            estimates[HIERARCHICAL] = (
                lv.collective_ns + 2 * (m - 1) * hop_in + 2 * (h - 1) * lv.latency_ns
                + topo.link_ns(inner, 2 * (m - 1) * part)
                + topo.link_ns(top, 2 * (h - 1) * piece), None, 1.0)
    elif lv.allreduce:
        hop = lv.latency_ns
        for name, steps, port_bytes in ((ONE_SHOT, 1, (n - 1) * size),
                                        (TWO_SHOT, 2, 2 * (n - 1) * shard)):
            a = lv.allreduce.get(name)
            if a is not None:
                cost = a.ns(n)
                estimates[name] = (cost + steps * hop
                                   + topo.link_ns(index, port_bytes) / a.efficiency,
                                   cost, a.efficiency)
    rank = (RING, ONE_SHOT, TWO_SHOT, HIERARCHICAL)
    best = min(estimates, key=lambda a: (estimates[a][0], rank.index(a)))
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
