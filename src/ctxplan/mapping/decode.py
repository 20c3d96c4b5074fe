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

from collections.abc import Callable
from dataclasses import dataclass, replace

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
    (``lay.pp`` > 1): :func:`_emit_pipeline`; with DP attention (``lay.dp`` > 1) each DP rank's
    CP group runs its own sequences' attention (:class:`DPGroups`)."""
    n_layers = m.num_hidden_layers if n_layers is None else n_layers
    if lay.pp > 1:
        assert n_layers == m.num_hidden_layers, "a pipeline is simulated whole"
        _emit_pipeline(b, m, lay, tile)
        return
    chips = np.arange(lay.n_chips)
    # The KV cache is there from the start (the handoff brought it).
    b.buffer(chips, np.repeat(kv_bytes_by_rank(m, lay), lay.tp), -1, kv=True)
    start = np.full((lay.n_chips, 0), NONE, np.int64)
    _emit_pass(b, m, lay, DPGroups.of(m, lay), range(n_layers), start, tile, head=True)


@dataclass(frozen=True)
class DPGroups:
    """The attention groups of a decode pool: one CP group (``dp`` = 1, the whole pool), or
    with DP attention one per DP rank, group g on chips [g W, (g + 1) W). What runs per
    sequence (its projections, attention, merge, LM head, drafts) runs inside its group as if
    the group were the pool (``GraphBuilder.stage``); the FFN half runs over the whole pool,
    fed by every group's home ranks, its MoE all-to-all over every chip."""

    lay: Layout                       # the whole pool's layout
    groups: tuple[Layout, ...]        # each DP rank's attention layout (dp = 1)
    pools: tuple[DecodePool, ...]     # and its arrays

    @staticmethod
    def of(m: ModelSpec, lay: Layout) -> DPGroups:
        groups = tuple(lay.dp_groups())
        return DPGroups(lay, groups, tuple(decode_pool(m, g) for g in groups))

    @property
    def width(self) -> int:
        return self.lay.group_chips

    @property
    def ffn_layout(self) -> Layout:
        """The layout the FFN half sees: every DP rank's CP ranks as ranks of one pool."""
        lay = self.lay
        return lay if lay.dp == 1 else replace(lay, cp=lay.dp * lay.cp, dp=1)

    def rank_tokens(self, pools: tuple[DecodePool, ...] | None = None) -> np.ndarray:
        """Tokens per rank of the whole pool (what the FFN half is fed)."""
        return np.concatenate([p.tokens for p in (pools or self.pools)])

    def each(self, b: GraphBuilder, emit: Callable[[int, Layout, DecodePool, Rows], Rows],
             rows: Rows, pools: tuple[DecodePool, ...] | None = None) -> Rows:
        """``emit(g, group layout, group pool, the group's rows)`` in each group, its chip
        arguments the group's own; returns the rows per chip of the whole pool."""
        pools = pools or self.pools
        if self.lay.dp == 1:
            return emit(0, self.groups[0], pools[0], rows)
        w = self.width
        outs = []
        for g, (sub, pool) in enumerate(zip(self.groups, pools, strict=True)):
            with b.stage(g * w, w):
                outs.append(emit(g, sub, pool, rows[g * w:(g + 1) * w]))
        width = max(max(o.shape[1] for o in outs), 1)
        out = np.full((len(rows), width), NONE, np.int64)
        for g, o in enumerate(outs):
            out[g * w:(g + 1) * w, :o.shape[1]] = o
        return out


def _emit_pass(b: GraphBuilder, m: ModelSpec, lay: Layout, groups: DPGroups, layers: range,
               prev: Rows, tile: bool, *, head: bool) -> Rows:
    """One decode step of ``lay``'s batch through ``layers``, then (``head``) the LM head and
    the drafts; returns the rows after the last layer. A layer's hidden states and the partial
    outputs gathered for its merge live while the layer runs."""
    # One emitter per kind and distinct group layout (DP ranks of equal batch share theirs:
    # an emitter's chip arguments are its group's, placed by the builder's stage).
    emitters: dict[tuple[str, int], Callable[[int, Rows], Rows]] = {}
    for sub, pool in zip(groups.groups, groups.pools, strict=True):
        for t in m.layer_type_counts:
            if (t, sub.batch) not in emitters:
                emitters[t, sub.batch] = kinds.runs_as(m, t, lay.context_length
                                                       ).decode_emitter(b, m, sub, pool, t)
    chips = np.arange(lay.n_chips)
    live = np.concatenate([np.full(sub.n_chips, decode_layer_activations(m, sub))
                           for sub in groups.groups])
    ffn_lay = groups.ffn_layout
    tokens = groups.rank_tokens()

    def layer_ops(layer: int, prev: Rows) -> Rows:
        mark = b.n_tasks
        kind = m.layer_type(layer)
        ready = groups.each(b, lambda g, sub, pool, rows: emitters[kind, sub.batch](layer, rows),
                            prev)
        first = b.first_task_since(mark)
        out = emit_ffn(b, m, ffn_lay, layer, tokens, ready)
        b.buffer(chips, live, first, out)
        return out

    prev = emit_layers(b, m, layers.stop, prev, layer_ops, tile=tile, first=layers.start)
    if head:
        def lm_head(g: int, sub: Layout, pool: DecodePool, rows: Rows) -> Rows:
            logits = b.compute(pool.home_chips, ops.LM_HEAD,
                               [ops.linear_work([lm_head_linear(m)], pool.home_tokens, sub,
                                                "bf16")],
                               rows[pool.home_chips], layer=layers.stop)
            return pool.home_rows(rows, logits)

        after_head = groups.each(b, lm_head, prev)
        if groups.pools[0].q > 1:
            _emit_drafts(b, m, groups, layers.stop, after_head)
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
        groups = DPGroups.of(m, mb)
        pool = groups.pools[0]
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
                after[s] = _emit_pass(b, m, mb, groups, layers, prev, tile,
                                      head=s == len(ranges) - 1)
            if s < len(ranges) - 1:
                incoming = emit_handover(b, m, mb, s, after[s], pool.counts * pool.q,
                                         layers.stop - 1)
        b.micro_batches.append((first, b.n_tasks))


def _emit_drafts(b: GraphBuilder, m: ModelSpec, groups: DPGroups, layer: int,
                 prev: Rows) -> None:
    """Speculative decoding with the model's MTP layers (``mtp_speculation``; docs/mapping.md):
    after the target model's logits, each MTP layer in turn drafts the next token of every
    sequence, one token each: its eh_proj over the last hidden state and the sampled token's
    embedding (with its norms), a decoder layer of its kind over its own window (on the home)
    with the last layer's MoE, and the shared LM head. Their ops carry the layer number after
    the last (outside the model's layers, as the LM head). With DP attention, each DP rank
    drafts its own sequences; the MoE runs over the whole pool."""
    ones = tuple(replace(pool, q=1, q_msg=pool.q_msg // pool.q, o_msg=pool.o_msg // pool.q)
                 for pool in groups.pools)
    lay = groups.lay
    w = lay.precision.attention_weights
    tokens = groups.rank_tokens(ones)
    for kind in m.mtp_layer_types:
        emitters = {sub.batch: kinds.runs_as(m, kind, lay.context_length).decode_emitter(
            b, m, sub, one, kind) for sub, one in zip(groups.groups, ones, strict=True)}

        def attend(g: int, sub: Layout, one: DecodePool, rows: Rows) -> Rows:
            home = one.home_chips
            proj = b.compute(home, ops.MTP_PROJ,
                             [ops.residual_work(m, one.home_tokens, sub),
                              ops.linear_work(mtp_extra_linears(m), one.home_tokens, sub, w)],
                             rows[home], layer=layer)
            return emitters[sub.batch](layer, one.home_rows(rows, proj))  # noqa: B023

        ready = groups.each(b, attend, prev, ones)
        prev = emit_ffn(b, m, groups.ffn_layout, layer, tokens, ready,
                        ffn_of=m.num_hidden_layers - 1)

        def draft(g: int, sub: Layout, one: DecodePool, rows: Rows) -> Rows:
            ids = b.compute(one.home_chips, ops.LM_HEAD,
                            [ops.linear_work([lm_head_linear(m)], one.home_tokens, sub,
                                             "bf16")],
                            rows[one.home_chips], layer=layer)
            return one.home_rows(rows, ids)

        prev = groups.each(b, draft, prev, ones)


def decode_comm(m: ModelSpec, lay: Layout) -> list[KindComm]:
    """Per attention kind of the model: its decode pattern, sequential steps, sends per layer
    and closed-form bytes over its layers; with DP attention summed over the DP ranks (each
    runs its own; sends per layer added, steps those of the DP rank with the most)."""
    per_group = [[kinds.runs_as(m, t, g.context_length).decode_comm(m, g, t, n)
                  for t, n in m.layer_type_counts.items()] for g in lay.dp_groups()]
    if len(per_group) == 1:
        return per_group[0]
    return [KindComm(rows[0].layer_type, rows[0].pattern, rows[0].layers,
                     max(r.ring_steps_per_layer for r in rows),
                     sum(r.sends_per_layer for r in rows), sum(r.analytic_bytes for r in rows))
            for rows in zip(*per_group, strict=True)]
