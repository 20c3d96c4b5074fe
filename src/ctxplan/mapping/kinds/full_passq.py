"""Prefill's pass-Q for full-attention layers (Meta, arXiv:2411.01783, section 3.3).

The KV stays where it is (cached and new tokens) and the new tokens' queries travel instead:
a ring of Np steps per TP index in which, at step s, rank i attends the query block of rank
i - s to its own KV (a partial output with its log-sum-exp) while passing that query block on
to rank i + 1. After the ring each rank holds a partial output of every rank's queries; an
all-to-all sends each to the queries' rank (partial outputs + FP32 LSE per head), which merges
its Np partials (rescaled by exp(lse_i - lse)) and runs its output projection. With a long
cached prefix the queries (T tokens) are fewer than the keys (P + T), which is when this moves
fewer bytes than pass-KV (docs/mapping.md, "A cached prefix").
"""

from __future__ import annotations

import numpy as np

from ctxplan.mapping import collectives as coll
from ctxplan.mapping import ops
from ctxplan.mapping.attention import attention_shapes
from ctxplan.mapping.builder import GraphBuilder, Work
from ctxplan.mapping.collectives import Rows, rows_of
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.layout import Layout
from ctxplan.mapping.placement import causal_below, placement
from ctxplan.mapping.prefill_base import (
    AttentionEmitter,
    IntArray,
    PrefillSetup,
    kv_and_query_reads,
    ring_attention,
)
from ctxplan.model.spec import FULL_ATTENTION, ModelSpec

LSE_BYTES = 4  # one FP32 log-sum-exp per head per query travels with each partial output


def message_bytes(m: ModelSpec, lay: Layout) -> tuple[int, int]:
    """Bytes per new token per TP chip of a query block and of a partial output (+ LSE)."""
    att = attention_shapes(m, lay, FULL_ATTENTION)
    act = lay.precision.activation_bytes
    return (att.heads * att.dims.qk_dim * act,
            att.heads * (att.dims.v_dim * act + LSE_BYTES))


def pass_q_emitter(b: GraphBuilder, setup: PrefillSetup) -> AttentionEmitter:
    m, lay = setup.m, setup.lay
    att = attention_shapes(m, lay, FULL_ATTENTION)
    p = lay.precision
    w = p.attention_weights
    batch, n_rank, tp = lay.batch, lay.cp, lay.tp
    tokens, kv_tokens, cached = setup.tokens, setup.kv_tokens, setup.cached
    pairs = setup.pairs(FULL_ATTENTION, causal_below) * batch        # [i, k]: i's queries, k's keys
    kv_read, q_read = kv_and_query_reads(att, lay)
    q_msg, o_msg = message_bytes(m, lay)
    ranks, chips, rank_of = setup.ranks, setup.chips, setup.rank_of
    has_cached = setup.pl.cached > 0
    # All-to-all after the ring: rank i sends rank k the partial outputs of k's queries.
    out_bytes = np.broadcast_to(tokens[None, :] * o_msg, (n_rank, n_rank)).copy()
    np.fill_diagonal(out_bytes, 0)

    def step_work(step: int, k: IntArray) -> list[Work]:
        # Rank i holds the queries of rank k and attends them to its own KV.
        parts = [Work("attention", pairs[k, ranks] * att.pair_flops,
                      kv_tokens * kv_read + tokens[k] * q_read, p.attention,
                      m_rows=tokens[k], kv_tokens=kv_tokens / batch, causal=step == 0,
                      head_dim=att.head_dim)]
        if att.standard_mla and step == 0 and has_cached:
            # The rank's own cached latents are up-projected once (its new tokens' ran in the
            # projection) and serve every query block after.
            parts.append(ops.linear_work(att.kv_b, cached, lay, w))
        return parts

    def home(layer: int, done: IntArray) -> IntArray | Rows:
        """The partial outputs to their queries' rank, and the merge there."""
        ready: IntArray | Rows = done
        if n_rank > 1:
            arrived = [coll.all_to_all(b, ranks * tp + j, rows_of(done[ranks * tp + j]),
                                       out_bytes, layer, ops.PREFILL_OUT_SEND)
                       for j in range(tp)]
            width = max(a.shape[1] for a in arrived)
            rows = np.full((lay.n_chips, width), -1, np.int64)
            for j, a in enumerate(arrived):
                rows[ranks * tp + j, :a.shape[1]] = a
            t = tokens[rank_of]
            ready = b.compute(chips, ops.PREFILL_MERGE,
                              [Work("memory", 4.0 * n_rank * t * att.heads * att.dims.v_dim,
                                    n_rank * t * o_msg, p.attention)], rows, layer=layer)
        return ready

    return ring_attention(b, setup, att, step_work=step_work,
                          send_bytes=lambda k: tokens[k] * q_msg,
                          compute_kind=ops.PREFILL_Q_ATTN, send_kind=ops.PREFILL_Q_SEND,
                          after_ring=home)


def pass_q_analytic_bytes(m: ModelSpec, lay: Layout, layers: int) -> int:
    """Closed form: every query block visits Np - 1 other ranks and every rank returns Np - 1
    partial outputs, per TP index: b * L * (Np - 1) * T * tp * (q + o + LSE bytes per chip)."""
    q_msg, o_msg = message_bytes(m, lay)
    return lay.batch * layers * (lay.cp - 1) * lay.new_tokens * lay.tp * (q_msg + o_msg)


def pass_q_comm(m: ModelSpec, lay: Layout, layer_type: str, layers: int) -> KindComm:
    n = lay.cp
    # Ring: Np (Np - 1) sends per TP index; the all-to-all: Np (Np - 1) minus those to ranks
    # without new tokens (S < 2 Np).
    holders = int((placement(lay.context_length, lay.cached, n).new_tokens > 0).sum())
    sends = lay.tp * (n * (n - 1) + (n - 1) * holders) if n > 1 else 0
    return KindComm(layer_type, "pass-q", layers, n - 1, sends,
                    pass_q_analytic_bytes(m, lay, layers))
