"""Decode of DSA layers (DeepSeek-V3.2) with the KV sharded over Nd ranks: an exact top-k.

Each rank holds a contiguous S / Nd share of every sequence's MLA latents and index keys (the
DSA tier). The indexer must score every cached token, and the main attention reads only the
k best (k = ``index_topk``, 2048), wherever they are. We form the **exact** global top-k, the
tokens the model selects on one chip, as a sharded top-k search does: each shard finds its
local best and the lists are merged. The global top k is contained in the union of the shards'
top k, so merging those lists is exact:

1. ``q_proj`` on each home chip: absorbed MLA's projections and the indexer's (its queries,
   per-head weights and the new token's index key, written locally with its latent).
2. The queries to every rank in one collective (``passq_send``): per sequence the MLA query
   (heads / tp x 576 x act) and the indexer's (index_heads x index_dim FP8 values and an FP32
   weight per head, the query's scale folded in, as V3.2-Exp's ``Indexer.forward`` does).
3. ``dsa_index`` on every chip: every query scored against its shard's index keys (at FP8,
   2 H (d + 1) FLOPs per pair), the FP32 scores written and read back by a local top-k of
   min(k, shard) candidates (an FP32 score and an int32 position each).
4. If S > k: the candidate lists all-gathered over the ranks (``dsa_cand_send``, one collective:
   every rank sends every other rank its candidates for every sequence), then ``dsa_select``
   on every chip: the merge of the Nd lists gives each sequence's global top k, of which the
   rank keeps its own tokens. Every rank reaches the same selection. If S <= k every token is
   selected and this step is skipped.
5. ``dsa_attn`` on every chip: absorbed MLA over its selected tokens (reading their latents
   only), a partial output with its LSE; then the All2All to the homes, the merge and o_proj,
   as for full attention.

**Why all-gather the candidates rather than gather them on the home** (which would then send
each rank the selection's boundary, 8 B): that is two operations on the critical path instead of
one, and an operation's fixed cost (8 us inside a host, 85.8 us across hosts on the calibrated
clusters, docs/hardware.md) far exceeds the bytes it saves (Nd min(k, shard) x 8 B per sequence
per rank: 115 KB at Nd = 8, 2.3 us at 50 GB/s). **Why not the approximation** that skips step 4
(each shard attends its own local top k): it saves that one operation per layer but changes the
model's output (Nd k tokens attended, a shard whose tokens score low still contributing k of
them); we simulate what the model computes.

Which shards hold the selected tokens depends on the scores, which a simulation without data
cannot know; we spread the min(k, S) selected tokens evenly over the shards (``split_even``,
never more than a shard holds). The sparse attention reads about 1.2 MB per sequence per layer
at k = 2048, a few microseconds on any chip, so where it falls moves a step by at most that.

Under TP every chip of a rank holds the latents and index keys (MLA's latent is not split) and
runs the whole indexer for its shard, as in prefill (its linears are replicated, vLLM's
``Indexer``): the TP chips of a rank score the same tokens and each TP index forms its own top k,
so nothing crosses the TP group; the sparse attention splits the query heads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ctxplan.mapping import decode_base as base
from ctxplan.mapping import ops
from ctxplan.mapping.attention import AttentionShapes, attention_shapes
from ctxplan.mapping.builder import GraphBuilder, IdArray, Work, deps_of
from ctxplan.mapping.collectives import Rows, exchange, rows_of
from ctxplan.mapping.decode_base import DecodeEmitter, DecodePool
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.layout import Layout, decode_shard_tokens, split_even
from ctxplan.model.kinds import (
    INDEXER_SCORE_BYTES,
    INDEXER_SCORE_DTYPE,
    TOPK_ENTRY_BYTES,
    indexer_key_bytes,
    indexer_pair_flops,
)
from ctxplan.model.spec import INDEXED_ATTENTION, ModelSpec

CANDIDATE_BYTES = TOPK_ENTRY_BYTES   # a candidate: its FP32 score and its int32 position
BOUNDARY_BYTES = 8    # the selection's boundary: the k-th candidate's score and position
INDEX_WEIGHT_BYTES = 4  # the indexer's per-head weight of a query, FP32 (its scale folded in)


def index_query_bytes(m: ModelSpec) -> int:
    """Bytes of one token's indexer query as it travels: index_heads x index_dim FP8 values and
    an FP32 weight per head (8,448 B for DeepSeek-V3.2)."""
    assert m.dsa is not None
    return m.dsa.index_n_heads * (m.dsa.index_head_dim + INDEX_WEIGHT_BYTES)


@dataclass(frozen=True)
class IndexedCache:
    """What an exact sharded top-k decodes over: ``keys`` per sequence split over the shards
    (DSA: the S tokens; DeepSeek-V4's CSA: its floor(S / 4) compressed entries), each with an
    index key of ``index_key_bytes``, of which the top ``topk`` are attended, reading
    ``latent_bytes`` each."""

    keys: int
    topk: int
    index_key_bytes: int
    latent_bytes: int

    @property
    def select(self) -> bool:
        """Is there a selection to make (more keys than k)?"""
        return self.keys > self.topk

    def shards(self, cp: int) -> list[int]:
        return decode_shard_tokens(self.keys, cp)

    def selected(self, cp: int) -> list[int]:
        """Keys each shard attends per sequence: all of its own when keys <= k, else min(k,
        keys) spread evenly (never more than the shard holds: both are split_even, larger
        first)."""
        return self.shards(cp) if not self.select else split_even(self.topk, cp)

    def candidates(self, cp: int) -> list[int]:
        """Candidates each shard sends per sequence: its local top min(k, shard)."""
        return [min(self.topk, s) for s in self.shards(cp)]


def dsa_cache(m: ModelSpec, lay: Layout) -> IndexedCache:
    """DSA's: every token, its 132-B index key and its MLA latent (the rest of the tier)."""
    assert m.dsa is not None
    key_bytes = indexer_key_bytes(m)
    latent = attention_shapes(m, lay, INDEXED_ATTENTION).c_chip - key_bytes
    return IndexedCache(lay.context_length, m.dsa.index_topk, key_bytes, latent)


def selected_per_shard(m: ModelSpec, context_length: int, cp: int) -> list[int]:
    """DSA's tokens each shard attends per sequence (:meth:`IndexedCache.selected`)."""
    assert m.dsa is not None
    return IndexedCache(context_length, m.dsa.index_topk, 0, 0).selected(cp)


def candidates_per_shard(m: ModelSpec, context_length: int, cp: int) -> list[int]:
    """DSA's candidates each shard sends per sequence (:meth:`IndexedCache.candidates`)."""
    assert m.dsa is not None
    return IndexedCache(context_length, m.dsa.index_topk, 0, 0).candidates(cp)


@dataclass(frozen=True)
class IndexedKinds:
    """The op kinds an indexed decode emits for its indexer and its attention."""

    index: str = ops.DSA_INDEX
    attend: str = ops.DSA_ATTN


def dsa_emitter(b: GraphBuilder, m: ModelSpec, lay: Layout, pool: DecodePool) -> DecodeEmitter:
    return indexed_emitter(b, m, lay, pool, attention_shapes(m, lay, INDEXED_ATTENTION),
                           dsa_cache(m, lay))


HomeWork = Callable[[int, IdArray], IdArray]
"""home_attention(layer, q_proj tasks of the home chips) -> per home chip, a partial output (with
its LSE) of the home's own keys besides the selection, merged with the shards' (CSA's window)."""


def indexed_emitter(b: GraphBuilder, m: ModelSpec, lay: Layout, pool: DecodePool,
                    att: AttentionShapes, cache: IndexedCache, *,
                    kinds: IndexedKinds = IndexedKinds(), extra_q: Sequence[Work] = (),
                    home_keys: int = 0, home_attention: HomeWork | None = None
                    ) -> DecodeEmitter:
    """The exact sharded top-k over ``cache`` (the module docstring), ``pool``'s shards being
    the cache's. ``extra_q``: work the home's q_proj does besides the projections (V4's
    compressor). ``home_keys``: keys every sequence also attends on its home (CSA's window):
    with one rank in the attention op itself, else as ``home_attention``'s partial, merged."""
    assert m.dsa is not None
    p = lay.precision
    n_rank, batch = pool.n_rank, lay.batch
    selected = np.array(cache.selected(n_rank), np.int64)
    cands = np.array(cache.candidates(n_rank), np.int64)
    index_dtype = INDEXER_SCORE_DTYPE if INDEXER_SCORE_DTYPE in b.chip.peak_flops_per_s \
        else p.attention
    iq_bytes = index_query_bytes(m)

    q = pool.q

    def index_work(seqs: IdArray, shard: IdArray, cand: IdArray) -> list[Work]:
        """Scores of ``seqs`` sequences' q queries against ``shard`` keys each (the keys read
        once), then the local top-k of each query."""
        keys = seqs * shard
        pairs = keys * q
        return [Work("attention", pairs * indexer_pair_flops(m),
                     keys * cache.index_key_bytes + seqs * q * iq_bytes
                     + 2 * INDEXER_SCORE_BYTES * pairs + seqs * q * cand * CANDIDATE_BYTES,
                     index_dtype, m_rows=seqs * q, kv_tokens=shard)]

    home, seqs_home = pool.home_chips, pool.home_seqs
    tokens_home = pool.home_tokens
    latent = cache.latent_bytes

    def emit(layer: int, prev: Rows) -> Rows:
        qp = b.compute(home, ops.Q_PROJ, [*att.projection(m, tokens_home, lay), *extra_q],
                       prev[home], layer=layer)
        if n_rank == 1:
            idx = b.compute(home, kinds.index,
                            index_work(seqs_home, pool.shards[0], cands[0]), qp, layer=layer)
            attn = b.compute(home, kinds.attend,
                             base.attention_parts(lay, att, pool, seqs_home,
                                                  selected[0] + home_keys,
                                                  key_bytes=latent, lse=False),
                             idx, layer=layer, step=1)
            o_ready = b.compute(home, ops.O_PROJ, att.output(tokens_home, lay), attn,
                                layer=layer)
            return pool.home_rows(rows_of(attn), o_ready)
        chips, rank = pool.chips, pool.rank
        everyone = np.full(len(chips), batch, np.int64)   # every chip holds every query
        q_rows = base.broadcast_queries(b, pool, pool.home_rows(prev, qp),
                                        pool.q_msg + q * iq_bytes, layer)
        at_home = None if home_attention is None else home_attention(layer, qp)
        idx = b.compute(chips, kinds.index,
                        index_work(everyone, pool.shards[rank], cands[rank]), q_rows,
                        layer=layer, step=0)
        ready: Rows = rows_of(idx)
        if cache.select:
            ready = _select(b, lay, pool, idx, cands, layer)
        attn = b.compute(chips, kinds.attend,
                         base.attention_parts(lay, att, pool, everyone, selected[rank],
                                              key_bytes=latent),
                         ready, layer=layer, step=1)
        after = base.return_partials(b, pool, rows_of(attn), layer)
        own = [attn[home][:, None]] if at_home is None else [attn[home][:, None],
                                                              at_home[:, None]]
        merge_deps = np.concatenate([*own, after[home]], axis=1)
        merged = base.merge(b, lay, att, pool, merge_deps, layer, parts=n_rank + len(own) - 1)
        o_ready = b.compute(home, ops.O_PROJ, att.output(tokens_home, lay), merged,
                            layer=layer)
        return pool.home_rows(after, o_ready)

    return emit


def _select(b: GraphBuilder, lay: Layout, pool: DecodePool, idx: IdArray, cands: IdArray,
            layer: int) -> Rows:
    """The exact global top k: candidates to the homes, the merge there, the boundary back.
    Returns per chip what its sparse attention waits for."""
    n_rank, chips, rank = pool.n_rank, pool.chips, pool.rank
    home = pool.home_chips
    # Every chip sends each other home (same TP index) its candidates for that home's sequences.
    src = np.repeat(chips, n_rank - 1)
    hop = np.tile(np.arange(1, n_rank), len(chips))
    dst_rank = (rank[src] + hop) % n_rank
    keep = pool.counts[dst_rank] > 0
    src, dst_rank = src[keep], dst_rank[keep]
    got = exchange(b, chips, src, pool.chip(dst_rank, src),
                   pool.tokens[dst_rank] * cands[rank[src]] * CANDIDATE_BYTES, rows_of(idx),
                   layer, ops.DSA_CAND_SEND)
    # The home merges its own list and the Nd - 1 received: every candidate read once.
    merge_bytes = pool.home_tokens * int(cands.sum()) * CANDIDATE_BYTES
    chosen = b.compute(home, ops.DSA_SELECT,
                       [Work("memory", 0.0, merge_bytes, lay.precision.attention)],
                       np.concatenate([idx[home][:, None], got[home]], axis=1), layer=layer)
    # The boundary to every other rank, in one collective.
    src = np.repeat(home, n_rank - 1)
    hop = np.tile(np.arange(1, n_rank), len(home))
    dst = pool.chip((rank[src] + hop) % n_rank, src)
    back = exchange(b, chips, src, dst, pool.tokens[rank[src]] * BOUNDARY_BYTES,
                    pool.home_rows(got, chosen), layer, ops.DSA_SELECT_SEND)
    return deps_of(idx, back)


def indexed_decode_analytic_bytes(m: ModelSpec, lay: Layout, cache: IndexedCache,
                                  layers: int) -> int:
    """Closed form per layer, per TP index (times tp), for b sequences over Nd ranks:
    the queries b (Nd - 1) (q + index q) and the partial outputs b (Nd - 1) (output + LSE);
    when there is a selection (more keys than k) the candidates, each rank r sending every
    other home min(k, shard_r) entries per sequence there, sum_r min(k, shard_r) (b - b_r) x 8
    (b_r: the sequences whose home is r), and the boundary b (Nd - 1) x 8."""
    nd, batch = lay.cp, lay.batch
    if nd == 1:
        return 0
    q_msg, o_msg = base.messages(m, lay)
    per = batch * (nd - 1) * (q_msg + index_query_bytes(m) + o_msg)
    if cache.select:
        counts = base.home_counts(batch, nd)
        cands = cache.candidates(nd)
        per += CANDIDATE_BYTES * sum(c * (batch - n) for c, n in zip(cands, counts, strict=True))
        per += batch * (nd - 1) * BOUNDARY_BYTES
    return layers * lay.tp * per * base.tokens_per_step(m, lay)   # per query token


def indexed_decode_comm(m: ModelSpec, lay: Layout, layer_type: str, layers: int,
                        cache: IndexedCache) -> KindComm:
    """The pattern's sends per layer (all TP indices), its sequential exchange steps and its
    closed-form bytes."""
    nd, tp = lay.cp, lay.tp
    homes = sum(1 for c in base.home_counts(lay.batch, nd) if c)
    # Each exchange sends Nd - 1 messages per home chip: the queries out to, and the partials
    # back from, every other rank; with a selection also the candidates in from, and the
    # boundary out to, every other rank.
    select = nd > 1 and cache.select
    sends = (4 if select else 2) * homes * tp * (nd - 1)
    return KindComm(layer_type, "pass-q+top-k", layers, 1 if select else 0, sends,
                    indexed_decode_analytic_bytes(m, lay, cache, layers))


def dsa_decode_comm(m: ModelSpec, lay: Layout, layer_type: str, layers: int) -> KindComm:
    """DSA's decode pattern (:func:`indexed_decode_comm` over every token)."""
    return indexed_decode_comm(m, lay, layer_type, layers, dsa_cache(m, lay))


def decode_activations(m: ModelSpec, lay: Layout) -> int:
    """One layer at a time: every query's FP32 scores over the chip's shard, kept until the
    selection's boundary arrives, and on a home the Nd candidate lists."""
    if m.dsa is None:
        return 0
    shard = decode_shard_tokens(lay.context_length, lay.cp)[0]
    select = lay.cp > 1 and lay.context_length > m.dsa.index_topk
    cands = lay.cp * min(m.dsa.index_topk, shard) if select else 0
    return lay.batch * (shard * INDEXER_SCORE_BYTES + cands * TOPK_ENTRY_BYTES)
