"""Collectives expanded into point-to-point transfers on the topology.

Nothing here assumes a collective's cost: each algorithm is written out as the sends it makes
and the dependencies between them, and the kernel measures the time (so contention on shared
ports and per-hop latency are simulated). Every function takes, per participating chip, the
task after which that chip's input is ready, and returns, per chip, a task after which that
chip's output is ready.

Algorithms (the usual NCCL-style choices; see docs/mapping.md):
* ring all-reduce: reduce-scatter then all-gather around the ring, 2 * (n - 1) steps, each
  step sending nbytes / n to the next chip; a step waits for the previous step's receive.
* ring reduce-scatter / all-gather: the two halves of the above.
* all-to-all: one-shot, every ordered pair sends directly (its bytes given by a matrix).
* gather / broadcast: one-shot, the root receives from / sends to every other chip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ctxplan.mapping.builder import GraphBuilder

Deps = tuple[int, ...]
"""The tasks after which something is ready (a join without a join task)."""


def _ring_steps(
    b: GraphBuilder,
    chips: Sequence[int],
    ready: Sequence[Deps],
    nbytes: int,
    n_steps: int,
    kind: str,
    layer: int,
) -> list[Deps]:
    n = len(chips)
    if n == 1:
        return list(ready)
    chunk = -(-nbytes // n)  # ceil: each step moves one of n chunks
    last = list(ready)       # per position: after these, its next send may start
    for step in range(n_steps):
        # Position i sends what it has (its state, and what came from i - 1 last step).
        sends = [
            b.send(chips[i], chips[(i + 1) % n], chunk, kind, last[i], layer=layer, step=step)
            for i in range(n)
        ]
        # Next step, position i needs its own send done (buffer free) and i - 1's arrived.
        last = [(sends[i], sends[(i - 1) % n]) for i in range(n)]
    return last


def all_reduce(b: GraphBuilder, chips: Sequence[int], ready: Sequence[Deps], nbytes: int,
               layer: int, kind: str = "tp_allreduce") -> list[Deps]:
    """Ring all-reduce of ``nbytes`` held on every chip."""
    return _ring_steps(b, chips, ready, nbytes, 2 * (len(chips) - 1), kind, layer)


def reduce_scatter(b: GraphBuilder, chips: Sequence[int], ready: Sequence[Deps], nbytes: int,
                   layer: int, kind: str = "tp_reducescatter") -> list[Deps]:
    """Ring reduce-scatter: ``nbytes`` in on every chip, nbytes / n out."""
    return _ring_steps(b, chips, ready, nbytes, len(chips) - 1, kind, layer)


def all_gather(b: GraphBuilder, chips: Sequence[int], ready: Sequence[Deps], nbytes: int,
               layer: int, kind: str = "tp_allgather") -> list[Deps]:
    """Ring all-gather: nbytes / n in on every chip, ``nbytes`` out."""
    return _ring_steps(b, chips, ready, nbytes, len(chips) - 1, kind, layer)


def all_to_all(
    b: GraphBuilder,
    chips: Sequence[int],
    ready: Sequence[Deps],
    sends: Sequence[Mapping[int, int]],
    layer: int,
    kind: str,
) -> list[Deps]:
    """One-shot all-to-all. ``sends[i]`` maps position j to the bytes position i sends it
    (absent or 0: nothing; i's entry for itself is kept locally and not sent).

    Returns, per position j, what j must wait for to hold its whole input: the incoming sends
    and its own ready tasks (for the part it keeps).
    """
    n = len(chips)
    incoming: list[list[int]] = [list(ready[j]) for j in range(n)]
    for i in range(n):
        # Destinations in staggered order (i+1, i+2, ...) as real implementations issue them,
        # so the senders do not all hit the same receiver first.
        for _, j in sorted(((j - i) % n, j) for j in sends[i]):
            nb = sends[i][j]
            if j != i and nb > 0:
                incoming[j].append(b.send(chips[i], chips[j], nb, kind, ready[i], layer=layer))
    return [tuple(x) for x in incoming]


def gather(b: GraphBuilder, root: int, sources: Sequence[int], ready: Sequence[Deps],
           nbytes: int, layer: int, kind: str) -> Deps:
    """One-shot gather to ``root``: every source but the root sends ``nbytes``.

    Returns what the root must wait for (the sends and the root's own ready tasks)."""
    out: list[int] = []
    for src, r in zip(sources, ready, strict=True):
        if src == root:
            out.extend(r)
        else:
            out.append(b.send(src, root, nbytes, kind, r, layer=layer))
    return tuple(out)


def broadcast(b: GraphBuilder, root: int, root_ready: Deps, dests: Sequence[int], nbytes: int,
              layer: int, kind: str) -> dict[int, Deps]:
    """One-shot broadcast from ``root``: per destination chip, what it waits for."""
    return {
        d: root_ready if d == root else (b.send(root, d, nbytes, kind, root_ready, layer=layer),)
        for d in dests
    }
