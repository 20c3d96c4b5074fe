"""Prefill of sliding-window and chunked layers under CP: a halo exchange, not a ring.

A query at position p of a sliding layer sees the keys (p - w, p]; of a chunked layer, the keys
of its own chunk of c up to p. So the queries of a CP chunk starting at x need, besides the
chunk's own keys, only the keys [x - w + 1, x) (sliding) or [c * floor(x / c), x) (chunked)
before it. With the zigzag split those keys are not one ring hop away: the tokens before rank
i's first chunk (chunk i) are on rank i - 1, but those before its second chunk (2 Np - 1 - i)
are on rank i + 1 (chunk 2 Np - 2 - i), the other way round the ring. A pass-KV ring that
stops early would need Np - 1 steps to bring rank i + 1's block to rank i, moving every block
past ranks that do not need it. So each rank instead receives, in one step, exactly the keys
its window reaches from the ranks that hold them (the halo; each token once per receiver), and
the window's bytes do not grow with S:

1. ``qkv_proj`` on the rank's new tokens;
2. ``window_attn`` step 0: its queries against the keys it holds (its chunks, and cached or
   other-chunk keys its window reaches that happen to be local), while every rank sends each
   other rank the keys of its own that the other's windows reach (``halo_send``, one message
   per sender and receiver, per TP index, one-shot; one grouped point-to-point operation per
   chip taking part, docs/mapping.md "Operations"), after the sender's projection;
3. ``window_attn`` step 1, on ranks with a halo: its queries against the halo keys (merged with
   step 0's output by the usual online-softmax rescale), after every halo message arrived;
4. ``o_proj``.
For w <= the chunk length and no cached prefix: every rank but one receives w - 1 keys from
each of its two ring neighbours (rank Np - 1's two chunks are adjacent): 2 (Np - 1) (w - 1)
keys per layer per sequence per TP index, whatever S (docs/mapping.md).
"""

from __future__ import annotations

import numpy as np

from ctxplan.mapping import collectives as coll
from ctxplan.mapping import ops
from ctxplan.mapping.attention import attention_shapes
from ctxplan.mapping.builder import GraphBuilder, Work, deps_of
from ctxplan.mapping.collectives import Rows, rows_of
from ctxplan.mapping.layout import Layout, kv_bytes_per_chip_token
from ctxplan.mapping.placement import needed_tokens, placement, window_starts
from ctxplan.mapping.prefill import AttentionEmitter, KindComm, kv_and_query_reads
from ctxplan.mapping.prefill_base import IntArray, PrefillSetup
from ctxplan.model.spec import SLIDING_ATTENTION, ModelSpec


def window_needs(m: ModelSpec, layer_type: str, context_length: int, cached: int,
                 cp: int) -> IntArray:
    """tokens[k, i] of :func:`ctxplan.mapping.placement.needed_tokens` for a windowed kind
    (per sequence): the diagonal is local, the rest the halo rank k sends rank i."""
    pl = placement(context_length, cached, cp)
    return needed_tokens(pl, window_starts(m, layer_type, pl.q_lo))


def span_of(m: ModelSpec, layer_type: str) -> int:
    span = m.sliding_window if layer_type == SLIDING_ATTENTION else m.attention_chunk_size
    assert span is not None
    return span


def window_emitter(b: GraphBuilder, setup: PrefillSetup, layer_type: str) -> AttentionEmitter:
    m, lay = setup.m, setup.lay
    att = attention_shapes(m, lay, layer_type)
    p = lay.precision
    w = p.attention_weights
    batch, tp = lay.batch, lay.tp
    tokens, chips, rank_of = setup.tokens, setup.chips, setup.rank_of
    need = window_needs(m, layer_type, lay.context_length, lay.cached, lay.cp) * batch
    own = np.diag(need).copy()                   # window keys a rank holds itself
    halo = need.copy()
    np.fill_diagonal(halo, 0)
    halo_in = halo.sum(axis=0)                   # keys each rank receives
    pairs = setup.pairs(layer_type) * batch
    local_pairs = np.diag(pairs).copy()
    halo_pairs = pairs.sum(axis=1) - local_pairs
    kv_read, q_read = kv_and_query_reads(att, lay)
    # The attention kernel's shape: a query sees at most the window (chunk) of keys.
    keys_seen = min(span_of(m, layer_type), lay.context_length)
    new_keys = setup.pl.new_tokens * batch
    # Halo messages: every (sender k, receiver i) with keys to send, per TP index.
    src_rank, dst_rank = np.nonzero(halo)
    j = np.arange(tp)
    src = (src_rank[:, None] * tp + j).ravel()
    dst = (dst_rank[:, None] * tp + j).ravel()
    nbytes = np.repeat(halo[src_rank, dst_rank], tp) * att.c_chip
    receivers = np.flatnonzero(halo_in > 0)
    hchips = (receivers[:, None] * tp + j).ravel()

    def emit(layer: int, prev: Rows) -> IntArray:
        qkv = b.compute(chips, ops.QKV_PROJ, att.projection(m, tokens[rank_of], lay), prev,
                        layer=layer)
        r = rank_of
        parts = [Work("attention", local_pairs[r] * att.pair_flops,
                      (new_keys[r] + own[r]) * kv_read + tokens[r] * q_read, p.attention,
                      m_rows=tokens[r], kv_tokens=keys_seen)]
        if att.standard_mla and own.any():
            # Local keys outside the rank's new chunks (cached ones) are up-projected here.
            parts.append(ops.linear_work(att.kv_b, own[r], lay, w))
        local = b.compute(chips, ops.WINDOW_ATTN, parts, qkv, layer=layer, step=0)
        done = local.copy()
        if len(src):
            # One grouped send / receive operation per chip with traffic (point to point: a
            # chip talks to at most its two ring neighbours), its fixed cost after the
            # sender's projection; step 1 waits for that operation on the receiver.
            arrived = coll.exchange(b, chips, src, dst, nbytes, rows_of(qkv), layer,
                                    ops.HALO_SEND, collective=False)
            hr = rank_of[hchips]
            deps = deps_of(local[hchips], arrived[hchips])
            parts = [Work("attention", halo_pairs[hr] * att.pair_flops,
                          halo_in[hr] * kv_read + tokens[hr] * q_read, p.attention,
                          m_rows=tokens[hr], kv_tokens=keys_seen)]
            if att.standard_mla:
                parts.append(ops.linear_work(att.kv_b, halo_in[hr], lay, w))
            done[hchips] = b.compute(hchips, ops.WINDOW_ATTN, parts, deps, layer=layer, step=1)
        return b.compute(chips, ops.O_PROJ, att.output(tokens[rank_of], lay), done,
                         layer=layer)

    return emit


def window_comm(m: ModelSpec, lay: Layout, layer_type: str, layers: int) -> KindComm:
    """Halo bytes: b * L * tp * c_chip * (keys each rank receives, summed)."""
    need = window_needs(m, layer_type, lay.context_length, lay.cached, lay.cp)
    np.fill_diagonal(need, 0)
    messages = int((need > 0).sum())
    return KindComm(layer_type, "halo", layers, 1 if messages else 0, messages * lay.tp,
                    lay.batch * layers * lay.tp * kv_bytes_per_chip_token(m, lay)
                    * int(need.sum()))
