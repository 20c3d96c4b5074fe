"""Sliding-window and chunked attention, in both phases (a window or chunk that holds the whole
context is full attention exactly, and runs as such: :func:`runs_as`).

**Prefill under CP: a halo exchange, not a ring.**

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

**Decode** (window w or chunk c shorter than S): a decode step's query sees the last min(S, w)
keys (chunked: at most the last min(S, c), the chunk it is in; we cost the fullest chunk, as
docs/model.md does). Those are the sequence's newest tokens, and decode writes every new token's
KV on the home (as full attention does), so after w steps the rank holding the last w tokens is
the home whatever the prompt's layout; we place the prompt's window there too (the handoff moves
those w tokens once per request, docs/mapping.md). So the query never leaves the home, and a
window layer moves nothing: ``q_proj``, ``window_attn`` over the window on the home chips (its
KV heads split over TP as everywhere), ``o_proj``. Keeping the window on the contiguous shard
that holds the prompt's last tokens instead would add a query round trip (two operations) per
window layer and put every sequence's window on one rank.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ctxplan.mapping import collectives as coll
from ctxplan.mapping import ops
from ctxplan.mapping.attention import attention_shapes
from ctxplan.mapping.builder import GraphBuilder, Work, deps_of
from ctxplan.mapping.collectives import Rows, rows_of
from ctxplan.mapping.decode_base import (
    DecodeEmitter,
    DecodePool,
    attention_parts,
    home_counts,
    local_comm,
)
from ctxplan.mapping.handoff_base import Pairs, add, held_tokens, kv_sources, sharded_pairs
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.kinds.base import AttentionKind, RankBytes
from ctxplan.mapping.kinds.full import sharded_kv
from ctxplan.mapping.layout import Layout, kv_bytes_per_chip_token
from ctxplan.mapping.placement import (
    PairsBelow,
    Placement,
    chunked_below,
    needed_tokens,
    placement,
    sliding_below,
)
from ctxplan.mapping.prefill_base import (
    AttentionEmitter,
    IntArray,
    PrefillSetup,
    kv_and_query_reads,
)
from ctxplan.model.kinds import kv_tokens
from ctxplan.model.spec import (
    CHUNKED_ATTENTION,
    FULL_ATTENTION,
    SLIDING_ATTENTION,
    WINDOW_ATTENTION,
    ModelSpec,
)

# The kinds whose mask is a sliding window of ``sliding_window`` keys (gpt-oss, Gemma 3; and
# DeepSeek-V4's window-only layers, which run this module's emitters over V4's attention block).
WINDOWS = (SLIDING_ATTENTION, WINDOW_ATTENTION)


def span_of(m: ModelSpec, layer_type: str) -> int:
    """The window w (sliding) or the chunk c (chunked) of the model's layers of this kind."""
    span = m.sliding_window if layer_type in WINDOWS else m.attention_chunk_size
    assert span is not None
    return span


def runs_as(layer_type: str) -> Callable[[ModelSpec, int], str]:
    """A window (chunk) that holds the whole context is exactly full attention (S <= w: query
    i sees every j <= i; S <= c: every token is in chunk 0), and runs as such."""

    def kind(m: ModelSpec, context_length: int) -> str:
        return FULL_ATTENTION if context_length <= span_of(m, layer_type) else layer_type

    return kind


def window_starts(m: ModelSpec, layer_type: str, positions: IntArray) -> IntArray:
    """:func:`ctxplan.model.kinds.window_start` element by element: the first key a query at
    each position sees."""
    if layer_type in WINDOWS:
        return np.maximum(positions - span_of(m, layer_type) + 1, 0)
    c = span_of(m, layer_type)
    return positions // c * c


def pairs_below(layer_type: str) -> Callable[[ModelSpec], PairsBelow]:
    """The kind's (query, key) mask for the model's window or chunk."""
    if layer_type in WINDOWS:
        return lambda m: sliding_below(span_of(m, layer_type))
    return lambda m: chunked_below(span_of(m, layer_type))


def window_needs(m: ModelSpec, layer_type: str, context_length: int, cached: int,
                 cp: int) -> IntArray:
    """tokens[k, i] of :func:`ctxplan.mapping.placement.needed_tokens` for a windowed kind
    (per sequence): the diagonal is local, the rest the halo rank k sends rank i."""
    pl = placement(context_length, cached, cp)
    return needed_tokens(pl, window_starts(m, layer_type, pl.q_lo))


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
    pairs = setup.pairs(layer_type, pairs_below(layer_type)(m)) * batch
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


def prefill_comm(m: ModelSpec, lay: Layout, layer_type: str, layers: int) -> KindComm:
    """Halo bytes: b * L * tp * c_chip * (keys each rank receives, summed)."""
    need = window_needs(m, layer_type, lay.context_length, lay.cached, lay.cp)
    np.fill_diagonal(need, 0)
    messages = int((need > 0).sum())
    c_chip = attention_shapes(m, lay, layer_type).c_chip
    return KindComm(layer_type, "halo", layers, 1 if messages else 0, messages * lay.tp,
                    lay.batch * layers * lay.tp * c_chip * int(need.sum()))


def decode_emitter(b: GraphBuilder, m: ModelSpec, lay: Layout, pool: DecodePool,
                   layer_type: str) -> DecodeEmitter:
    att = attention_shapes(m, lay, layer_type)
    keep = kv_tokens(m, layer_type, lay.context_length)   # min(S, w) or min(S, c)
    home, seqs, tokens = pool.home_chips, pool.home_seqs, pool.home_tokens
    attend = attention_parts(lay, att, pool, seqs, keep, lse=False)

    def emit(layer: int, prev: Rows) -> Rows:
        qp = b.compute(home, ops.Q_PROJ, att.projection(m, tokens, lay), prev[home],
                       layer=layer)
        attn = b.compute(home, ops.WINDOW_ATTN, attend, qp, layer=layer, step=0)
        o_ready = b.compute(home, ops.O_PROJ, att.output(tokens, lay), attn, layer=layer)
        return pool.home_rows(prev, o_ready)

    return emit


# -- memory and handoff ---------------------------------------------------------------------


def _overlap(start: int, length: int, lo: int, hi: int) -> int:
    """Tokens of [start, start + length) inside [lo, hi)."""
    return max(0, min(start + length, hi) - max(start, lo))


def prefill_kv(m: ModelSpec, lay: Layout, layer_type: str, layers: int,
               pl: Placement) -> RankBytes:
    """The last min(S, w) (min(S, c)) tokens of each sequence, on the rank(s) holding them
    (the rank's chunks); while a layer computes, the rank's own tokens and a window of context
    per chunk."""
    S, b = lay.context_length, lay.batch
    c_chip = kv_bytes_per_chip_token(m, lay)
    keep = kv_tokens(m, layer_type, S)
    held, transient = [], []
    for i in range(pl.cp):
        own = zip(pl.k_lo[i].tolist(), pl.k_hi[i].tolist(), strict=True)
        tokens = sum(_overlap(lo, hi - lo, S - keep, S) for lo, hi in own)
        held.append(b * layers * tokens * c_chip)
        transient.append(b * (int(pl.new_tokens[i]) + 2 * keep) * c_chip)
    return RankBytes(held, transient)


def decode_kv(m: ModelSpec, lay: Layout, layer_type: str, layers: int) -> list[int]:
    """The window of each sequence on its home rank (k mod Nd, as the decode emitter places
    it); a window holding the whole context runs as full attention, sharded like it."""
    keep = kv_tokens(m, layer_type, lay.context_length)
    if keep >= lay.context_length:
        return sharded_kv(m, lay, layers)
    c_chip = kv_bytes_per_chip_token(m, lay)
    return [homes * layers * keep * c_chip for homes in home_counts(lay.batch, lay.cp)]


def handoff_pairs(m: ModelSpec, layer_type: str, lay_p: Layout, lay_d: Layout,
                  pl: Placement) -> Pairs:
    """The window of each sequence, whole, to its home rank (shorter than S), else sharded
    as full attention's."""
    S = lay_p.context_length
    keep = kv_tokens(m, layer_type, S)
    if keep >= S:
        return sharded_pairs(m, lay_p, lay_d, pl)
    nd, tp_p, tp_d = lay_d.cp, lay_p.tp, lay_d.tp
    homes = home_counts(lay_p.batch, nd)
    src = kv_sources(m, lay_p, lay_d)
    c_d = kv_bytes_per_chip_token(m, lay_d)
    window = held_tokens(pl, S - keep, S)
    pairs: Pairs = {}
    for r, seqs in [(r, homes[r]) for r in range(nd) if homes[r]]:
        for i in np.flatnonzero(window).tolist():
            for j in range(tp_d):
                add(pairs, src[j], i, tp_p, r * tp_d + j, seqs * int(window[i]) * c_d)
    return pairs


KINDS = tuple(AttentionKind(
    layer_type,
    prefill_emitter=window_emitter, prefill_comm=prefill_comm,
    decode_emitter=decode_emitter, decode_comm=local_comm,
    prefill_kv=prefill_kv, decode_kv=decode_kv, handoff_pairs=handoff_pairs,
    pairs_below=pairs_below(layer_type), runs_as=runs_as(layer_type),
) for layer_type in (SLIDING_ATTENTION, CHUNKED_ATTENTION))
