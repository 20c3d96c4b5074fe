"""Where DeepSeek-V4's caches live on a pool, for the memory check (docs/mapping.md, "Memory").

Every V4 layer keeps a ring of its last w tokens' entries and, in CSA and HCA layers, one
compressed entry per r tokens and a compressor state (:mod:`ctxplan.model.compressed`). Its
attention is MQA over one latent, so each TP chip of a rank holds all of it (TP replicates the
KV, as for MLA). The placement follows what the engines do and what the emitters of the next
stage of issue 27 will simulate; until then it is what the capacity wall counts:

* decode: the compressed entries sharded over the Nd ranks like a KV cache (split evenly), the
  window rings and the compressor states on each sequence's home rank (k mod Nd), where the new
  token is written;
* prefill: each rank keeps the entries its own tokens complete (entry j, tokens [j r, (j+1) r),
  is held by the rank holding token (j+1) r - 1) and the window tokens among its own, and a
  compressor state per layer (a bound: each rank pools its own chunks). While one layer is
  computed a rank also holds every rank's entries of that layer (the all-gather of SGLang's CP,
  or the blocks a ring passes: the largest kind's whole sequence of entries bounds both) and the
  w tokens before each of its query chunks.
"""

from __future__ import annotations

from ctxplan.mapping.layout import Layout, split_even
from ctxplan.mapping.placement import placement
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
from ctxplan.model.spec import COMPRESSED_LAYER_TYPES, COMPRESSED_SPARSE_ATTENTION, ModelSpec


def compressed_kv_by_rank(m: ModelSpec, lay: Layout) -> list[int]:
    """DeepSeek-V4's cache bytes on each TP chip of each CP rank (0 for other models)."""
    kinds = {k: n for k, n in m.layer_type_counts.items() if k in COMPRESSED_LAYER_TYPES}
    if not kinds:
        return [0] * lay.cp
    S, b, cp, c_kv = lay.context_length, lay.batch, lay.cp, lay.c_kv_bytes
    entry = entry_bytes(m)
    layers = sum(kinds.values())
    pooled = {k: (n, compress_ratio(m, k), stored_entry_bytes(m, k, c_kv))
              for k, n in kinds.items() if compress_ratio(m, k)}
    states = sum(n * compressor_state_bytes(m, k) for k, n in kinds.items())
    if not lay.is_prefill:
        shards = {k: split_even(compressed_entries(m, k, S), cp) for k in pooled}
        out = []
        for r in range(cp):
            homes = len(range(r, b, cp))
            entries = sum(n * shards[k][r] * size for k, (n, _, size) in pooled.items())
            out.append(b * entries + homes * (layers * window_tokens(m, S) * entry + states))
        return out
    pl = placement(S, lay.cached, cp)
    w = window(m)
    gathered = max((compressed_entries(m, k, S) * size for k, (_, _, size) in pooled.items()),
                   default=0)
    out = []
    for i in range(cp):
        own = list(zip(pl.k_lo[i].tolist(), pl.k_hi[i].tolist(), strict=True))
        entries = sum(n * size * sum(hi // r - lo // r for lo, hi in own)
                      for n, r, size in pooled.values())
        ring = layers * entry * sum(max(0, min(hi, S) - max(lo, S - w)) for lo, hi in own)
        halo = len(pl.q_lo[i]) * window_tokens(m, S) * entry
        out.append(b * (entries + ring + states + gathered + halo))
    return out


def compressed_decode_scores(m: ModelSpec, lay: Layout) -> int:
    """Decode, one CSA layer at a time: every query's FP32 indexer scores over the chip's shard
    of compressed entries, and on a home the Nd ranks' candidate lists for the global top-k
    (as DSA's, mapping/decode_dsa.py); 0 without CSA layers."""
    if lay.is_prefill or not m.n_layers_of_type(COMPRESSED_SPARSE_ATTENTION):
        return 0
    assert m.dsa is not None
    total = compressed_entries(m, COMPRESSED_SPARSE_ATTENTION, lay.context_length)
    shard = split_even(total, lay.cp)[0]
    topk = m.dsa.index_topk
    cands = lay.cp * min(topk, shard) if lay.cp > 1 and total > topk else 0
    return lay.batch * (shard * INDEXER_SCORE_BYTES + cands * TOPK_ENTRY_BYTES)
