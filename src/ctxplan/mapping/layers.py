"""Emitting a model's layers: each distinct layer once, repeats as tiled copies.

From some layer k0 on, a model repeats one pattern of p layers (p = 1: every layer MoE after the
leading dense ones, or every layer dense; p = moe_layer_freq otherwise): the same ops with the
same durations on the same resources, each layer waiting only on the layer before it. So the
emitter writes layers 0 .. k0 + 2p - 1 out (the last p of them wait on a period of the same
pattern, as every later period does) and the task graph copies that last period for the rest,
shifting task ids and dependencies (:meth:`ctxplan.sim.TaskGraph.add_tiles`); leftover layers
that do not fill a period are written out. The graph is the same, task for task, as emitting
every layer (tests/mapping/test_mapping_tiling.py compares them); only building it is cheaper.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np

from ctxplan.mapping.builder import GraphBuilder
from ctxplan.mapping.collectives import Rows
from ctxplan.model.spec import ModelSpec

LayerEmitter = Callable[[int, Rows], Rows]
"""emit(layer, ready rows per chip) -> rows per chip after the layer."""


def layer_signature(m: ModelSpec, layer: int) -> Hashable:
    """What makes a layer's ops differ from another's (layers with equal signatures emit the
    same ops with the same durations): its attention kind, its FFN (dense or MoE) and whether
    its experts are hash-routed (DeepSeek-V4's first layers: no router)."""
    return (m.layer_signature(layer), m.is_moe_layer(layer) and m.is_hash_routed(layer))


def layer_period(m: ModelSpec, n_layers: int | None = None, first: int = 0
                 ) -> tuple[int, int]:
    """(k0, p): layers k0, k0 + 1, ... of layers ``first`` .. ``n_layers`` - 1 repeat with
    period p (k0 >= first: a pipeline stage's range, mapping/stages.py).

    Of the periods that hold (the MoE frequency, a hybrid's attention pattern such as
    Qwen3-Next's three linear layers and one full, their multiples), the one that writes the
    fewest layers out (k0 + 2 p); the MoE frequency first on a tie, as before the kinds."""
    n = m.num_hidden_layers if n_layers is None else n_layers
    kinds = [layer_signature(m, j) for j in range(n)]
    p0 = m.moe.moe_layer_freq if m.moe is not None else 1
    start = max(m.moe.first_k_dense_replace if m.moe is not None else 0, first)
    best: tuple[int, int] | None = None
    for p in dict.fromkeys([p0, *range(1, max((n - first) // 2, 1) + 1)]):
        if best is not None and start + 2 * p >= best[0] + 2 * best[1]:
            continue  # cannot write fewer layers than the best so far
        k0 = start
        while k0 < n and any(kinds[j] != kinds[j + p] for j in range(k0, n - p)):
            k0 += 1  # not periodic from k0 (an unusual layer pattern): start later
        if best is None or k0 + 2 * p < best[0] + 2 * best[1]:
            best = (k0, p)
    assert best is not None
    return best


def emit_layers(b: GraphBuilder, m: ModelSpec, n_layers: int, ready: Rows,
                emit: LayerEmitter, *, tile: bool = True, first: int = 0) -> Rows:
    """Emit layers ``first`` .. n_layers - 1 through ``emit``, tiling the repeating period
    when ``tile``; returns the rows after the last layer."""
    k0, p = layer_period(m, n_layers, first)
    written = min(n_layers, k0 + 2 * p) if tile else n_layers
    firsts: list[int] = []
    layer = first
    while layer < written:
        b.flush()  # a tiled range starts at a block boundary
        firsts.append(b.n_tasks)
        ready = emit(layer, ready)
        layer += 1
    times = (n_layers - written) // p
    if times > 0:
        shift = b.tile(firsts[written - p - first], times, p)
        ready = np.where(ready >= 0, ready + shift, ready)
        layer += times * p
    while layer < n_layers:
        ready = emit(layer, ready)
        layer += 1
    return ready
