"""DSA (DeepSeek-V3.2's sparse attention), in both phases; decode in :mod:`.dsa_decode`.

**Prefill under CP: the pass-KV ring carries the indexer keys.**

Which tokens a query attends depends on its indexer scores against every earlier token, and
those are known only once the ring has brought every block; the selected tokens are then
anywhere in the sequence, on any rank. So:

1. ``qkv_proj``: MLA's projections (absorbed, as DeepSeek runs DSA) and the indexer's (its
   queries, weights and the new tokens' index keys) on the rank's new tokens;
2. the pass-KV ring of Np steps, its blocks carrying each token's MLA latent and its index key
   (the DSA KV tier, 1284 B for MLA-BF16). At step s rank i scores its queries against the
   block from rank i - s (``dsa_index``: the indexer's FP8 dot products, the FP32 scores
   written and read back), merges them into each query's running top-k (indices and scores,
   read and written at every step after the first) and keeps the block's latents in a
   one-layer buffer; meanwhile it passes the block on;
3. after the last block (the same op, ``dsa_attn``): the final selection, then the sparse MLA
   attention of each query over its min(visible, k) selected tokens, read from that buffer:
   every rank ends the ring holding the whole sequence's latents for this layer, so the
   selected tokens, wherever they came from, are local and nothing moves after the ring;
4. ``o_proj``.
What moves is what pass-KV moves with the bigger tier: b * L * (Np - 1) * S * c_kv per ring.
The price is memory: the buffer is S tokens of the tier for one layer (docs/mapping.md).
Under TP every chip of a rank holds the latent and runs the whole indexer for the rank's
queries (replicated, as vLLM's indexer is); the sparse attention splits the query heads.
"""

from __future__ import annotations

import numpy as np

from ctxplan.mapping import ops
from ctxplan.mapping.attention import attention_shapes
from ctxplan.mapping.builder import GraphBuilder, Work
from ctxplan.mapping.handoff_base import sharded_pairs
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.kinds.base import AttentionKind, RankBytes
from ctxplan.mapping.kinds.dsa_decode import decode_activations, dsa_decode_comm, dsa_emitter
from ctxplan.mapping.kinds.full import growing_kv, pass_kv_analytic_bytes, sharded_kv
from ctxplan.mapping.layout import Layout, kv_bytes_per_chip_token
from ctxplan.mapping.placement import Placement, causal_below
from ctxplan.mapping.prefill_base import (
    AttentionEmitter,
    IntArray,
    PrefillSetup,
    kv_and_query_reads,
    ring_attention,
)
from ctxplan.model.kinds import (
    INDEXER_SCORE_BYTES,
    INDEXER_SCORE_DTYPE,
    TOPK_ENTRY_BYTES,
    attended_pairs,
    indexer_key_bytes,
    indexer_pair_flops,
)
from ctxplan.model.spec import INDEXED_ATTENTION, ModelSpec


def sparse_pairs(m: ModelSpec, setup: PrefillSetup) -> IntArray:
    """Per rank, per sequence: (query, selected key) pairs of its new chunks, each query
    attending min(its visible keys, k)."""
    pl = setup.pl
    return np.array([sum(attended_pairs(m, INDEXED_ATTENTION, int(hi - lo), int(lo))
                         for lo, hi in zip(pl.q_lo[i], pl.q_hi[i], strict=True))
                     for i in range(pl.cp)], np.int64)


def prefill_emitter(b: GraphBuilder, setup: PrefillSetup,
                    layer_type: str = INDEXED_ATTENTION) -> AttentionEmitter:
    m, lay = setup.m, setup.lay
    assert m.dsa is not None
    att = attention_shapes(m, lay, INDEXED_ATTENTION)
    p = lay.precision
    batch = lay.batch
    tokens, kv_tokens, ranks = setup.tokens, setup.kv_tokens, setup.ranks
    # causal: every earlier token
    index_pairs = setup.pairs(INDEXED_ATTENTION, causal_below) * batch
    attended = sparse_pairs(m, setup) * batch
    _, q_read = kv_and_query_reads(att, lay)
    key_bytes = indexer_key_bytes(m)
    latent_bytes = att.c_chip - key_bytes
    pair_flops = indexer_pair_flops(m)   # every TP chip runs the whole indexer
    index_dtype = INDEXER_SCORE_DTYPE if INDEXER_SCORE_DTYPE in b.chip.peak_flops_per_s \
        else p.attention
    index_q_bytes = m.dsa.index_n_heads * m.dsa.index_head_dim  # FP8 queries
    topk = min(m.dsa.index_topk, lay.context_length)
    last = lay.cp - 1

    def step_work(step: int, k: IntArray) -> list[Work]:
        pairs = index_pairs[ranks, k]
        parts = [Work("attention", pairs * pair_flops,
                      kv_tokens[k] * key_bytes + tokens * index_q_bytes
                      + 2 * INDEXER_SCORE_BYTES * pairs, index_dtype,
                      m_rows=tokens, kv_tokens=kv_tokens[k] / batch)]
        if step > 0:
            # Merge this block's scores into each query's running top-k.
            parts.append(Work("memory", 0.0, 2.0 * TOPK_ENTRY_BYTES * topk * tokens, "bf16"))
        if step == last:
            parts.append(Work("attention", attended * att.pair_flops,
                              attended * latent_bytes + tokens * q_read, p.attention,
                              m_rows=tokens, kv_tokens=topk))
        return parts

    return ring_attention(b, setup, att, step_work=step_work,
                          send_bytes=lambda k: kv_tokens[k] * att.c_chip,
                          compute_kind=ops.DSA_INDEX, send_kind=ops.PASS_KV_SEND,
                          last_kind=ops.DSA_ATTN)


def prefill_comm(m: ModelSpec, lay: Layout, layer_type: str, layers: int) -> KindComm:
    """The pass-KV ring's closed form with the DSA tier (latent + index key per token)."""
    return KindComm(layer_type, "pass-kv", layers, lay.cp - 1,
                    lay.tp * lay.cp * (lay.cp - 1), pass_kv_analytic_bytes(m, lay, layers))


def prefill_kv(m: ModelSpec, lay: Layout, layer_type: str, layers: int,
               pl: Placement) -> RankBytes:
    """Every token a rank holds (as full attention); while a layer computes, the ring's blocks
    kept for the sparse attention after it (the whole sequence's latents and index keys for
    one layer) and each query's running top-k (an index and a score per entry)."""
    assert m.dsa is not None
    S = lay.context_length
    topk = min(m.dsa.index_topk, S)
    transient = S * kv_bytes_per_chip_token(m, lay) + int(pl.new_tokens.max()) * topk \
        * TOPK_ENTRY_BYTES
    return RankBytes(growing_kv(m, lay, layers, pl), [lay.batch * transient] * pl.cp)


KINDS = (AttentionKind(
    INDEXED_ATTENTION,
    prefill_emitter=prefill_emitter, prefill_comm=prefill_comm,
    decode_emitter=lambda b, m, lay, pool, layer_type: dsa_emitter(b, m, lay, pool),
    decode_comm=dsa_decode_comm,
    prefill_kv=prefill_kv,
    decode_kv=lambda m, lay, layer_type, layers: sharded_kv(m, lay, layers),
    handoff_pairs=lambda m, layer_type, lay_p, lay_d, pl: sharded_pairs(m, lay_p, lay_d, pl),
    decode_activations=decode_activations, pairs_below=lambda m: causal_below,
),)
