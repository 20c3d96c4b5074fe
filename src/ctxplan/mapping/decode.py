"""Decode with the KV sharded over Nd ranks: pass-Q, partial attention, All2All, merge.

Sequence k of the batch has its home on rank k mod Nd (round robin). Each rank holds a
contiguous S / Nd share of every sequence's KV. Per layer (Meta arXiv:2411.01783 section 3.3;
NVIDIA Helix arXiv:2507.07120 for KV sharded at decode time):

1. ``q_proj`` on each home chip: the new tokens' queries (and their KV, written locally).
2. Pass-Q, in one of two patterns (``Layout.pass_q``):
   * ``ring`` (Meta's algorithm): Nd steps; at step s rank r holds the queries of home r - s,
     attends them to its shard (``partial_attn``, step s) and, for s < Nd - 1, passes them on
     to rank r + 1 in one SendRecv (send to r + 1, receive from r - 1; every rank takes part in
     every step, with an empty query where its home has no sequence, as Meta pads). Step s + 1's
     SendRecv waits for step s's (its buffer, and the queries it forwards).
   * ``broadcast``: one collective in which every home sends its queries to every other rank
     at once; one ``partial_attn`` per chip then attends all queries it holds.
3. The All2All: every rank returns the partial output and log-sum-exp of each home's queries to
   that home (one collective operation per rank, ``merge_send``).
4. ``attn_merge`` on each home chip (rescale by exp(lse_i - lse) and sum), then ``o_proj``.
5. The FFN half (dense on the home, MoE with EP over the whole pool).

With Nd = 1 there is nothing to pass or merge: the attention writes the output directly.
Every collective or SendRecv pays its operation's fixed cost (mapping/collectives.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctxplan.mapping import ops
from ctxplan.mapping.attention import AttentionShapes, attention_shapes
from ctxplan.mapping.builder import NONE, GraphBuilder, IdArray, Work, deps_of
from ctxplan.mapping.collectives import Rows, exchange, rows_of, sendrecv
from ctxplan.mapping.ffn import emit_ffn
from ctxplan.mapping.layers import emit_layers
from ctxplan.mapping.layout import Layout, decode_shard_tokens
from ctxplan.model.attention import attention_dims
from ctxplan.model.linear import lm_head_linear
from ctxplan.model.spec import ModelSpec

LSE_BYTES = 4  # one FP32 log-sum-exp per head per query travels with each partial output


def home_counts(batch: int, cp: int) -> list[int]:
    """Sequences whose home is each rank (sequence k lives on rank k mod cp)."""
    return [len(range(h, batch, cp)) for h in range(cp)]


def _messages(m: ModelSpec, lay: Layout) -> tuple[int, int]:
    """Bytes per query token per TP chip of a pass-Q message and of a merge message."""
    dims = attention_dims(m, lay.mla_mode or "standard")
    heads = dims.q_heads // lay.tp
    act = lay.precision.activation_bytes
    return heads * dims.qk_dim * act, heads * (dims.v_dim * act + LSE_BYTES)


def pass_q_analytic_bytes(m: ModelSpec, lay: Layout) -> int:
    """Closed form: L * b * (Nd - 1) * tp * (query + partial output + LSE bytes per chip).
    The same for both patterns: the ring moves each query Nd - 1 hops, the broadcast to Nd - 1
    ranks; an empty query (a rank without sequences) carries no bytes."""
    q_msg, o_msg = _messages(m, lay)
    return m.num_hidden_layers * lay.batch * (lay.cp - 1) * lay.tp * (q_msg + o_msg)


@dataclass(frozen=True)
class _Pool:
    """The decode pool's fixed arrays, shared by every layer."""

    n_rank: int
    tp: int
    chips: npt.NDArray[np.int64]        # every chip
    rank: npt.NDArray[np.int64]         # rank of each chip
    counts: npt.NDArray[np.int64]       # sequences per home rank
    shards: npt.NDArray[np.int64]       # KV tokens per sequence held by each rank
    home_chips: npt.NDArray[np.int64]   # chips of home ranks (rank-major)
    home_seqs: npt.NDArray[np.int64]    # sequences of each home chip
    q_msg: int                          # bytes per query token per TP chip (pass-Q)
    o_msg: int                          # bytes per query token per TP chip (output + LSE)

    def chip(self, rank: npt.NDArray[np.int64], like: npt.NDArray[np.int64]
             ) -> npt.NDArray[np.int64]:
        """The chip of ``rank`` with the TP index of chip ``like``."""
        return rank * self.tp + like % self.tp


def emit_decode(b: GraphBuilder, m: ModelSpec, lay: Layout, n_layers: int | None = None,
                *, tile: bool = True) -> None:
    """Emit the phase's graph; ``n_layers`` emits only the first n layers (then the LM head),
    for the periodic-layer shortcut of :mod:`ctxplan.evaluate`. ``tile=False`` writes every
    layer out instead of copying repeats (the same graph; for tests)."""
    n_layers = m.num_hidden_layers if n_layers is None else n_layers
    n_rank, tp = lay.cp, lay.tp
    counts = np.array(home_counts(lay.batch, n_rank), np.int64)
    homes = np.flatnonzero(counts)
    chips = np.arange(lay.n_chips, dtype=np.int64)
    home_chips = (homes[:, None] * tp + np.arange(tp)[None, :]).ravel()
    pool = _Pool(n_rank, tp, chips, chips // tp, counts,
                 np.array(decode_shard_tokens(lay.context_length, n_rank), np.int64),
                 home_chips, np.repeat(counts[homes], tp), *_messages(m, lay))
    att = attention_shapes(m, lay)

    def layer_ops(layer: int, prev: Rows) -> Rows:
        # 1. Query projection on each home chip.
        qp = b.compute(pool.home_chips, ops.Q_PROJ,
                       att.projection(m, pool.home_seqs, lay), prev[pool.home_chips],
                       layer=layer)
        q_ready = prev.copy() if prev.shape[1] else np.full((lay.n_chips, 1), NONE, np.int64)
        q_ready[pool.home_chips] = NONE
        q_ready[pool.home_chips, 0] = qp
        if n_rank == 1:
            # 2-4. One rank: the attention over the whole KV is the output.
            attn = b.compute(pool.home_chips, ops.PARTIAL_ATTN,
                             _attention_parts(lay, att, pool, pool.home_seqs, pool.shards[0]),
                             qp, layer=layer, step=0)
            o_in: Rows = rows_of(attn)
            after = rows_of(attn)
        else:
            if lay.pass_q == "ring":
                own, after = _pass_q_ring(b, lay, att, pool, q_ready, layer)
            else:
                own, after = _pass_q_broadcast(b, lay, att, pool, q_ready, layer)
            # 3. All2All: every rank returns each home's partial output + LSE to that home.
            after = _return_partials(b, lay, pool, after, layer)
            # 4. Merge on each home chip: its own partial and the Nd - 1 received.
            merge_deps = np.concatenate([own[:, None], after[pool.home_chips]], axis=1)
            o_in = rows_of(_merge(b, lay, att, pool, merge_deps, layer))
        o_ready = b.compute(pool.home_chips, ops.O_PROJ, att.output(pool.home_seqs, lay),
                            o_in, layer=layer)
        ready = after.copy()
        ready[pool.home_chips] = NONE
        ready[pool.home_chips, 0] = o_ready
        return emit_ffn(b, m, lay, layer, counts, ready)

    prev = emit_layers(b, m, n_layers, np.full((lay.n_chips, 0), NONE, np.int64), layer_ops,
                       tile=tile)
    head = [lm_head_linear(m)]
    b.compute(pool.home_chips, ops.LM_HEAD,
              [ops.linear_work(head, pool.home_seqs, lay, "bf16")], prev[pool.home_chips],
              layer=n_layers)


def _attention_parts(lay: Layout, att: AttentionShapes, pool: _Pool,
                     seqs: npt.ArrayLike, shard: npt.ArrayLike) -> list[Work]:
    """Partial attention of ``seqs`` sequences' new queries over ``shard`` KV tokens of each
    (arrays aligned with the chips): one kernel, plus (standard MLA) the up-projection of the
    shard's latent, which that mode pays every step."""
    seqs = np.asarray(seqs, np.int64)
    kv_tokens = seqs * np.asarray(shard, np.int64)
    parts = [Work("attention", kv_tokens * att.pair_flops,
                  kv_tokens * att.c_chip + seqs * (pool.q_msg + pool.o_msg),
                  lay.precision.attention,
                  m_rows=seqs, kv_tokens=shard)]
    if att.standard_mla:
        parts.append(ops.linear_work(att.kv_b, kv_tokens, lay, lay.precision.attention_weights))
    return parts


def _pass_q_ring(b: GraphBuilder, lay: Layout, att: AttentionShapes, pool: _Pool,
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
                         _attention_parts(lay, att, pool, seqs[busy],
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


def _pass_q_broadcast(b: GraphBuilder, lay: Layout, att: AttentionShapes, pool: _Pool,
                      q_ready: Rows, layer: int) -> tuple[IdArray, Rows]:
    """One collective: each home chip sends its queries to the chip of the same TP index on
    every other rank; then one partial attention per chip over every query it holds."""
    n_rank, n = pool.n_rank, len(pool.chips)
    src = np.repeat(pool.home_chips, n_rank - 1)
    hops = np.tile(np.arange(1, n_rank), len(pool.home_chips))
    dst = pool.chip((pool.rank[src] + hops) % n_rank, src)
    after = exchange(b, pool.chips, src, dst, pool.counts[pool.rank[src]] * pool.q_msg,
                     q_ready, layer, ops.PASS_Q_SEND)
    seqs = np.full(n, lay.batch, np.int64)
    attn = b.compute(pool.chips, ops.PARTIAL_ATTN,
                     _attention_parts(lay, att, pool, seqs, pool.shards[pool.rank]), after,
                     layer=layer, step=0)
    return attn[pool.home_chips], rows_of(attn)


def _return_partials(b: GraphBuilder, lay: Layout, pool: _Pool, done: Rows,
                     layer: int) -> Rows:
    """The All2All: each chip sends the partial output + LSE of every other home's queries to
    that home (the chip of the same TP index), one collective operation per rank."""
    n_rank = pool.n_rank
    src = np.repeat(pool.chips, n_rank - 1)
    k = np.tile(np.arange(1, n_rank), len(pool.chips))
    dst_rank = (pool.rank[src] + k) % n_rank
    keep = pool.counts[dst_rank] > 0
    src, dst_rank = src[keep], dst_rank[keep]
    dst = pool.chip(dst_rank, src)
    return exchange(b, pool.chips, src, dst, pool.counts[dst_rank] * pool.o_msg, done,
                    layer, ops.MERGE_SEND)


def _merge(b: GraphBuilder, lay: Layout, att: AttentionShapes, pool: _Pool, deps: Rows,
           layer: int) -> IdArray:
    """The merge on each home chip: Nd partial outputs rescaled by exp(lse_i - lse) and
    summed, a memory-bound kernel of 4 * Nd * heads * v_dim FLOPs per query."""
    seqs, n_rank = pool.home_seqs, pool.n_rank
    work = Work("memory", 4.0 * n_rank * seqs * att.heads * att.dims.v_dim,
                n_rank * seqs * pool.o_msg, lay.precision.attention)
    return b.compute(pool.home_chips, ops.ATTN_MERGE, [work], deps, layer=layer)


@dataclass(frozen=True)
class DecodeStructure:
    """Sends per layer of the decode CP pattern (for reports and tests)."""

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


__all__ = ["DecodeStructure", "decode_structure", "emit_decode", "home_counts",
           "pass_q_analytic_bytes"]
