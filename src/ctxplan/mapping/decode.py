"""Decode with the KV sharded over Nd ranks, per attention kind (docs/mapping.md, "Decode").

Sequence k of the batch has its home on rank k mod Nd (round robin). Each rank holds a
contiguous S / Nd share of every sequence's growing KV. Per layer, the attention half of the
layer's kind (the ``decode_emitter`` of the kind it runs as, :mod:`ctxplan.mapping.kinds`), then
the FFN half (dense on the home, MoE with EP over the whole pool):

* full attention: pass-Q (ring or broadcast), partial attention over each shard, the All2All of
  partial outputs and the merge (:mod:`ctxplan.mapping.kinds.full_decode`); a sliding-window or
  chunked layer whose window holds the whole context is full attention and runs as such;
* sliding window / chunked (window shorter than S) and linear attention: the window's KV or the
  state lives on the home, so the layer runs there and nothing moves
  (:mod:`ctxplan.mapping.kinds.window`, :mod:`ctxplan.mapping.kinds.linear`);
* DSA: the queries to every shard, each shard's indexer scores and local top-k, the candidates
  to the home, the exact global selection, then sparse partial attention and the merge
  (:mod:`ctxplan.mapping.kinds.dsa_decode`).

Every collective or SendRecv pays its operation's fixed cost (mapping/collectives.py).
"""

from __future__ import annotations

import numpy as np

from ctxplan.mapping import kinds, ops
from ctxplan.mapping.builder import NONE, GraphBuilder
from ctxplan.mapping.collectives import Rows
from ctxplan.mapping.decode_base import decode_pool
from ctxplan.mapping.ffn import emit_ffn
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.layers import emit_layers
from ctxplan.mapping.layout import Layout
from ctxplan.model.linear import lm_head_linear
from ctxplan.model.spec import ModelSpec


def emit_decode(b: GraphBuilder, m: ModelSpec, lay: Layout, n_layers: int | None = None,
                *, tile: bool = True) -> None:
    """Emit the phase's graph; ``n_layers`` emits only the first n layers (then the LM head),
    for the periodic-layer shortcut of :mod:`ctxplan.evaluate`. ``tile=False`` writes every
    layer out instead of copying repeats (the same graph; for tests)."""
    n_layers = m.num_hidden_layers if n_layers is None else n_layers
    pool = decode_pool(m, lay)
    emitters = {t: kinds.runs_as(m, t, lay.context_length).decode_emitter(b, m, lay, pool, t)
                for t in m.layer_type_counts}

    def layer_ops(layer: int, prev: Rows) -> Rows:
        ready = emitters[m.layer_type(layer)](layer, prev)
        return emit_ffn(b, m, lay, layer, pool.counts, ready)

    prev = emit_layers(b, m, n_layers, np.full((lay.n_chips, 0), NONE, np.int64), layer_ops,
                       tile=tile)
    head = [lm_head_linear(m)]
    b.compute(pool.home_chips, ops.LM_HEAD,
              [ops.linear_work(head, pool.home_seqs, lay, "bf16")], prev[pool.home_chips],
              layer=n_layers)


def decode_comm(m: ModelSpec, lay: Layout) -> list[KindComm]:
    """Per attention kind of the model: its decode pattern, sequential steps, sends per layer
    and closed-form bytes over its layers."""
    return [kinds.runs_as(m, layer_type, lay.context_length).decode_comm(m, lay, layer_type, n)
            for layer_type, n in m.layer_type_counts.items()]
