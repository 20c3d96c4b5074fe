"""Collectives expanded into point-to-point transfers on the topology.

Nothing here assumes a collective's cost: each algorithm is written out as the sends it makes
and the dependencies between them, and the kernel measures the time (so contention on shared
ports and per-hop latency are simulated). Every function takes, per participating chip, a row of
the tasks after which that chip's input is ready (a 2-D array, one row per position, padded with
-1), and returns, per position, a row of tasks after which that chip's output is ready.

Emission order is priority, but only between tasks that hold a common resource. Chips of
different TP groups share no link, so the rings of all groups are emitted step by step together;
the schedule is the one of emitting group after group.

Algorithms (the usual NCCL-style choices; see docs/mapping.md):
* ring all-reduce: reduce-scatter then all-gather around the ring, 2 * (n - 1) steps, each
  step sending nbytes / n to the next chip; a step waits for the previous step's receive.
* ring reduce-scatter / all-gather: the two halves of the above.
* all-to-all: one-shot, every ordered pair sends directly (its bytes given by a matrix).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ctxplan.mapping.builder import NONE, GraphBuilder, IdArray, deps_of

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


def _ring_steps(b: GraphBuilder, groups: npt.NDArray[np.int64], ready: Rows, nbytes: Any,
                n_steps: int, kind: str, layer: int) -> Rows:
    """Ring steps in every group at once. ``groups`` is (G, n): G rings of n chips (chips of
    different groups hold different links, so their sends never contend); ``ready`` and the
    result have one row per chip of ``groups.ravel()``; ``nbytes`` is per group (or one for
    all)."""
    g, n = groups.shape
    if n == 1:
        return ready
    chunk = np.repeat(-(-np.broadcast_to(np.asarray(nbytes, np.int64), (g,)) // n), n)
    src = groups.ravel()
    dst = np.roll(groups, -1, axis=1).ravel()   # position i sends to i + 1
    last = ready            # per position: after these, its next send may start
    for step in range(n_steps):
        # Position i sends what it has (its state, and what came from i - 1 last step).
        sends = b.send(src, dst, chunk, kind, last, layer=layer, step=step)
        # Next step, position i needs its own send done (buffer free) and i - 1's arrived.
        last = deps_of(sends, np.roll(sends.reshape(g, n), 1, axis=1).ravel())
    return last


def all_reduce(b: GraphBuilder, groups: npt.NDArray[np.int64], ready: Rows, nbytes: Any,
               layer: int, kind: str = "tp_allreduce") -> Rows:
    """Ring all-reduce of ``nbytes`` held on every chip, in each group (row) of ``groups``."""
    return _ring_steps(b, groups, ready, nbytes, 2 * (groups.shape[1] - 1), kind, layer)


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
    """One-shot all-to-all. ``sends[i, j]`` is the bytes position i sends position j (0:
    nothing; the diagonal is kept locally and not sent).

    Returns, per position j, what j must wait for to hold its whole input: its own ready tasks
    (for the part it keeps) and the incoming sends.
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
    ids = b.send(chips[src], chips[dst], nb, kind, ready[src], layer=layer)
    return np.concatenate([ready, scatter_rows(n, dst, ids)], axis=1)
