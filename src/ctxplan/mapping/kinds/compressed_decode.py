"""Decode of DeepSeek-V4's CSA and HCA layers with the compressed entries sharded over Nd ranks
(the window-only kind runs :mod:`.window`'s decode on the home, over V4's attention block).

Where the cache is (docs/mapping.md, "DeepSeek-V4"; the placement the engines use): each rank
holds a contiguous share of every sequence's floor(S / r) entries (``split_even``, as a KV cache
is sharded), and each sequence's home (rank k mod Nd) its window ring (the last min(S, w)
tokens) and its compressor state, where the new token is written and, every r-th step, a new
entry pooled. Per layer:

1. ``q_proj`` on each home chip: mHC, the projections (query, latent, compressor rows, CSA's
   indexer query), and the compressor's step: the token's rows written into the state and, as
   1 / r of one per step, the state read and a new entry written (the model layer's
   ``decode_attention_cost``);
2. HCA: pass-Q as for full attention (``--pass-q``: the broadcast or Meta's ring), each rank
   attending its shard of entries (``partial_attn``); CSA: the exact sharded top k of
   :mod:`.dsa_decode` over the entries (the queries and the indexer's to every shard, each
   shard's scores and candidates, the selection through the homes, the sparse attention over
   each shard's selected entries); in both, the home attends its window (``window_attn``) while
   the queries travel;
3. the All2All of the partial outputs to the homes and the merge of the Nd shards' partials and
   the window's, then ``o_proj`` (the grouped wo_a, wo_b). With Nd = 1 one attention op reads
   the window and the (selected) entries together.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ctxplan.mapping import ops
from ctxplan.mapping.attention import attention_shapes
from ctxplan.mapping.builder import GraphBuilder, IdArray, Work
from ctxplan.mapping.collectives import Rows, rows_of
from ctxplan.mapping.decode_base import (
    DecodeEmitter,
    DecodePool,
    attention_parts,
    merge,
    return_partials,
)
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.kinds.dsa_decode import (
    IndexedCache,
    IndexedKinds,
    indexed_decode_comm,
    indexed_emitter,
)
from ctxplan.mapping.kinds.full_decode import decode_comm, pass_q_broadcast, pass_q_ring
from ctxplan.mapping.layout import Layout, split_even
from ctxplan.model import compressed as c
from ctxplan.model.spec import COMPRESSED_SPARSE_ATTENTION, ModelSpec


def csa_cache(m: ModelSpec, lay: Layout) -> IndexedCache:
    """CSA's entries as the sharded top-k sees them: floor(S / 4) of them, each with its indexer
    key (132 B, or 68 B in FP4) and its 584-B entry, the top ``index_topk`` attended."""
    assert m.dsa is not None
    layer_type = COMPRESSED_SPARSE_ATTENTION
    return IndexedCache(c.compressed_entries(m, layer_type, lay.context_length),
                        m.dsa.index_topk, c.tier_index_key_bytes(m, lay.c_kv_bytes),
                        c.entry_bytes(m))


def compressor_step(m: ModelSpec, lay: Layout, layer_type: str, tokens: IdArray) -> Work:
    """One decode step's compressor work for ``tokens`` new tokens: the pooling (its FLOPs per
    token), the new token's rows written into the state, and 1 / r of the state read and of an
    entry written (a new entry every r steps)."""
    r = c.compress_ratio(m, layer_type)
    stored = c.stored_entry_bytes(m, layer_type, lay.c_kv_bytes)
    per_seq = (c.compressor_row_bytes(m, layer_type)
               + (c.compressor_state_bytes(m, layer_type) + stored) / r)
    return Work("memory", tokens * c.compressor_flops_per_token(m, layer_type), tokens * per_seq,
                "bf16")


def entry_pool(m: ModelSpec, lay: Layout, pool: DecodePool, layer_type: str) -> DecodePool:
    """The pool with each rank's shard of the layer's entries in place of a token shard."""
    entries = c.compressed_entries(m, layer_type, lay.context_length)
    return replace(pool, shards=np.array(split_even(entries, pool.n_rank), np.int64))


def decode_emitter(b: GraphBuilder, m: ModelSpec, lay: Layout, pool: DecodePool,
                   layer_type: str) -> DecodeEmitter:
    att = attention_shapes(m, lay, layer_type)
    window = c.window_tokens(m, lay.context_length)
    shards = entry_pool(m, lay, pool, layer_type)
    home, seqs, tokens = pool.home_chips, pool.home_seqs, pool.home_tokens
    step = compressor_step(m, lay, layer_type, tokens)

    def window_partial(layer: int, qp: IdArray) -> IdArray:
        return b.compute(home, ops.WINDOW_ATTN, attention_parts(lay, att, pool, seqs, window),
                         qp, layer=layer)

    if layer_type == COMPRESSED_SPARSE_ATTENTION:
        return indexed_emitter(b, m, lay, shards, att, csa_cache(m, lay),
                               kinds=IndexedKinds(ops.CSA_INDEX, ops.CSA_ATTN), extra_q=[step],
                               home_keys=window, home_attention=window_partial)
    n_rank = pool.n_rank
    entries = c.compressed_entries(m, layer_type, lay.context_length)

    def emit(layer: int, prev: Rows) -> Rows:
        qp = b.compute(home, ops.Q_PROJ, [*att.projection(m, tokens, lay), step], prev[home],
                       layer=layer)
        if n_rank == 1:
            attn = b.compute(home, ops.HCA_ATTN,
                             attention_parts(lay, att, pool, seqs, entries + window, lse=False),
                             qp, layer=layer, step=0)
            o_ready = b.compute(home, ops.O_PROJ, att.output(tokens, lay), attn, layer=layer)
            return pool.home_rows(rows_of(attn), o_ready)
        q_ready = pool.home_rows(prev, qp)
        win = window_partial(layer, qp)
        spread = pass_q_ring if lay.policy.pass_q == "ring" else pass_q_broadcast
        own, after = spread(b, lay, att, shards, q_ready, layer)
        after = return_partials(b, shards, after, layer)
        deps = np.concatenate([own[:, None], win[:, None], after[home]], axis=1)
        merged = merge(b, lay, att, shards, deps, layer, parts=n_rank + 1)
        o_ready = b.compute(home, ops.O_PROJ, att.output(tokens, lay), merged, layer=layer)
        return pool.home_rows(after, o_ready)

    return emit


def comm(m: ModelSpec, lay: Layout, layer_type: str, layers: int) -> KindComm:
    """CSA: the exact top k's closed form over the entries; HCA: pass-Q's (the queries out to
    and the partial outputs back from every other rank), whatever the shards hold."""
    if layer_type == COMPRESSED_SPARSE_ATTENTION:
        return indexed_decode_comm(m, lay, layer_type, layers, csa_cache(m, lay))
    return decode_comm(m, lay, layer_type, layers)
