"""Decode with the KV sharded over Nd ranks, per attention kind (docs/mapping.md, "Decode").

Sequence k of the batch has its home on rank k mod Nd (round robin). Each rank holds a
contiguous S / Nd share of every sequence's growing KV. Per layer, the attention half of the
layer's kind, then the FFN half (dense on the home, MoE with EP over the whole pool):

* full attention (Meta arXiv:2411.01783 section 3.3; NVIDIA Helix arXiv:2507.07120 for KV
  sharded at decode time):

  1. ``q_proj`` on each home chip: the new tokens' queries (and their KV, written locally).
  2. Pass-Q, in one of two patterns (``Layout.pass_q``):
     * ``ring`` (Meta's algorithm): Nd steps; at step s rank r holds the queries of home r - s,
       attends them to its shard (``partial_attn``, step s) and, for s < Nd - 1, passes them on
       to rank r + 1 in one SendRecv (send to r + 1, receive from r - 1; every rank takes part
       in every step, with an empty query where its home has no sequence, as Meta pads). Step
       s + 1's SendRecv waits for step s's (its buffer, and the queries it forwards).
     * ``broadcast``: one collective in which every home sends its queries to every other rank
       at once; one ``partial_attn`` per chip then attends all queries it holds.
  3. The All2All: every rank returns the partial output and log-sum-exp of each home's queries
     to that home (one collective operation per rank, ``merge_send``).
  4. ``attn_merge`` on each home chip (rescale by exp(lse_i - lse) and sum), then ``o_proj``.

  With Nd = 1 there is nothing to pass or merge: the attention writes the output directly. A
  sliding-window or chunked layer whose window holds the whole context is full attention and
  runs as such.
* sliding window / chunked (window shorter than S) and linear attention: the window's KV or the
  state lives on the home, so the layer runs there and nothing moves
  (:mod:`ctxplan.mapping.decode_local`);
* DSA: the queries to every shard, each shard's indexer scores and local top-k, the candidates
  to the home, the exact global selection, then sparse partial attention and the merge
  (:mod:`ctxplan.mapping.decode_dsa`).

Every collective or SendRecv pays its operation's fixed cost (mapping/collectives.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ctxplan.mapping import ops
from ctxplan.mapping.attention import AttentionShapes, attention_shapes
from ctxplan.mapping.builder import NONE, GraphBuilder, IdArray, deps_of
from ctxplan.mapping.collectives import Rows, exchange, rows_of, sendrecv
from ctxplan.mapping.decode_base import (
    LSE_BYTES,
    DecodePool,
    attention_parts,
    decode_pool,
    home_counts,
    merge,
    messages,
    return_partials,
)
from ctxplan.mapping.ffn import emit_ffn
from ctxplan.mapping.layers import emit_layers
from ctxplan.mapping.layout import Layout
from ctxplan.mapping.prefill import KindComm, ring_layer_type
from ctxplan.model.linear import lm_head_linear
from ctxplan.model.spec import (
    CHUNKED_ATTENTION,
    FULL_ATTENTION,
    INDEXED_ATTENTION,
    LINEAR_ATTENTION,
    SLIDING_ATTENTION,
    ModelSpec,
)

DecodeEmitter = Callable[[int, Rows], Rows]
"""emit(layer, rows each chip waits for) -> rows per chip its FFN half waits for (the home
chips: their ``o_proj``)."""

LOCAL = "local"   # the pattern of the kinds decoded on the home: nothing moves


def pass_q_analytic_bytes(m: ModelSpec, lay: Layout, layers: int | None = None) -> int:
    """Closed form: L * b * (Nd - 1) * tp * (query + partial output + LSE bytes per chip),
    over ``layers`` full-attention layers (default: every layer). The same for both patterns:
    the ring moves each query Nd - 1 hops, the broadcast to Nd - 1 ranks; an empty query (a
    rank without sequences) carries no bytes."""
    layers = m.num_hidden_layers if layers is None else layers
    q_msg, o_msg = messages(m, lay)
    return layers * lay.batch * (lay.cp - 1) * lay.tp * (q_msg + o_msg)


def decode_layer_type(m: ModelSpec, layer_type: str, context_length: int) -> str:
    """The pattern a layer runs in decode: full attention for a window holding the context,
    else its own kind."""
    return ring_layer_type(m, layer_type, context_length)


def emit_decode(b: GraphBuilder, m: ModelSpec, lay: Layout, n_layers: int | None = None,
                *, tile: bool = True) -> None:
    """Emit the phase's graph; ``n_layers`` emits only the first n layers (then the LM head),
    for the periodic-layer shortcut of :mod:`ctxplan.evaluate`. ``tile=False`` writes every
    layer out instead of copying repeats (the same graph; for tests)."""
    n_layers = m.num_hidden_layers if n_layers is None else n_layers
    pool = decode_pool(m, lay)
    emitters = {t: attention_emitter(b, m, lay, pool, t) for t in m.layer_type_counts}

    def layer_ops(layer: int, prev: Rows) -> Rows:
        ready = emitters[m.layer_type(layer)](layer, prev)
        return emit_ffn(b, m, lay, layer, pool.counts, ready)

    prev = emit_layers(b, m, n_layers, np.full((lay.n_chips, 0), NONE, np.int64), layer_ops,
                       tile=tile)
    head = [lm_head_linear(m)]
    b.compute(pool.home_chips, ops.LM_HEAD,
              [ops.linear_work(head, pool.home_seqs, lay, "bf16")], prev[pool.home_chips],
              layer=n_layers)


def attention_emitter(b: GraphBuilder, m: ModelSpec, lay: Layout, pool: DecodePool,
                      layer_type: str) -> DecodeEmitter:
    """The attention half of a decode layer of ``layer_type`` under this pool's layout."""
    kind = decode_layer_type(m, layer_type, lay.context_length)
    if kind == FULL_ATTENTION:
        return full_emitter(b, m, lay, pool, layer_type)
    if kind in (SLIDING_ATTENTION, CHUNKED_ATTENTION):
        from ctxplan.mapping.decode_local import window_emitter

        return window_emitter(b, m, lay, pool, kind)
    if kind == LINEAR_ATTENTION:
        from ctxplan.mapping.decode_local import linear_emitter

        return linear_emitter(b, m, lay, pool)
    assert kind == INDEXED_ATTENTION, kind
    from ctxplan.mapping.decode_dsa import dsa_emitter

    return dsa_emitter(b, m, lay, pool)


def full_emitter(b: GraphBuilder, m: ModelSpec, lay: Layout, pool: DecodePool,
                 layer_type: str = FULL_ATTENTION) -> DecodeEmitter:
    """Full attention over the sharded KV: pass-Q, partial attention, All2All, merge."""
    att = attention_shapes(m, lay, layer_type)
    n_rank = pool.n_rank

    def emit(layer: int, prev: Rows) -> Rows:
        # 1. Query projection on each home chip.
        qp = b.compute(pool.home_chips, ops.Q_PROJ,
                       att.projection(m, pool.home_seqs, lay), prev[pool.home_chips],
                       layer=layer)
        q_ready = pool.home_rows(prev, qp)
        if n_rank == 1:
            # 2-4. One rank: the attention over the whole KV is the output.
            attn = b.compute(pool.home_chips, ops.PARTIAL_ATTN,
                             attention_parts(lay, att, pool, pool.home_seqs, pool.shards[0]),
                             qp, layer=layer, step=0)
            o_in: Rows = rows_of(attn)
            after = rows_of(attn)
        else:
            if lay.pass_q == "ring":
                own, after = _pass_q_ring(b, lay, att, pool, q_ready, layer)
            else:
                own, after = _pass_q_broadcast(b, lay, att, pool, q_ready, layer)
            # 3. All2All: every rank returns each home's partial output + LSE to that home.
            after = return_partials(b, pool, after, layer)
            # 4. Merge on each home chip: its own partial and the Nd - 1 received.
            merge_deps = np.concatenate([own[:, None], after[pool.home_chips]], axis=1)
            o_in = rows_of(merge(b, lay, att, pool, merge_deps, layer))
        o_ready = b.compute(pool.home_chips, ops.O_PROJ, att.output(pool.home_seqs, lay),
                            o_in, layer=layer)
        return pool.home_rows(after, o_ready)

    return emit


def _pass_q_ring(b: GraphBuilder, lay: Layout, att: AttentionShapes, pool: DecodePool,
                 q_ready: Rows, layer: int) -> tuple[IdArray, Rows]:
    """Meta's ring: Nd steps of partial attention, the queries passed on by a SendRecv per rank
    between steps. Returns each home chip's partial of its own queries, and per chip the rows
    after its ring loop (its last attention, its last send and its last receive)."""
    n_rank, n = pool.n_rank, len(pool.chips)
    # Positions are chips; each sends to the chip of its TP index on the next rank.
    nxt = pool.chip((pool.rank + 1) % n_rank, pool.chips)
    prv = pool.chip((pool.rank - 1) % n_rank, pool.chips)
    last_attn = np.full(n, NONE, np.int64)
    own = np.full(n, NONE, np.int64)
    held = q_ready               # per chip: after these, it holds the queries of step s
    sent = np.full(n, NONE, np.int64)
    for s in range(n_rank):
        home = (pool.rank - s) % n_rank          # whose queries each chip holds at step s
        seqs = pool.counts[home]
        # Partial attention of the held queries (ranks whose home has none skip the step).
        busy = np.flatnonzero(seqs > 0)
        attn = b.compute(pool.chips[busy], ops.PARTIAL_ATTN,
                         attention_parts(lay, att, pool, seqs[busy],
                                         pool.shards[pool.rank[busy]]),
                         deps_of(held[busy], last_attn[busy]), layer=layer, step=s)
        last_attn[busy] = attn
        if s == 0:
            own[busy] = attn
        if s == n_rank - 1:
            break
        # The SendRecv of step s, on every chip: pass the held queries to the next rank.
        _, sent = sendrecv(b, pool.chips, nxt, seqs * pool.q_msg, ops.PASS_Q_SEND, held, layer,
                           s)
        held = deps_of(sent[prv], sent)   # the queries received; own buffer free again
    done = deps_of(last_attn, held)
    return own[pool.home_chips], done


def broadcast_queries(b: GraphBuilder, pool: DecodePool, q_ready: Rows, q_bytes: int,
                      layer: int) -> Rows:
    """One collective: each home chip sends its sequences' queries (``q_bytes`` per sequence)
    to the chip of the same TP index on every other rank. Returns rows per chip."""
    n_rank = pool.n_rank
    src = np.repeat(pool.home_chips, n_rank - 1)
    hops = np.tile(np.arange(1, n_rank), len(pool.home_chips))
    dst = pool.chip((pool.rank[src] + hops) % n_rank, src)
    return exchange(b, pool.chips, src, dst, pool.counts[pool.rank[src]] * q_bytes, q_ready,
                    layer, ops.PASS_Q_SEND)


def _pass_q_broadcast(b: GraphBuilder, lay: Layout, att: AttentionShapes, pool: DecodePool,
                      q_ready: Rows, layer: int) -> tuple[IdArray, Rows]:
    """The queries to every rank in one collective; then one partial attention per chip over
    every query it holds."""
    after = broadcast_queries(b, pool, q_ready, pool.q_msg, layer)
    seqs = np.full(len(pool.chips), lay.batch, np.int64)
    attn = b.compute(pool.chips, ops.PARTIAL_ATTN,
                     attention_parts(lay, att, pool, seqs, pool.shards[pool.rank]), after,
                     layer=layer, step=0)
    return attn[pool.home_chips], rows_of(attn)


# -- what the CP communication should move: closed forms per kind -------------------------------


@dataclass(frozen=True)
class DecodeStructure:
    """Sends per layer of the full-attention decode CP pattern (for reports and tests)."""

    pass_q_sends_per_layer: int
    merge_sends_per_layer: int


def decode_structure(lay: Layout) -> DecodeStructure:
    """Broadcast: Nd - 1 sends per home chip. Ring: one send per chip per step, Nd - 1
    steps (empty queries included). The All2All: Nd - 1 sends into each home chip."""
    homes = sum(1 for c in home_counts(lay.batch, lay.cp) if c)
    per = homes * lay.tp * (lay.cp - 1)
    ring = lay.n_chips * (lay.cp - 1)
    return DecodeStructure(pass_q_sends_per_layer=ring if lay.pass_q == "ring" else per,
                           merge_sends_per_layer=per)


def decode_comm(m: ModelSpec, lay: Layout) -> list[KindComm]:
    """Per attention kind of the model: its decode pattern, sequential steps, sends per layer
    and closed-form bytes over its layers."""
    from ctxplan.mapping.decode_dsa import dsa_decode_comm

    out = []
    for layer_type, n in m.layer_type_counts.items():
        kind = decode_layer_type(m, layer_type, lay.context_length)
        if kind == FULL_ATTENTION:
            st = decode_structure(lay)
            steps = lay.cp - 1 if lay.pass_q == "ring" else 0
            out.append(KindComm(layer_type, "pass-q", n, steps,
                                st.pass_q_sends_per_layer + st.merge_sends_per_layer,
                                pass_q_analytic_bytes(m, lay, n)))
        elif kind == INDEXED_ATTENTION:
            out.append(dsa_decode_comm(m, lay, n))
        else:
            out.append(KindComm(layer_type, LOCAL, n, 0, 0, 0))
    return out


__all__ = ["LSE_BYTES", "DecodeStructure", "decode_comm", "decode_structure", "emit_decode",
           "home_counts", "pass_q_analytic_bytes"]
