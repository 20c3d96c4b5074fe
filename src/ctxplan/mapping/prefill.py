"""Prefill with context parallelism, per attention kind (docs/mapping.md, "Prefill").

Per layer, on every CP rank (and, with TP, on each chip of its TP group): the attention half of
the layer's kind, then the FFN half (dense TP or MoE EP, :mod:`ctxplan.mapping.ffn`). The
new tokens sit in 2 Np chunks, rank i holding chunks i and 2 Np - 1 - i; a cached prefix sits
where its own prefill left it (:mod:`ctxplan.mapping.placement`). The attention half is the
``prefill_emitter`` of the kind the layer runs as (:mod:`ctxplan.mapping.kinds`): the pass-KV
or pass-Q ring of full attention, the halo exchange of sliding-window and chunked layers, the
pass-KV ring with the indexer keys of DSA, the state chain of linear attention. The layer after
waits only on what each chip needs, so layers overlap where data allows.
"""

from __future__ import annotations

import numpy as np

from ctxplan.mapping import kinds, ops
from ctxplan.mapping.builder import NONE, GraphBuilder
from ctxplan.mapping.collectives import Rows, rows_of
from ctxplan.mapping.ffn import emit_ffn
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.layers import emit_layers
from ctxplan.mapping.layout import PREFILL_RINGS, Layout
from ctxplan.mapping.prefill_base import AttentionEmitter, prefill_setup
from ctxplan.model.linear import lm_head_linear
from ctxplan.model.spec import ModelSpec


def emit_prefill(b: GraphBuilder, m: ModelSpec, lay: Layout, n_layers: int | None = None,
                 *, tile: bool = True) -> None:
    """Emit the phase's graph; ``n_layers`` emits only the first n layers (then the LM head),
    for the periodic-layer shortcut of :mod:`ctxplan.evaluate`. ``tile=False`` writes every
    layer out instead of copying repeats (the same graph; for tests)."""
    n_layers = m.num_hidden_layers if n_layers is None else n_layers
    setup = prefill_setup(m, lay)
    emitters: dict[str, AttentionEmitter] = {
        layer_type: kinds.runs_as(m, layer_type, lay.context_length).prefill_emitter(
            b, setup, layer_type)
        for layer_type in m.layer_type_counts}

    def layer_ops(layer: int, prev: Rows) -> Rows:
        o_ready = emitters[m.layer_type(layer)](layer, prev)
        return emit_ffn(b, m, lay, layer, setup.tokens, rows_of(o_ready))

    prev = emit_layers(b, m, n_layers, np.full((lay.n_chips, 0), NONE, np.int64), layer_ops,
                       tile=tile)

    # The first output token: LM head on the last position of each sequence, which rank 0
    # holds (new chunk 2 * Np - 1).
    first = np.arange(lay.tp)  # the chips of rank 0
    b.compute(first, ops.LM_HEAD, [ops.linear_work([lm_head_linear(m)], lay.batch, lay,
                                                   "bf16")], prev[first], layer=n_layers)


def prefill_comm(m: ModelSpec, lay: Layout) -> list[KindComm]:
    """Per attention kind of the model: its pattern, steps, sends and closed-form bytes."""
    return [kinds.runs_as(m, layer_type, lay.context_length).prefill_comm(m, lay, layer_type, n)
            for layer_type, n in m.layer_type_counts.items()]


def rings_that_apply(m: ModelSpec, lay: Layout) -> tuple[str, ...]:
    """The prefill ring values some layer of ``m`` runs (in the order of PREFILL_RINGS):
    what ``prefill_ring = auto`` simulates; () when the option applies to no layer."""
    known = {ring for layer_type in m.layer_type_counts
             for ring in kinds.runs_as(m, layer_type, lay.context_length).rings}
    return tuple(ring for ring in PREFILL_RINGS if ring in known)
