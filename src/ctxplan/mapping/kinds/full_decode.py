"""Decode of full attention over the KV sharded S / Nd per rank: pass-Q, partial attention,
the All2All of partial outputs and the merge (Meta arXiv:2411.01783 section 3.3; NVIDIA Helix
arXiv:2507.07120 for KV sharded at decode time).

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

With Nd = 1 there is nothing to pass or merge: the attention writes the output directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctxplan.mapping import ops
from ctxplan.mapping.attention import AttentionShapes, attention_shapes
from ctxplan.mapping.builder import NONE, GraphBuilder, IdArray, deps_of
from ctxplan.mapping.collectives import Rows, rows_of, sendrecv
from ctxplan.mapping.decode_base import (
    DecodeEmitter,
    DecodePool,
    attention_parts,
    broadcast_queries,
    home_counts,
    merge,
    messages,
    return_partials,
    tokens_per_step,
)
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.layout import Layout
from ctxplan.model.spec import ModelSpec


def pass_q_analytic_bytes(m: ModelSpec, lay: Layout, layers: int | None = None) -> int:
    """Closed form: L * b * (Nd - 1) * tp * (query + partial output + LSE bytes per chip),
    over ``layers`` full-attention layers (default: every layer). The same for both patterns:
    the ring moves each query Nd - 1 hops, the broadcast to Nd - 1 ranks; an empty query (a
    rank without sequences) carries no bytes."""
    layers = m.num_hidden_layers if layers is None else layers
    q_msg, o_msg = messages(m, lay)
    return layers * lay.batch * (lay.cp - 1) * lay.tp * (q_msg + o_msg) * tokens_per_step(m, lay)


def full_emitter(b: GraphBuilder, m: ModelSpec, lay: Layout, pool: DecodePool,
                 layer_type: str) -> DecodeEmitter:
    """Full attention over the sharded KV: pass-Q, partial attention, All2All, merge."""
    att = attention_shapes(m, lay, layer_type)
    n_rank = pool.n_rank

    def emit(layer: int, prev: Rows) -> Rows:
        # 1. Query projection on each home chip.
        qp = b.compute(pool.home_chips, ops.Q_PROJ,
                       att.projection(m, pool.home_tokens, lay), prev[pool.home_chips],
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
            if lay.policy.pass_q == "ring":
                own, after = pass_q_ring(b, lay, att, pool, q_ready, layer)
            else:
                own, after = pass_q_broadcast(b, lay, att, pool, q_ready, layer)
            # 3. All2All: every rank returns each home's partial output + LSE to that home.
            after = return_partials(b, pool, after, layer)
            # 4. Merge on each home chip: its own partial and the Nd - 1 received.
            merge_deps = np.concatenate([own[:, None], after[pool.home_chips]], axis=1)
            o_in = rows_of(merge(b, lay, att, pool, merge_deps, layer))
        o_ready = b.compute(pool.home_chips, ops.O_PROJ, att.output(pool.home_tokens, lay),
                            o_in, layer=layer)
        return pool.home_rows(after, o_ready)

    return emit


def pass_q_ring(b: GraphBuilder, lay: Layout, att: AttentionShapes, pool: DecodePool,
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


def pass_q_broadcast(b: GraphBuilder, lay: Layout, att: AttentionShapes, pool: DecodePool,
                      q_ready: Rows, layer: int) -> tuple[IdArray, Rows]:
    """The queries to every rank in one collective; then one partial attention per chip over
    every query it holds."""
    after = broadcast_queries(b, pool, q_ready, pool.q_msg, layer)
    seqs = np.full(len(pool.chips), lay.batch, np.int64)
    attn = b.compute(pool.chips, ops.PARTIAL_ATTN,
                     attention_parts(lay, att, pool, seqs, pool.shards[pool.rank]), after,
                     layer=layer, step=0)
    return attn[pool.home_chips], rows_of(attn)


# -- what the CP communication should move: closed form ----------------------------------------


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
    return DecodeStructure(pass_q_sends_per_layer=ring if lay.policy.pass_q == "ring" else per,
                           merge_sends_per_layer=per)


def decode_comm(m: ModelSpec, lay: Layout, layer_type: str, layers: int) -> KindComm:
    """Pass-Q: Nd - 1 sequential steps on the ring (none for the broadcast), the queries' and
    the partial outputs' sends per layer, and the closed-form bytes over ``layers`` layers."""
    st = decode_structure(lay)
    steps = lay.cp - 1 if lay.policy.pass_q == "ring" else 0
    return KindComm(layer_type, "pass-q", layers, steps,
                    st.pass_q_sends_per_layer + st.merge_sends_per_layer,
                    pass_q_analytic_bytes(m, lay, layers))
