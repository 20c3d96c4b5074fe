"""DeepSeek-V4's kinds (window only, CSA, HCA), in both phases.

* window only: :mod:`.window`'s halo exchange in prefill and the window on the home in decode,
  over V4's attention block (MQA over the 512-wide latent, 584-B entries);
* CSA and HCA: prefill in :mod:`.compressed_prefill` (the halo, the pooling, then the entries
  of the other ranks by ``prefill_ring``: SGLang's all-gather or the pass-KV ring), decode in
  :mod:`.compressed_decode` (the entries sharded over Nd like a KV cache, the window and the
  compressor state on the home; CSA's top k selected exactly across the shards as DSA's).

**Memory** (docs/mapping.md, "Memory"; the placement the engines use). The latent is MQA, so each
TP chip of a rank holds all of it (TP replicates the KV, as for MLA). Every V4 layer keeps a ring
of its last w tokens' entries; a CSA / HCA layer also one compressed entry per r tokens and a
compressor state.

* decode: the compressed entries sharded over the Nd ranks like a KV cache (split evenly), the
  window rings and the compressor states on each sequence's home rank (k mod Nd), where the new
  token is written;
* prefill: each rank keeps the entries its own tokens complete (entry j, tokens [j r, (j+1) r),
  is held by the rank holding token (j+1) r - 1), the window tokens among its own, and a
  compressor state per layer (a bound: each rank pools its own chunks). While one layer is
  computed a rank also holds that layer's entries of the whole sequence (the all-gather's
  padded shares, or the blocks a ring passes: at most as much) and its halo (the w tokens
  before each of its query chunks, and the compressor rows its first entries pool).
* decode activations, per CSA layer being computed: every query's FP32 indexer scores over the
  chip's shard of entries, and on a home the Nd ranks' candidate lists for the global top-k (as
  DSA's).

**The handoff** moves what decode keeps (byte for byte ``decode_kv``): each decode rank's share
of the entries from the prefill ranks holding them, and each sequence's window (from the ranks
holding its last w tokens) and compressor state (from the rank holding its last token, which
pooled its last entries) to its home.
"""

from __future__ import annotations

import numpy as np

from ctxplan.mapping import ops
from ctxplan.mapping.decode_base import home_counts, local_comm
from ctxplan.mapping.handoff_base import Pairs, add, held_tokens, kv_sources
from ctxplan.mapping.kinds import compressed_decode, compressed_prefill
from ctxplan.mapping.kinds.base import AttentionKind, HandoffReady, RankBytes, no_activations
from ctxplan.mapping.kinds.compressed_prefill import entry_placement
from ctxplan.mapping.kinds.window import decode_emitter as window_decode
from ctxplan.mapping.kinds.window import prefill_comm as window_comm
from ctxplan.mapping.kinds.window import window_emitter
from ctxplan.mapping.layout import Layout, split_even
from ctxplan.mapping.placement import Placement, sliding_below
from ctxplan.model.compressed import (
    compress_ratio,
    compressed_entries,
    compressor_state_bytes,
    entry_bytes,
    stored_entry_bytes,
    window,
    window_tokens,
)
from ctxplan.model.kinds import INDEXER_SCORE_BYTES, TOPK_ENTRY_BYTES
from ctxplan.model.spec import (
    COMPRESSED_LAYER_TYPES,
    COMPRESSED_SPARSE_ATTENTION,
    WINDOW_ATTENTION,
    ModelSpec,
)


def _per_sequence_home(m: ModelSpec, lay: Layout, layer_type: str) -> int:
    """What a sequence keeps of one layer on its home: the window ring and the compressor state."""
    return (window_tokens(m, lay.context_length) * entry_bytes(m)
            + compressor_state_bytes(m, layer_type))


def prefill_kv(m: ModelSpec, lay: Layout, layer_type: str, n: int, pl: Placement) -> RankBytes:
    S, b = lay.context_length, lay.batch
    entry, w = entry_bytes(m), window(m)
    r = compress_ratio(m, layer_type)
    state = compressor_state_bytes(m, layer_type)
    ep = entry_placement(m, lay, layer_type, pl) if r else None
    held, transient = [], []
    for i in range(lay.cp):
        own = list(zip(pl.k_lo[i].tolist(), pl.k_hi[i].tolist(), strict=True))
        ring = sum(max(0, min(hi, S) - max(lo, S - w)) for lo, hi in own)
        halo = len(pl.q_lo[i]) * window_tokens(m, S) * entry   # w keys before each chunk
        if ep is None:
            held.append(b * n * ring * entry)
            transient.append(b * halo)
            continue
        gathered = lay.cp * ep.padded_share * ep.stored_bytes
        rows = int(ep.row_need[:, i].sum()) * ep.row_bytes
        held.append(b * n * (int(ep.held[i]) * ep.stored_bytes + ring * entry + state))
        transient.append(b * (gathered + halo + rows))
    return RankBytes(held, transient)


def decode_kv(m: ModelSpec, lay: Layout, layer_type: str, n: int) -> list[int]:
    size = stored_entry_bytes(m, layer_type, lay.c_kv_bytes)
    shards = split_even(compressed_entries(m, layer_type, lay.context_length), lay.cp)
    home = _per_sequence_home(m, lay, layer_type)
    b, cp = lay.batch, lay.cp
    return [n * (b * shards[r] * size + len(range(r, b, cp)) * home) for r in range(cp)]


def csa_decode_activations(m: ModelSpec, lay: Layout) -> int:
    """One CSA layer at a time: the FP32 indexer scores over the chip's shard of entries, and
    the Nd candidate lists a home merges when there is a selection to make."""
    assert m.dsa is not None
    total = compressed_entries(m, COMPRESSED_SPARSE_ATTENTION, lay.context_length)
    shard = split_even(total, lay.cp)[0]
    topk = m.dsa.index_topk
    cands = lay.cp * min(topk, shard) if lay.cp > 1 and total > topk else 0
    return lay.batch * (shard * INDEXER_SCORE_BYTES + cands * TOPK_ENTRY_BYTES)


def handoff_pairs(m: ModelSpec, layer_type: str, lay_p: Layout, lay_d: Layout,
                  pl: Placement) -> Pairs:
    """Per layer: decode rank r's shard of the entries (split_even over floor(S / r), in order)
    from the prefill ranks holding them; each sequence's window and compressor state to its
    home, the window from the ranks holding the last w tokens, the state from the one holding
    the last token. Every TP chip of a decode rank takes a whole copy (MQA)."""
    S, b = lay_p.context_length, lay_p.batch
    nd, tp_p, tp_d = lay_d.cp, lay_p.tp, lay_d.tp
    src = kv_sources(m, lay_p, lay_d)
    entry = entry_bytes(m)
    r = compress_ratio(m, layer_type)
    pairs: Pairs = {}

    def give(rank_p: int, rank_d: int, nbytes: int) -> None:
        for j in range(tp_d):
            add(pairs, src[j], rank_p, tp_p, rank_d * tp_d + j, nbytes)

    if r:
        size = stored_entry_bytes(m, layer_type, lay_d.c_kv_bytes)
        lo, hi = pl.k_lo // r, pl.k_hi // r       # entries ending in each rank's ranges
        start = 0
        for rank_d, shard in enumerate(split_even(compressed_entries(m, layer_type, S), nd)):
            got = np.maximum(np.minimum(hi, start + shard) - np.maximum(lo, start), 0)
            for i, count in enumerate(got.sum(axis=1).tolist()):
                give(i, rank_d, b * count * size)
            start += shard
    window_tokens_by_rank = held_tokens(pl, S - window_tokens(m, S), S)
    last = int(np.flatnonzero(held_tokens(pl, S - 1, S))[0])
    state = compressor_state_bytes(m, layer_type)
    for rank_d, seqs in enumerate(home_counts(b, nd)):
        if not seqs:
            continue
        for i in np.flatnonzero(window_tokens_by_rank).tolist():
            give(i, rank_d, seqs * int(window_tokens_by_rank[i]) * entry)
        give(last, rank_d, seqs * state)
    return pairs


def _kind(layer_type: str) -> AttentionKind:
    """The window-only kind runs window.py's emitters over V4's block; CSA and HCA their own."""
    if layer_type == WINDOW_ATTENTION:
        return AttentionKind(
            layer_type, prefill_emitter=window_emitter, prefill_comm=window_comm,
            decode_emitter=window_decode, decode_comm=local_comm, prefill_kv=prefill_kv,
            decode_kv=decode_kv, handoff_pairs=handoff_pairs,
            pairs_below=lambda m: sliding_below(window(m)))
    return AttentionKind(
        layer_type, prefill_emitter=compressed_prefill.prefill_emitter,
        prefill_comm=compressed_prefill.prefill_comm,
        decode_emitter=compressed_decode.decode_emitter, decode_comm=compressed_decode.comm,
        prefill_kv=prefill_kv, decode_kv=decode_kv, handoff_pairs=handoff_pairs,
        handoff_ready=HandoffReady(op_kinds=(ops.COMPRESS,)),
        decode_activations=(csa_decode_activations
                            if layer_type == COMPRESSED_SPARSE_ATTENTION else no_activations),
        rings=compressed_prefill.RINGS)


KINDS: tuple[AttentionKind, ...] = tuple(_kind(kind) for kind in COMPRESSED_LAYER_TYPES)
