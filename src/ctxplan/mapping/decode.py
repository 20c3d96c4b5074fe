"""Decode with the KV sharded over Nd ranks: pass-Q and a merge of partial attention.

Sequence k of the batch has its home on rank k mod Nd (round robin): the home projects the new
token's query, sends it (pass-Q) to every other rank (all at once, or forwarded around a ring
of ranks with ``pass_q = "ring"``, as Meta's implementation does), every rank attends it to its
S / Nd share of that sequence's KV (partial attention, reading b * S/Nd * c_kv bytes per layer), and
the partial outputs with their log-sum-exp go back to the home in a one-shot gather, where they
are merged (Meta arXiv:2411.01783 section 3.3; NVIDIA Helix arXiv:2507.07120). With TP, every
TP index runs its own pass-Q / gather over its heads. Then the output projection and the FFN
half (dense on the home, MoE with EP over the whole pool).

Aggregation structure per layer (documented in docs/mapping.md and tested): for each home rank
with queries and each TP index, Nd - 1 pass-Q sends and Nd - 1 merge sends.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctxplan.mapping import ops
from ctxplan.mapping.attention import attention_shapes
from ctxplan.mapping.builder import NONE, GraphBuilder, Work
from ctxplan.mapping.collectives import Rows, rows_of, scatter_rows
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
    """Closed form: L * b * (Nd - 1) * tp * (query + partial output + LSE bytes per chip)."""
    q_msg, o_msg = _messages(m, lay)
    return m.num_hidden_layers * lay.batch * (lay.cp - 1) * lay.tp * (q_msg + o_msg)


def emit_decode(b: GraphBuilder, m: ModelSpec, lay: Layout, n_layers: int | None = None,
                *, tile: bool = True) -> None:
    """Emit the phase's graph; ``n_layers`` emits only the first n layers (then the LM head),
    for the periodic-layer shortcut of :mod:`ctxplan.evaluate`. ``tile=False`` writes every
    layer out instead of copying repeats (the same graph; for tests)."""
    n_layers = m.num_hidden_layers if n_layers is None else n_layers
    n_rank, tp = lay.cp, lay.tp
    shards = np.array(decode_shard_tokens(lay.context_length, n_rank), np.int64)
    counts = np.array(home_counts(lay.batch, n_rank), np.int64)
    homes = np.flatnonzero(counts)
    p = lay.precision
    att = attention_shapes(m, lay)
    dims, heads, pair_flops, c_chip = att.dims, att.heads, att.pair_flops, att.c_chip
    q_msg, o_msg = _messages(m, lay)
    ring = lay.pass_q == "ring"
    n_chips = lay.n_chips
    chips = np.arange(n_chips)
    # Home chips (home rank h, TP index j), in order; their sequences; the other ranks.
    home_chips = (homes[:, None] * tp + np.arange(tp)[None, :]).ravel()
    home_seqs = np.repeat(counts[homes], tp)
    n_home = len(home_chips)
    hops = np.arange(1, n_rank)
    # Pass-Q and merge pair each home chip with the chip of the same TP index on every other
    # rank (k = 1 .. Nd-1 ranks further): (home, k) in order, home-major.
    peer = ((np.repeat(home_chips // tp, n_rank - 1) + np.tile(hops, n_home)) % n_rank * tp
            + np.repeat(home_chips % tp, n_rank - 1))
    src = np.repeat(home_chips, n_rank - 1)
    seqs = np.repeat(home_seqs, n_rank - 1)
    # The merge gathers from the other ranks in rank order (i = 0 .. Nd-1, the home skipped).
    k = np.tile(np.arange(n_rank - 1), n_home)
    home_rank = src // tp
    gather_from = (k + (k >= home_rank)) * tp + src % tp
    kv_tokens = lay.batch * shards[chips // tp]

    def layer_ops(layer: int, prev: Rows) -> Rows:
        # 1. Query projection on each home chip.
        qp = b.compute(home_chips, ops.Q_PROJ, att.projection(m, home_seqs, lay),
                       prev[home_chips], layer=layer)
        # 2. Pass-Q: every home's queries reach every other rank (per TP index): all at once
        # from the home (broadcast), or forwarded rank to rank (ring).
        qp_rep = np.repeat(qp, n_rank - 1)
        if ring:
            first = b.n_tasks
            ids = first + np.arange(len(src))
            # Hop k leaves the chip hop k - 1 reached, after that hop arrived.
            from_chip = np.where(np.tile(hops, n_home) == 1, src, np.roll(peer, 1))
            after = np.where(np.tile(hops, n_home) == 1, qp_rep, ids - 1)
            sent = b.send(from_chip, peer, seqs * q_msg, ops.PASS_Q_SEND, after, layer=layer,
                          step=np.tile(hops - 1, n_home))
        else:
            sent = b.send(src, peer, seqs * q_msg, ops.PASS_Q_SEND, qp_rep, layer=layer)
        q_in = np.concatenate([prev, scatter_rows(
            n_chips, np.concatenate([home_chips, peer]), np.concatenate([qp, sent]))], axis=1)
        # 3. Partial attention of all queries over the local shard of each sequence.
        parts = [Work("attention", kv_tokens * pair_flops,
                      kv_tokens * c_chip + lay.batch * (q_msg + o_msg), p.attention,
                      m_rows=lay.batch, kv_tokens=shards[chips // tp])]
        if att.standard_mla:
            # Standard MLA up-projects the whole local latent shard every step.
            parts.append(ops.linear_work(att.kv_b, kv_tokens, lay, p.attention_weights))
        partial = b.compute(chips, ops.PARTIAL_ATTN, parts, q_in, layer=layer, step=0)
        # 4. Merge: one-shot gather of partial outputs + LSE to the home, merge, o_proj. (Per
        # home the real order is sends, merge, o_proj; grouping by kind gives the same
        # schedule: the merges and projections of different homes run on different chips.)
        back = b.send(gather_from, src, seqs * o_msg, ops.MERGE_SEND, partial[gather_from],
                      layer=layer)
        merge_deps = np.concatenate([partial[home_chips][:, None],
                                     back.reshape(n_home, n_rank - 1)], axis=1)
        merged_bytes = n_rank * home_seqs * o_msg
        merge = b.compute(home_chips, ops.ATTN_MERGE,
                          [Work("memory", 4.0 * n_rank * home_seqs * heads * dims.v_dim,
                                merged_bytes, p.attention)], merge_deps, layer=layer)
        o_ready = b.compute(home_chips, ops.O_PROJ,
                            [ops.linear_work(att.o_proj, home_seqs, lay, p.attention_weights)],
                            merge, layer=layer)
        ready = rows_of(partial)
        ready[home_chips, 0] = o_ready
        return emit_ffn(b, m, lay, layer, counts, ready)

    prev = emit_layers(b, m, n_layers, np.full((n_chips, 0), NONE, np.int64), layer_ops,
                       tile=tile)
    head = [lm_head_linear(m)]
    b.compute(home_chips, ops.LM_HEAD, [ops.linear_work(head, home_seqs, lay, "bf16")],
              prev[home_chips], layer=n_layers)


@dataclass(frozen=True)
class DecodeStructure:
    """Sends per layer of the decode CP pattern (for reports and tests)."""

    pass_q_sends_per_layer: int
    merge_sends_per_layer: int


def decode_structure(lay: Layout) -> DecodeStructure:
    homes = sum(1 for c in home_counts(lay.batch, lay.cp) if c)
    per = homes * lay.tp * (lay.cp - 1)
    return DecodeStructure(pass_q_sends_per_layer=per, merge_sends_per_layer=per)


__all__ = ["DecodeStructure", "decode_structure", "emit_decode", "home_counts",
           "pass_q_analytic_bytes"]
