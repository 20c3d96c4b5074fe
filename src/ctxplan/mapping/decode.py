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
from ctxplan.mapping.builder import NONE, GraphBuilder, deps_of
from ctxplan.mapping.collectives import Rows
from ctxplan.mapping.decode_base import DecodePool, decode_pool
from ctxplan.mapping.ffn import emit_ffn
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.layers import emit_layers
from ctxplan.mapping.layout import Layout, split_even
from ctxplan.mapping.memory import decode_layer_activations, kv_bytes_by_rank, layer_type_counts
from ctxplan.mapping.pipeline import emit_handover
from ctxplan.model.linear import lm_head_linear, mtp_extra_linears
from ctxplan.model.spec import ModelSpec

MICRO_BATCH_BARRIER = "micro_batch_barrier"   # a stage finishes one micro-batch, then the next


def emit_decode(b: GraphBuilder, m: ModelSpec, lay: Layout, n_layers: int | None = None,
                *, tile: bool = True) -> None:
    """Emit the phase's graph; ``n_layers`` emits only the first n layers (then the LM head),
    for the periodic-layer shortcut of :mod:`ctxplan.evaluate`. ``tile=False`` writes every
    layer out instead of copying repeats (the same graph; for tests). With pipeline stages
    (``lay.pp`` > 1): :func:`_emit_pipeline`."""
    n_layers = m.num_hidden_layers if n_layers is None else n_layers
    if lay.pp > 1:
        assert n_layers == m.num_hidden_layers, "a pipeline is simulated whole"
        _emit_pipeline(b, m, lay, tile)
        return
    chips = np.arange(lay.n_chips)
    # The KV cache is there from the start (the handoff brought it).
    b.buffer(chips, np.repeat(kv_bytes_by_rank(m, lay), lay.tp), -1, kv=True)
    start = np.full((lay.n_chips, 0), NONE, np.int64)
    _emit_pass(b, m, lay, decode_pool(m, lay), range(n_layers), start, tile, head=True)


def _emit_pass(b: GraphBuilder, m: ModelSpec, lay: Layout, pool: DecodePool, layers: range,
               prev: Rows, tile: bool, *, head: bool) -> Rows:
    """One decode step of ``lay``'s batch through ``layers``, then (``head``) the LM head and
    the drafts; returns the rows after the last layer. A layer's hidden states and the partial
    outputs gathered for its merge live while the layer runs."""
    emitters = {t: kinds.runs_as(m, t, lay.context_length).decode_emitter(b, m, lay, pool, t)
                for t in m.layer_type_counts}
    chips = np.arange(lay.n_chips)
    live = decode_layer_activations(m, lay)

    def layer_ops(layer: int, prev: Rows) -> Rows:
        mark = b.n_tasks
        ready = emitters[m.layer_type(layer)](layer, prev)
        first = b.first_task_since(mark)
        out = emit_ffn(b, m, lay, layer, pool.tokens, ready)
        b.buffer(chips, live, first, out)
        return out

    prev = emit_layers(b, m, layers.stop, prev, layer_ops, tile=tile, first=layers.start)
    if head:
        head_linears = [lm_head_linear(m)]
        logits = b.compute(pool.home_chips, ops.LM_HEAD,
                           [ops.linear_work(head_linears, pool.home_tokens, lay, "bf16")],
                           prev[pool.home_chips], layer=layers.stop)
        if pool.q > 1:
            _emit_drafts(b, m, lay, pool, layers.stop, pool.home_rows(prev, logits))
    return prev


def micro_batches(lay: Layout) -> list[int]:
    """Sequences of each decode micro-batch: the batch over min(pp, batch) micro-batches."""
    return split_even(lay.batch, min(lay.pp, lay.batch))


def _emit_pipeline(b: GraphBuilder, m: ModelSpec, lay: Layout, tile: bool) -> None:
    """Pipeline-parallel decode (docs/mapping.md, "Pipeline parallelism"): the batch in
    min(pp, batch) micro-batches; micro-batch j passes every stage in turn (stage s once it has
    finished micro-batch j - 1 and stage s - 1's activations of j have arrived,
    mapping/pipeline.py), so the micro-batches interleave and the stages stay busy, while one
    sequence's step is the sum of the stage times and the hops. Each stage holds its layers'
    KV of every sequence from the start. The task ids of each micro-batch are recorded in
    ``b.micro_batches`` (a sequence's TPOT is its micro-batch's span)."""
    w = lay.stage_chips
    stage = lay.stage_layout()
    ranges = lay.stage_ranges(m.num_hidden_layers)
    for s, layers in enumerate(ranges):
        with b.stage(s * w, w):
            counts = layer_type_counts(m, layers)
            b.buffer(np.arange(w), np.repeat(kv_bytes_by_rank(m, stage, counts), stage.tp), -1,
                     kv=True)
    after = [np.full((w, 0), NONE, np.int64) for _ in ranges]
    for j, size in enumerate(micro_batches(lay)):
        mb = replace(stage, batch=size)
        pool = decode_pool(m, mb)
        first = b.n_tasks
        incoming: Rows | None = None
        for s, layers in enumerate(ranges):
            with b.stage(s * w, w):
                prev = after[s]
                if j:
                    barrier = b.sync(np.array([0]), MICRO_BATCH_BARRIER,
                                     deps_of(np.unique(prev[prev >= 0]).reshape(1, -1)))
                    prev = np.full((w, 1), barrier[0], np.int64)
                if incoming is not None:
                    prev = deps_of(prev, incoming)
                after[s] = _emit_pass(b, m, mb, pool, layers, prev, tile,
                                      head=s == len(ranges) - 1)
            if s < len(ranges) - 1:
                incoming = emit_handover(b, m, mb, s, after[s], pool.counts * pool.q,
                                         layers.stop - 1)
        b.micro_batches.append((first, b.n_tasks))


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
