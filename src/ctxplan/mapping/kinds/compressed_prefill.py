"""Prefill of DeepSeek-V4's CSA and HCA layers under CP (the window-only kind runs
:mod:`.window`'s halo exchange over V4's attention block).

Where things are (docs/mapping.md, "DeepSeek-V4"): the new tokens in the zigzag chunks of
:mod:`ctxplan.mapping.placement`; a compressed entry j (the tokens [j r, (j + 1) r)) on the rank
holding its last token (j + 1) r - 1, where it is pooled (a cached prefix's entries where its
own prefill left them). Per layer, on every chip of every rank (TP replicates the latent: each TP
chip runs the whole pattern for its heads):

1. ``qkv_proj``: mHC's mix and norm, the query (wq_a, wq_b), the latent (wkv), the compressor's
   kv and gate rows (and in CSA the indexer's query, weights and compressor) of the rank's
   tokens;
2. the halo (``halo_send``, one grouped point-to-point operation): from the ranks holding them,
   the w - 1 keys before each chunk its window reaches (584 B each), and the compressor rows
   of the tokens before a chunk that its first entry pools (2 x overlap x d values per token
   and compressor, in the activations' dtype: an entry pools r tokens, CSA's overlapping
   windows 2 r); a cached prefix's rows are its compressor state, on rank 0 with the prefix's
   end;
3. ``compress``: the rank's entries pooled (the gate's softmax and the weighted sums,
   ``compressor_flops_per_token``; reading the rows, writing the entries and the window);
4. the entries of the other ranks, by ``prefill_ring``:

   * ``all-gather`` (SGLang's CP for V4): one ring all-gather per TP index of every rank's
     entries (``entry_gather``; NCCL's equal-size all-gather: each rank's share padded to the
     largest), then one op over everything: HCA's attention (``hca_attn``) over the window and
     every visible entry; CSA's indexer over every visible entry with the top-k selection
     (``csa_index``), then the sparse attention over the window and the selected entries
     (``csa_attn``);
   * ``pass-kv`` (the ring, any other value): the entry blocks pass around the ring of
     :func:`ctxplan.mapping.prefill_base.emit_ring` while each step works on the block there:
     HCA attends it (the window with the rank's own block at step 0); CSA scores it, merges the
     scores into each query's running top-k and keeps the block, and after the last block
     selects and attends (as DSA's ring does, docs/mapping.md "DSA");
5. ``o_proj``: the grouped wo_a (a TP chip's groups) and wo_b.

What we read from the engines and what we chose: that SGLang all-gathers each rank's KV rather
than passing it round a ring is in its V4 code; that what it gathers is the compressed entries
(not the tokens' latents before pooling, which would move 4 x (CSA) and 128 x (HCA) more) and
that a rank's first entry takes the compressor rows of the tokens before its chunk from their
holder is our reading. The attention's (query, entry) pairs are the model's exactly
(:func:`ctxplan.model.kinds.attended_pairs`; between ranks by :func:`entry_below`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctxplan.mapping import collectives as coll
from ctxplan.mapping import ops
from ctxplan.mapping.attention import attention_shapes
from ctxplan.mapping.builder import GraphBuilder, Work
from ctxplan.mapping.collectives import Rows, rows_of
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.kinds.window import window_needs
from ctxplan.mapping.layout import Layout
from ctxplan.mapping.placement import (
    Placement,
    entry_below,
    needed_tokens,
    placement,
    sliding_below,
)
from ctxplan.mapping.prefill_base import (
    AttentionEmitter,
    IntArray,
    PrefillSetup,
    emit_ring,
    kv_and_query_reads,
)
from ctxplan.model import compressed as c
from ctxplan.model.kinds import (
    INDEXER_SCORE_BYTES,
    INDEXER_SCORE_DTYPE,
    TOPK_ENTRY_BYTES,
    indexer_pair_flops,
)
from ctxplan.model.spec import COMPRESSED_SPARSE_ATTENTION, WINDOW_ATTENTION, ModelSpec

ALL_GATHER = "all-gather"
RINGS = ("pass-kv", ALL_GATHER)   # what CSA and HCA layers run; pass-kv under any other value


@dataclass(frozen=True)
class EntryPlacement:
    """Per sequence, where one CSA / HCA layer's entries are and what a rank needs from the
    others (arrays over the CP ranks; matrices [sender, receiver])."""

    ratio: int
    stored_bytes: int            # an entry as kept and sent (CSA: with its indexer key)
    row_bytes: int               # a token's compressor rows as they travel (activations)
    held: IntArray               # entries each rank holds (cached and new)
    formed: IntArray             # entries each rank pools (of its new tokens)
    window_kept: IntArray        # of the last w tokens, those on the rank's new chunks
    window_need: IntArray        # [k, i] window keys rank k holds that rank i's chunks reach
    row_need: IntArray           # [k, i] compressor rows rank k holds that rank i's pooling needs

    def halo_bytes(self, entry_bytes: int) -> IntArray:
        """[k, i] bytes rank k sends rank i (the diagonal zeroed: local)."""
        out = self.window_need * entry_bytes + self.row_need * self.row_bytes
        np.fill_diagonal(out, 0)
        return np.asarray(out, np.int64)

    @property
    def padded_share(self) -> int:
        """Entries per rank of the all-gather (each rank's share padded to the largest)."""
        return int(self.held.max())


def _entries_in(lo: IntArray, hi: IntArray, r: int) -> IntArray:
    """Entries whose last token lies in [lo, hi) (entry j ends at (j + 1) r - 1)."""
    return np.asarray(hi // r - lo // r, np.int64)


def entry_placement(m: ModelSpec, lay: Layout, layer_type: str,
                    pl: Placement | None = None) -> EntryPlacement:
    S = lay.context_length
    pl = placement(S, lay.cached, lay.cp) if pl is None else pl
    r = c.compress_ratio(m, layer_type)
    overlap = c.COMPRESSOR_OVERLAP[layer_type]
    act = lay.precision.activation_bytes
    row_bytes = sum(2 * overlap * d for d in c.compressor_widths(m, layer_type)) * act
    held = _entries_in(pl.k_lo, pl.k_hi, r).sum(axis=1)
    formed = _entries_in(pl.q_lo, pl.q_hi, r).sum(axis=1)
    w = c.window(m)
    kept = np.maximum(np.minimum(pl.q_hi, S) - np.maximum(pl.q_lo, S - w), 0).sum(axis=1)
    win = window_needs(m, WINDOW_ATTENTION, S, lay.cached, lay.cp)
    # The first entry a chunk pools starts (overlap - 1) r tokens before the entry holding the
    # chunk's first token; a chunk that completes no entry needs no rows.
    first = pl.q_lo // r
    completes = (first + 1) * r - 1 < pl.q_hi
    starts = np.where(completes, np.maximum((first + 1 - overlap) * r, 0), pl.q_lo)
    # Rows exist for the new tokens (on their ranks) and, of a cached prefix, for the tokens of
    # its entries being formed: its compressor state, on rank 0 with the prefix's end.
    P = lay.cached
    state_lo = np.zeros((lay.cp, 1), np.int64)
    state_hi = np.zeros((lay.cp, 1), np.int64)
    if P:
        state_lo[0, 0] = max((P // r + 1 - overlap) * r, 0)
        state_hi[0, 0] = P
    k_lo = np.concatenate([pl.q_lo, state_lo], axis=1)
    k_hi = np.concatenate([pl.q_hi, state_hi], axis=1)
    rows = needed_tokens(pl, starts, k_lo, k_hi)
    return EntryPlacement(r, c.stored_entry_bytes(m, layer_type, lay.c_kv_bytes), row_bytes,
                          np.asarray(held, np.int64), np.asarray(formed, np.int64),
                          np.asarray(kept, np.int64), win, rows)


def prefill_emitter(b: GraphBuilder, setup: PrefillSetup, layer_type: str) -> AttentionEmitter:
    m, lay, pl = setup.m, setup.lay, setup.pl
    att = attention_shapes(m, lay, layer_type)
    p = lay.precision
    batch, tp, cp = lay.batch, lay.tp, lay.cp
    tokens, chips, rank_of, ranks = setup.tokens, setup.chips, setup.rank_of, setup.ranks
    ep = entry_placement(m, lay, layer_type, pl)
    csa = layer_type == COMPRESSED_SPARSE_ATTENTION
    entry = att.c_chip
    _, q_read = kv_and_query_reads(att, lay)
    w = c.window(m)
    win_pairs = setup.pairs(WINDOW_ATTENTION, sliding_below(w)).sum(axis=1) * batch
    entry_pairs = setup.pairs(f"entries_{ep.ratio}", entry_below(ep.ratio)) * batch
    # CSA attends the top k of the entries a query sees (HCA all of them: ``entry_pairs``).
    attended = np.array([sum(c.entry_pairs(m, layer_type, int(hi - lo), int(lo))
                             for lo, hi in zip(pl.q_lo[i], pl.q_hi[i], strict=True))
                         for i in range(cp)], np.int64) * batch
    halo_in_keys = (ep.window_need.sum(axis=0) - np.diag(ep.window_need)) * batch
    halo_in_rows = (ep.row_need.sum(axis=0) - np.diag(ep.row_need)) * batch
    window_keys = tokens + halo_in_keys          # the keys the rank's windows read
    seen = c.compressed_entries(m, layer_type, lay.context_length)
    topk = min(m.dsa.index_topk, seen) if csa and m.dsa is not None else seen
    kv_shape = w + topk                           # keys one query attends, for the kernel shape

    # The halo: one message per (sender, receiver) with anything to send, per TP index.
    halo = ep.halo_bytes(entry) * batch
    src_rank, dst_rank = np.nonzero(halo)
    j = np.arange(tp)
    h_src = (src_rank[:, None] * tp + j).ravel()
    h_dst = (dst_rank[:, None] * tp + j).ravel()
    h_bytes = np.repeat(halo[src_rank, dst_rank], tp)
    groups = ranks[None, :] * tp + j[:, None]     # one all-gather per TP index
    order = groups.ravel()

    pool_flops = tokens * c.compressor_flops_per_token(m, layer_type)
    pool_bytes = ((tokens + halo_in_rows) * ep.row_bytes + ep.formed * batch * ep.stored_bytes
                  + ep.window_kept * batch * entry)
    index_dtype = (INDEXER_SCORE_DTYPE if INDEXER_SCORE_DTYPE in b.chip.peak_flops_per_s
                   else p.attention)
    index_key = c.tier_index_key_bytes(m, lay.c_kv_bytes) if csa else 0
    index_q = m.dsa.index_n_heads * m.dsa.index_head_dim if csa and m.dsa is not None else 0
    pair_index = indexer_pair_flops(m) if csa else 0.0
    visible = entry_pairs.sum(axis=1)             # (query, entry) pairs of each rank's queries
    everything = np.full(cp, int(ep.held.sum()) * batch, np.int64)   # the gathered entries

    # Each work below is for the ranks ``at`` (one chip each: rank_of for every chip, or the
    # ranks of one TP index in a ring step).
    def index_work(at: IntArray, pairs: IntArray, entries: IntArray) -> Work:
        """The indexer's scores of the ranks' queries against ``entries`` entries (FP8),
        written and read back in FP32 for the top-k."""
        return Work("attention", pairs * pair_index,
                    entries * index_key + tokens[at] * index_q
                    + 2 * INDEXER_SCORE_BYTES * pairs,
                    index_dtype, m_rows=tokens[at], kv_tokens=entries / batch)

    def topk_work(at: IntArray, merge: bool) -> Work:
        """The selection: each query's top k written as (position, score) pairs, and read back
        first when merging into a running top-k (the ring's steps after the first)."""
        return Work("memory", 0.0, (2.0 if merge else 1.0) * TOPK_ENTRY_BYTES * topk
                    * tokens[at], "bf16")

    def sparse_work(at: IntArray) -> Work:
        """CSA: the window and the selected entries, each gathered per query (584 B a pair)."""
        pairs = win_pairs[at] + attended[at]
        return Work("attention", pairs * att.pair_flops, pairs * entry + tokens[at] * q_read,
                    p.attention, m_rows=tokens[at], kv_tokens=kv_shape, causal=False,
                    head_dim=att.head_dim)

    def dense_work(at: IntArray, pairs: IntArray, keys: IntArray) -> Work:
        """HCA: ``pairs`` over ``keys`` keys, each read once (entries and window keys)."""
        return Work("attention", pairs * att.pair_flops, keys * entry + tokens[at] * q_read,
                    p.attention, m_rows=tokens[at], kv_tokens=kv_shape, head_dim=att.head_dim)

    def gathered(layer: int, comp: IntArray) -> IntArray:
        ready: Rows = rows_of(comp)
        if cp > 1:
            got = coll.all_gather(b, groups, ready[order], cp * ep.padded_share * batch
                                  * ep.stored_bytes, layer, ops.ENTRY_GATHER)
            ready = np.empty_like(got)
            ready[order] = got
        r = rank_of
        if not csa:
            work = dense_work(r, win_pairs[r] + visible[r], window_keys[r] + everything[r])
            return b.compute(chips, ops.HCA_ATTN, [work], ready, layer=layer)
        idx = b.compute(chips, ops.CSA_INDEX,
                        [index_work(r, visible[r], everything[r]), topk_work(r, False)],
                        ready, layer=layer)
        return b.compute(chips, ops.CSA_ATTN, [sparse_work(r)], idx, layer=layer)

    def step_work(step: int, k: IntArray) -> list[Work]:
        block = ep.held[k] * batch
        pairs = entry_pairs[ranks, k]
        if not csa:
            if step == 0:   # the rank's own block, and its window
                return [dense_work(ranks, pairs + win_pairs, block + window_keys)]
            return [dense_work(ranks, pairs, block)]
        parts = [index_work(ranks, pairs, block)]
        if step > 0:
            parts.append(topk_work(ranks, True))
        if step == cp - 1:
            parts.append(sparse_work(ranks))
        return parts

    def emit(layer: int, prev: Rows) -> IntArray:
        r = rank_of
        qkv = b.compute(chips, ops.QKV_PROJ, att.projection(m, tokens[r], lay), prev,
                        layer=layer)
        ready = rows_of(qkv)
        if len(h_src):
            ready = coll.exchange(b, chips, h_src, h_dst, h_bytes, ready, layer,
                                  ops.HALO_SEND, collective=False)
        comp = b.compute(chips, ops.COMPRESS,
                         [Work("memory", pool_flops[r], pool_bytes[r], "bf16")], ready,
                         layer=layer)
        if lay.policy.prefill_ring == ALL_GATHER:
            done = gathered(layer, comp)
        else:
            done = emit_ring(b, setup, layer, rows_of(comp), step_work=step_work,
                             send_bytes=lambda k: ep.held[k] * batch * ep.stored_bytes,
                             compute_kind=ops.CSA_INDEX if csa else ops.HCA_ATTN,
                             send_kind=ops.PASS_KV_SEND,
                             last_kind=ops.CSA_ATTN if csa else None)
        return b.compute(chips, ops.O_PROJ, att.output(tokens[r], lay), done, layer=layer)

    return emit


# -- closed forms ---------------------------------------------------------------------------


def prefill_comm(m: ModelSpec, lay: Layout, layer_type: str, layers: int) -> KindComm:
    """What the pattern moves per TP index and layer, times tp and the layers:

    * the halo: sum over (k, i) of the window keys x 584 + the compressor rows x their bytes;
    * ``all-gather``: Np (Np - 1) x the padded share (the most entries a rank holds) x the
      entry bytes (a ring all-gather: every rank receives every other rank's share);
    * ``pass-kv``: (Np - 1) x floor(S / r) x the entry bytes (every entry, cached or new,
      visits every other rank once; the ranks hold floor(S / r) entries between them)."""
    ep = entry_placement(m, lay, layer_type)
    cp, tp, b = lay.cp, lay.tp, lay.batch
    entry = c.entry_bytes(m)
    halo = ep.halo_bytes(entry)
    halo_msgs = int((halo > 0).sum())
    if lay.policy.prefill_ring == ALL_GATHER:
        moved = cp * (cp - 1) * ep.padded_share * ep.stored_bytes
        pattern = "all-gather+halo"
    else:
        moved = (cp - 1) * (lay.context_length // ep.ratio) * ep.stored_bytes
        pattern = "pass-kv+halo"
    sends = tp * (cp * (cp - 1) + halo_msgs)
    return KindComm(layer_type, pattern, layers, cp - 1, sends,
                    b * layers * tp * (moved + int(halo.sum())))

