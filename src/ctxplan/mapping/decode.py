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

from dataclasses import replace

import numpy as np

from ctxplan.mapping import kinds, ops
from ctxplan.mapping.builder import NONE, GraphBuilder
from ctxplan.mapping.collectives import Rows
from ctxplan.mapping.decode_base import DecodePool, decode_pool
from ctxplan.mapping.ffn import emit_ffn
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.layers import emit_layers
from ctxplan.mapping.layout import Layout
from ctxplan.mapping.memory import decode_layer_activations, kv_bytes_by_rank
from ctxplan.model.linear import lm_head_linear, mtp_extra_linears
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

    chips = np.arange(lay.n_chips)
    # The KV cache is there from the start (the handoff brought it); a layer's hidden states
    # and the partial outputs gathered for its merge live while the layer runs.
    b.buffer(chips, np.repeat(kv_bytes_by_rank(m, lay), lay.tp), -1, kv=True)
    live = decode_layer_activations(m, lay)

    def layer_ops(layer: int, prev: Rows) -> Rows:
        mark = b.n_tasks
        ready = emitters[m.layer_type(layer)](layer, prev)
        first = b.first_task_since(mark)
        out = emit_ffn(b, m, lay, layer, pool.tokens, ready)
        b.buffer(chips, live, first, out)
        return out

    prev = emit_layers(b, m, n_layers, np.full((lay.n_chips, 0), NONE, np.int64), layer_ops,
                       tile=tile)
    head = [lm_head_linear(m)]
    logits = b.compute(pool.home_chips, ops.LM_HEAD,
                       [ops.linear_work(head, pool.home_tokens, lay, "bf16")],
                       prev[pool.home_chips], layer=n_layers)
    if pool.q > 1:
        _emit_drafts(b, m, lay, pool, n_layers, pool.home_rows(prev, logits))


def _emit_drafts(b: GraphBuilder, m: ModelSpec, lay: Layout, pool: DecodePool, layer: int,
                 prev: Rows) -> None:
    """Speculative decoding with the model's MTP layers (``mtp_speculation``; docs/mapping.md):
    after the target model's logits, each MTP layer in turn drafts the next token of every
    sequence, one token each: its eh_proj over the last hidden state and the sampled token's
    embedding (with its norms), a decoder layer of its kind over its own window (on the home)
    with the last layer's MoE, and the shared LM head. Their ops carry the layer number after
    the last (outside the model's layers, as the LM head)."""
    one = replace(pool, q=1, q_msg=pool.q_msg // pool.q, o_msg=pool.o_msg // pool.q)
    home = pool.home_chips
    w = lay.precision.attention_weights
    for kind in m.mtp_layer_types:
        proj = b.compute(home, ops.MTP_PROJ,
                         [ops.residual_work(m, one.home_tokens, lay),
                          ops.linear_work(mtp_extra_linears(m), one.home_tokens, lay, w)],
                         prev[home], layer=layer)
        emit = kinds.runs_as(m, kind, lay.context_length).decode_emitter(b, m, lay, one, kind)
        ready = emit(layer, one.home_rows(prev, proj))
        prev = emit_ffn(b, m, lay, layer, one.tokens, ready, ffn_of=m.num_hidden_layers - 1)
        draft = b.compute(home, ops.LM_HEAD,
                          [ops.linear_work([lm_head_linear(m)], one.home_tokens, lay, "bf16")],
                          prev[home], layer=layer)
        prev = one.home_rows(prev, draft)


def decode_comm(m: ModelSpec, lay: Layout) -> list[KindComm]:
    """Per attention kind of the model: its decode pattern, sequential steps, sends per layer
    and closed-form bytes over its layers."""
    return [kinds.runs_as(m, layer_type, lay.context_length).decode_comm(m, lay, layer_type, n)
            for layer_type, n in m.layer_type_counts.items()]
