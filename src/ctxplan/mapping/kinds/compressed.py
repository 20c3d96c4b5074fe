"""DeepSeek-V4's kinds (window only, CSA, HCA): registered with their memory, not simulated yet.

Their emitters, their CP patterns (``--prefill-ring all-gather``, ``--moe-parallel``) and their
KV handoff are issue 27's next stage, so the kinds leave both phases out of ``phases``: the
registry refuses a V4 point that would be simulated, in one line, and the emitter, closed-form
and handoff hooks here are never reached (they say so if they are). What the model layer knows
of them (:mod:`ctxplan.model.compressed`: entries, windows, compressor states, costs) is what the
next stage's emitters will call.

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
  computed a rank also holds that layer's entries of the whole sequence (the all-gather of
  SGLang's CP, or the blocks a ring would pass: the same bound) and the w tokens before each of
  its query chunks.
* decode activations, per CSA layer being computed: every query's FP32 indexer scores over the
  chip's shard of entries, and on a home the Nd ranks' candidate lists for the global top-k (as
  DSA's).
"""

from __future__ import annotations

from typing import NoReturn

from ctxplan.mapping.kinds.base import AttentionKind, RankBytes, no_activations
from ctxplan.mapping.layout import Layout, split_even
from ctxplan.mapping.placement import Placement
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
    ModelSpec,
)


def _not_simulated(*_: object) -> NoReturn:
    raise NotImplementedError("DeepSeek-V4's kinds are not simulated yet (issue 27's next "
                              "stage): check_simulated_kinds refuses them before this")


def _per_sequence_home(m: ModelSpec, lay: Layout, layer_type: str) -> int:
    """What a sequence keeps of one layer on its home: the window ring and the compressor state."""
    return (window_tokens(m, lay.context_length) * entry_bytes(m)
            + compressor_state_bytes(m, layer_type))


def prefill_kv(m: ModelSpec, lay: Layout, layer_type: str, n: int, pl: Placement) -> RankBytes:
    S, b = lay.context_length, lay.batch
    entry, w = entry_bytes(m), window(m)
    r = compress_ratio(m, layer_type)
    size = stored_entry_bytes(m, layer_type, lay.c_kv_bytes)
    state = compressor_state_bytes(m, layer_type)
    gathered = compressed_entries(m, layer_type, S) * size   # one layer's, of the whole sequence
    held, transient = [], []
    for i in range(lay.cp):
        own = list(zip(pl.k_lo[i].tolist(), pl.k_hi[i].tolist(), strict=True))
        entries = sum(hi // r - lo // r for lo, hi in own) if r else 0
        ring = sum(max(0, min(hi, S) - max(lo, S - w)) for lo, hi in own)
        held.append(b * n * (entries * size + ring * entry + state))
        halo = len(pl.q_lo[i]) * window_tokens(m, S) * entry
        transient.append(b * (gathered + halo))
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


KINDS: tuple[AttentionKind, ...] = tuple(
    AttentionKind(
        layer_type=kind, prefill_emitter=_not_simulated, prefill_comm=_not_simulated,
        decode_emitter=_not_simulated, decode_comm=_not_simulated, prefill_kv=prefill_kv,
        decode_kv=decode_kv, handoff_pairs=_not_simulated, phases=frozenset(),
        decode_activations=(csa_decode_activations if kind == COMPRESSED_SPARSE_ATTENTION
                            else no_activations))
    for kind in COMPRESSED_LAYER_TYPES)
