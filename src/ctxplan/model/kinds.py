"""What each attention kind costs, per layer and per sequence: cache, FLOPs, bytes.

Kinds (``ModelSpec.layer_types``; docs/model.md "Attention kinds" has the derivations):

- ``full_attention``: causal over every earlier token. Keeps S tokens of KV.
- ``sliding_attention`` (window w, HF ``sliding_window``): query i sees keys i - w < j <= i, w keys
  with itself (transformers masking_utils ``sliding_window_overlay``). Keeps min(S, w) tokens.
  gpt-oss's attention sinks are one learned logit per head added to the softmax denominator
  (modeling_gpt_oss.py ``sinks``): no cached token, no FLOPs worth counting.
- ``chunked_attention`` (chunk c, HF ``attention_chunk_size``): query i sees the keys of its own
  chunk up to itself, j // c == i // c (``chunked_overlay``). Keeps at most min(S, c) tokens.
- ``linear_attention`` (Gated DeltaNet): a recurrent state of value_heads x d_k x d_v plus the
  conv1d's last kernel - 1 inputs, whatever S.
- ``indexed_attention`` (DSA): the indexer scores every earlier token; MLA attends the top k.
  Keeps S tokens of the MLA latent and of the indexer's key.
- DeepSeek-V4's ``window_attention``, ``compressed_sparse_attention`` (CSA) and
  ``heavily_compressed_attention`` (HCA): a window of w tokens, and (CSA, HCA) entries pooling r
  tokens each; their counts are in :mod:`ctxplan.model.compressed`.

KV tier (bytes per token of a full-attention layer, :mod:`ctxplan.model.kv`): applies per kept
token to every softmax kind (they share the model's attention shape); for DSA it includes the
indexer key (:func:`indexer_key_bytes`); it does not apply to a linear layer's state, which is
kept in ``LinearAttentionSpec.state_dtype`` (quantising the KV cache does not quantise the
recurrent state: vLLM sizes the two with separate dtypes, ``kv_cache_dtype`` and
``mamba_cache_dtype``).

A decode step "at context S" is one new token of a sequence that then holds S tokens; it sees S
keys under full attention (as :func:`ctxplan.model.attention.attention_core_flops`). For
chunked attention the step at S sees (S - 1) mod c + 1 keys, a sawtooth; we cost the worst step
a sequence of S tokens has met, min(S, c), and size its cache the same way, so that a TPOT or
memory figure at S holds for every step up to S.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ctxplan.model import compressed, spec
from ctxplan.model.attention import attention_pair_flops, causal_pairs
from ctxplan.model.dtypes import bytes_per_value
from ctxplan.model.spec import ModelSpec

# Kinds whose cache pools tokens into entries (DeepSeek-V4's CSA and HCA): not positional masks.
_POOLED = (spec.COMPRESSED_SPARSE_ATTENTION, spec.HEAVILY_COMPRESSED_ATTENTION)

# Chunk length of the chunkwise-parallel Gated DeltaNet prefill: fla's chunk_gated_delta_rule
# (BT = 64) and transformers' torch_chunk_gated_delta_rule (chunk_size = 64).
GDN_CHUNK_SIZE = 64
# DSA's indexer keys are cached in FP8 with one FP32 scale per 128 values (DeepSeek-V3.2-Exp
# inference/model.py, ``Indexer``: k_cache float8_e4m3fn, k_scale_cache float32 per block of 128).
INDEXER_KEY_BYTES_PER_VALUE = 1
INDEXER_SCALE_BLOCK = 128
INDEXER_SCALE_BYTES = 4
# The indexer scores in FP8 (DeepSeek-V3.2 paper: "the lightning indexer ... can be implemented
# in FP8"); the scores it writes for the top-k selection are FP32 (DeepGEMM fp8_mqa_logits).
INDEXER_SCORE_DTYPE = "fp8"
INDEXER_SCORE_BYTES = 4
# An entry of a top-k list (running in prefill, a shard's candidates in decode): the token's
# int32 position and its FP32 score.
TOPK_ENTRY_BYTES = 8


def _check_type(layer_type: str) -> None:
    if layer_type not in spec.LAYER_TYPES:
        raise ValueError(f"unknown layer type {layer_type!r}; known: {spec.LAYER_TYPES}")


def _check_tokens(*counts: int) -> None:
    if any(c < 0 for c in counts):
        raise ValueError("token counts must be >= 0")


# -- (query, key) pairs -------------------------------------------------------------------------


def _capped_prefix(n: int, cap: int) -> int:
    """sum over positions p = 1..n of min(p, cap)."""
    if n <= cap:
        return n * (n + 1) // 2
    return cap * (cap + 1) // 2 + (n - cap) * cap


def capped_pairs(q_tokens: int, kv_before: int, cap: int) -> int:
    """Pairs of ``q_tokens`` consecutive queries after ``kv_before`` earlier tokens when each
    sees at most ``cap`` keys (itself included): the query at position p (1-based) sees
    min(p, cap). A sliding window of w (cap = w) and DSA's top-k (cap = k)."""
    _check_tokens(q_tokens, kv_before)
    if cap <= 0:
        raise ValueError("cap must be > 0")
    return _capped_prefix(kv_before + q_tokens, cap) - _capped_prefix(kv_before, cap)


def _chunked_prefix(n: int, chunk: int) -> int:
    """sum over positions p = 1..n of ((p - 1) mod chunk) + 1."""
    full, rest = divmod(n, chunk)
    return full * chunk * (chunk + 1) // 2 + rest * (rest + 1) // 2


def chunked_pairs(q_tokens: int, kv_before: int, chunk: int) -> int:
    """Pairs of ``q_tokens`` consecutive queries after ``kv_before`` earlier tokens under chunked
    local attention: each query sees the earlier keys of its own chunk and itself."""
    _check_tokens(q_tokens, kv_before)
    if chunk <= 0:
        raise ValueError("chunk must be > 0")
    return _chunked_prefix(kv_before + q_tokens, chunk) - _chunked_prefix(kv_before, chunk)


def attended_pairs(m: ModelSpec, layer_type: str, q_tokens: int, kv_before: int = 0) -> int:
    """(query, key) pairs the main attention of a ``layer_type`` layer computes for
    ``q_tokens`` consecutive queries after ``kv_before`` earlier tokens (0 for linear layers).
    Contiguous ranges add up: pairs(a, 0) + pairs(b, a) == pairs(a + b, 0), which is what the CP
    ring's chunks rely on."""
    _check_type(layer_type)
    if layer_type == spec.FULL_ATTENTION:
        return causal_pairs(q_tokens, kv_before)
    if layer_type == spec.SLIDING_ATTENTION:
        assert m.sliding_window is not None
        return capped_pairs(q_tokens, kv_before, m.sliding_window)
    if layer_type == spec.CHUNKED_ATTENTION:
        assert m.attention_chunk_size is not None
        return chunked_pairs(q_tokens, kv_before, m.attention_chunk_size)
    if layer_type == spec.INDEXED_ATTENTION:
        assert m.dsa is not None
        return capped_pairs(q_tokens, kv_before, m.dsa.index_topk)
    if layer_type in spec.COMPRESSED_LAYER_TYPES:
        # the window's keys, and the (top-k of the) entries complete before each query
        return (capped_pairs(q_tokens, kv_before, compressed.window(m))
                + compressed.entry_pairs(m, layer_type, q_tokens, kv_before))
    _check_tokens(q_tokens, kv_before)
    return 0


def indexer_pairs(m: ModelSpec, layer_type: str, q_tokens: int, kv_before: int = 0) -> int:
    """(query, key) pairs an indexer scores: DSA's every earlier token and itself (causal),
    CSA's every complete compressed entry; 0 for the other kinds."""
    _check_type(layer_type)
    if layer_type == spec.COMPRESSED_SPARSE_ATTENTION:
        return compressed.entry_pairs(m, layer_type, q_tokens, kv_before, capped=False)
    if layer_type != spec.INDEXED_ATTENTION:
        _check_tokens(q_tokens, kv_before)
        return 0
    return causal_pairs(q_tokens, kv_before)


def _mask_span(m: ModelSpec, layer_type: str) -> int | None:
    """The key span of a positional mask: w (sliding, V4's window only), None (causal: full and
    the DSA indexer). Chunked attention has its own count."""
    windowed = layer_type in (spec.SLIDING_ATTENTION, spec.WINDOW_ATTENTION)
    return m.sliding_window if windowed else None


def pairs_below(m: ModelSpec, layer_type: str, q_end: int, k_end: int) -> int:
    """G(Q, K): pairs (p, j) with query position p < Q and key position j < K that the mask of
    a ``layer_type`` layer lets through; for DSA, its indexer's (causal) mask. The pairs of any
    rectangle of positions follow by inclusion-exclusion (:func:`block_pairs`).

    Causal and sliding (window w; w = infinity for causal): summing over keys j < J = min(K, Q),
    key j is seen by the queries j <= p < min(Q, j + w), so G = sum_{u = Q-J+1}^{Q} min(u, w)
    = M(Q) - M(Q - J), M(n) = sum_{u=1}^{n} min(u, w) (:func:`capped_pairs`' prefix).
    Chunked (c): every pair of the first K positions, plus the queries K <= p < Q of the chunk
    holding position K against that chunk's keys before K."""
    _check_type(layer_type)
    _check_tokens(q_end, k_end)
    if layer_type in _POOLED:
        raise ValueError(f"{layer_type} attends pooled entries, not positions: count its pairs "
                         "per query range with attended_pairs")
    if layer_type == spec.LINEAR_ATTENTION:
        return 0
    if layer_type == spec.CHUNKED_ATTENTION:
        c = m.attention_chunk_size
        assert c is not None
        if k_end >= q_end:
            return _chunked_prefix(q_end, c)
        start = k_end // c * c
        return _chunked_prefix(k_end, c) + (min(q_end, start + c) - k_end) * (k_end - start)
    span = _mask_span(m, layer_type)
    below = q_end - min(k_end, q_end)
    if span is None:
        return q_end * (q_end + 1) // 2 - below * (below + 1) // 2
    return _capped_prefix(q_end, span) - _capped_prefix(below, span)


def block_pairs(m: ModelSpec, layer_type: str, q_lo: int, q_hi: int, k_lo: int,
                k_hi: int) -> int:
    """Pairs between the queries at positions [q_lo, q_hi) and the keys at [k_lo, k_hi) under
    the mask of a positional kind (full, sliding, chunked; DSA: its causal indexer)."""
    if q_hi < q_lo or k_hi < k_lo:
        raise ValueError("ranges must have lo <= hi")
    g = pairs_below
    return (g(m, layer_type, q_hi, k_hi) - g(m, layer_type, q_lo, k_hi)
            - g(m, layer_type, q_hi, k_lo) + g(m, layer_type, q_lo, k_lo))


def window_start(m: ModelSpec, layer_type: str, position: int) -> int:
    """The first key position a query at ``position`` sees: position - w + 1 (sliding, V4's
    window only), the start of its chunk (chunked), 0 for the causal kinds and for CSA / HCA
    (their entries reach back to the first token)."""
    _check_type(layer_type)
    if layer_type in (spec.SLIDING_ATTENTION, spec.WINDOW_ATTENTION):
        assert m.sliding_window is not None
        return max(0, position - m.sliding_window + 1)
    if layer_type == spec.CHUNKED_ATTENTION:
        assert m.attention_chunk_size is not None
        return position // m.attention_chunk_size * m.attention_chunk_size
    return 0


def decode_attended_tokens(m: ModelSpec, layer_type: str, context: int) -> int:
    """Keys the main attention reads for one new query at context S (see module docstring)."""
    _check_type(layer_type)
    _check_tokens(context)
    if layer_type == spec.LINEAR_ATTENTION:
        return 0
    if layer_type in _POOLED:  # the window's tokens and the attended entries
        return (compressed.window_tokens(m, context)
                + compressed.attended_entries(m, layer_type, context))
    return min(context, _span(m, layer_type) or context)


def _span(m: ModelSpec, layer_type: str) -> int | None:
    """The most keys a query of this kind sees (None: unbounded)."""
    if layer_type in (spec.SLIDING_ATTENTION, spec.WINDOW_ATTENTION):
        return m.sliding_window
    if layer_type == spec.CHUNKED_ATTENTION:
        return m.attention_chunk_size
    if layer_type == spec.INDEXED_ATTENTION:
        assert m.dsa is not None
        return m.dsa.index_topk
    return None


# -- cache and state -------------------------------------------------------------------------


def kv_tokens(m: ModelSpec, layer_type: str, context: int) -> int:
    """Tokens whose KV a ``layer_type`` layer keeps for a sequence of ``context`` tokens:
    S (full, DSA), min(S, w) (sliding, V4's window only), min(S, c) (chunked: the most it holds
    at once), 0 (linear: a state instead). CSA and HCA keep pooled entries besides their window:
    :func:`layer_kv_bytes` counts them."""
    _check_type(layer_type)
    _check_tokens(context)
    if layer_type in _POOLED:
        raise ValueError(f"{layer_type} keeps pooled entries, not tokens: use layer_kv_bytes")
    if layer_type == spec.LINEAR_ATTENTION:
        return 0
    if layer_type == spec.INDEXED_ATTENTION:
        return context  # the indexer scores every earlier token: all of them stay
    return min(context, _span(m, layer_type) or context)


def indexer_key_bytes(m: ModelSpec) -> int:
    """Bytes per token per layer of the DSA indexer's key cache: index_head_dim FP8 values plus
    an FP32 scale per 128 (128 + 4 = 132 B for DeepSeek-V3.2); 0 without DSA."""
    if m.dsa is None:
        return 0
    d = m.dsa.index_head_dim
    return d * INDEXER_KEY_BYTES_PER_VALUE + INDEXER_SCALE_BYTES * math.ceil(
        d / INDEXER_SCALE_BLOCK
    )


def linear_state_bytes(m: ModelSpec) -> int:
    """Bytes one sequence keeps per linear-attention layer: the recurrent state
    (value_heads x d_k x d_v, modeling_qwen3_next.py ``recurrent_state_shape``) and the conv
    state (conv_dim x (kernel - 1), vLLM's ``conv_state_shape``), in the state dtype.
    Qwen3-Next, BF16: 32 * 128 * 128 * 2 + 8192 * 3 * 2 = 1,097,728 B."""
    la = m.linear_attention
    if la is None:
        raise ValueError(f"model {m.name} has no linear attention")
    values = (
        la.linear_num_value_heads * la.linear_key_head_dim * la.linear_value_head_dim
        + la.conv_dim * (la.linear_conv_kernel_dim - 1)
    )
    return values * bytes_per_value(la.state_dtype)


def layer_kv_bytes(m: ModelSpec, layer_type: str, context: int, c_kv_bytes: int) -> int:
    """Cache bytes one sequence of ``context`` tokens keeps in one ``layer_type`` layer, for a
    KV tier of ``c_kv_bytes`` per token of a full-attention layer: kv_tokens * c_kv for the
    softmax kinds (DSA's c_kv includes the indexer key), the state for a linear layer; for
    DeepSeek-V4's kinds (c_kv: per CSA entry, its indexer key included) the window ring, the
    entries and the compressor state (:func:`ctxplan.model.compressed.layer_cache_bytes`)."""
    if layer_type in spec.COMPRESSED_LAYER_TYPES:
        return compressed.layer_cache_bytes(m, layer_type, context, c_kv_bytes)
    if layer_type == spec.LINEAR_ATTENTION:
        _check_tokens(context)
        return linear_state_bytes(m)
    return kv_tokens(m, layer_type, context) * c_kv_bytes


# -- FLOPs and bytes of one layer ---------------------------------------------------------------


@dataclass(frozen=True)
class AttentionCost:
    """Cost of one layer's attention for one sequence, over all heads (the mapping splits it
    over TP). Projections are linears (:mod:`ctxplan.model.linear`) and are not included."""

    attention_flops: float  # softmax core (Q K^T, P V) or the DeltaNet recurrence and conv1d
    indexer_flops: float  # DSA indexer scores, at INDEXER_SCORE_DTYPE (0 for other kinds)
    indexer_score_bytes: float  # DSA: FP32 scores written by the indexer, read by the top-k
    # Decode only; 0 in prefill, whose cache traffic (ring blocks, a state handed on) depends on
    # the CP layout and is counted by the mapping.
    kv_read_bytes: float  # cache / state read
    kv_write_bytes: float  # the new token's KV, or the state written back
    # DeepSeek-V4's CSA / HCA: pooling the compressors' projected rows into entries (a memory-
    # class op; the projections are linears). 0 for the other kinds.
    compressor_flops: float = 0.0


def indexer_pair_flops(m: ModelSpec) -> float:
    """FLOPs per (query, key) pair of the DSA indexer: q . k over index_n_heads heads of
    index_head_dim, then the weighted sum over heads: 2 * H * (d + 1) (16,512 for V3.2)."""
    if m.dsa is None:
        return 0.0
    return 2.0 * m.dsa.index_n_heads * (m.dsa.index_head_dim + 1)


def _gdn_dims(m: ModelSpec) -> tuple[int, int, int]:
    la = m.linear_attention
    if la is None:
        raise ValueError(f"model {m.name} has no linear attention")
    return la.linear_num_value_heads, la.linear_key_head_dim, la.linear_value_head_dim


def _conv_flops_per_token(m: ModelSpec) -> float:
    la = m.linear_attention
    assert la is not None
    return 2.0 * la.conv_dim * la.linear_conv_kernel_dim  # depthwise causal conv1d


def linear_prefill_flops_per_token(m: ModelSpec, chunk: int = GDN_CHUNK_SIZE) -> float:
    """Chunkwise-parallel Gated DeltaNet (DeltaNet's WY form, Yang et al. arXiv:2406.06484
    section 3; transformers ``torch_chunk_gated_delta_rule``), per token, over all value heads:
    per chunk of C tokens and head, K K^T and Q K^T (2 C^2 d_k each), the two triangular solves
    (C^2 d_v + C^2 d_k), W S, Q S and K^T U (2 C d_k d_v each) and the intra-chunk P U
    (2 C^2 d_v): per token 6 d_k d_v + C (5 d_k + 3 d_v); plus the conv1d, 2 conv_dim kernel."""
    heads, dk, dv = _gdn_dims(m)
    per_head = 6.0 * dk * dv + chunk * (5.0 * dk + 3.0 * dv)
    return heads * per_head + _conv_flops_per_token(m)


def linear_decode_flops_per_token(m: ModelSpec) -> float:
    """One recurrent Gated DeltaNet step (transformers ``torch_recurrent_gated_delta_rule``;
    fla fused_recurrent): decay the state (d_k d_v), read S^T k (2 d_k d_v), write the rank-one
    delta update (2 d_k d_v), read S^T q (2 d_k d_v): 7 d_k d_v per value head; plus conv1d."""
    heads, dk, dv = _gdn_dims(m)
    return heads * 7.0 * dk * dv + _conv_flops_per_token(m)


# -- Gated DeltaNet under context parallelism ----------------------------------------------
# A chunk whose initial state S_in comes from another rank. Its chunk-local pass (initial state
# zero) gives the outputs O_0 and the final state B; the chunk's dependence on S_in is affine,
# S_out = A S_in + B and O = O_0 + Q' S_in, with A the product over its sub-chunks of
# (decay) (I - W^T K) (DeltaNet's WY form, Yang et al. arXiv:2406.06484 section 3.2: a
# sub-chunk maps S to S (I - W^T K) + U^T K) and Q' the sub-chunks' effective queries
# (Q - (Q K^T . M) W) carried through the transitions before them. So only the short affine
# update A S_in + B waits on the previous chunk (LASP's sequential state passing,
# arXiv:2404.02882, with the delta rule's transition matrices): docs/mapping.md.


def linear_recurrent_state_bytes(m: ModelSpec) -> int:
    """The recurrent state alone (value_heads x d_k x d_v in the state dtype), what passes from
    rank to rank; the conv state travels as the previous tokens' inputs instead."""
    heads, dk, dv = _gdn_dims(m)
    la = m.linear_attention
    assert la is not None
    return heads * dk * dv * bytes_per_value(la.state_dtype)


def linear_cp_flops_per_token(m: ModelSpec, chunk: int = GDN_CHUNK_SIZE) -> float:
    """What a token of a chunk with an incoming state costs besides its chunk-local pass, before
    the state arrives, per value head: W^T K (2 d_k^2), composing the sub-chunk transitions
    (2 d_k^3 / C), the effective queries' (Q K^T . M) W (2 C d_k) and carrying them through the
    transitions (2 d_k^2). Qwen3-Next: 147,456 per head, about as much as the local pass."""
    heads, dk, _ = _gdn_dims(m)
    return heads * (4.0 * dk * dk + 2.0 * dk ** 3 / chunk + 2.0 * chunk * dk)


def linear_state_update_flops(m: ModelSpec) -> float:
    """S_out = A S_in + B for one sequence and one chunk: 2 d_k^2 d_v + d_k d_v per value head."""
    heads, dk, dv = _gdn_dims(m)
    return heads * (2.0 * dk * dk * dv + dk * dv)


def linear_correction_flops_per_token(m: ModelSpec) -> float:
    """O += Q' S_in once the state is in: 2 d_k d_v per token per value head."""
    heads, dk, dv = _gdn_dims(m)
    return heads * 2.0 * dk * dv


def prefill_attention_cost(
    m: ModelSpec, layer_type: str, context: int, mla_mode: str = "standard"
) -> AttentionCost:
    """One causal prefill of ``context`` tokens through one ``layer_type`` layer."""
    _check_type(layer_type)
    if layer_type == spec.LINEAR_ATTENTION:
        _check_tokens(context)
        return AttentionCost(context * linear_prefill_flops_per_token(m), 0.0, 0.0, 0.0, 0.0)
    pairs = attended_pairs(m, layer_type, context)
    index_pairs = indexer_pairs(m, layer_type, context)
    pooling = (context * compressed.compressor_flops_per_token(m, layer_type)
               if layer_type in spec.COMPRESSED_LAYER_TYPES else 0.0)
    return AttentionCost(
        attention_flops=pairs * attention_pair_flops(m, mla_mode),
        indexer_flops=index_pairs * indexer_pair_flops(m),
        indexer_score_bytes=2.0 * INDEXER_SCORE_BYTES * index_pairs,
        kv_read_bytes=0.0,
        kv_write_bytes=0.0,
        compressor_flops=pooling,
    )


def decode_attention_cost(
    m: ModelSpec, layer_type: str, context: int, c_kv_bytes: int, mla_mode: str = "absorbed"
) -> AttentionCost:
    """One decode step of one sequence at ``context`` tokens through one ``layer_type`` layer,
    with a KV tier of ``c_kv_bytes`` per token of a full-attention layer.

    Softmax kinds read the KV of the keys they attend and write the new token's KV. DSA reads
    every indexer key (S * 132 B) and the MLA latent of the top-k tokens only; its scores go to
    memory and back (FP32) for the top-k selection. A linear layer reads its state and writes it
    back."""
    _check_type(layer_type)
    _check_tokens(context)
    if layer_type == spec.LINEAR_ATTENTION:
        state = float(linear_state_bytes(m))
        return AttentionCost(linear_decode_flops_per_token(m), 0.0, 0.0, state, state)
    if layer_type in spec.COMPRESSED_LAYER_TYPES:
        return _compressed_decode_cost(m, layer_type, context, c_kv_bytes)
    attended = decode_attended_tokens(m, layer_type, context)
    flops = attended * attention_pair_flops(m, mla_mode)
    if layer_type != spec.INDEXED_ATTENTION:
        return AttentionCost(flops, 0.0, 0.0, float(attended * c_kv_bytes), float(c_kv_bytes))
    index_b = indexer_key_bytes(m)
    latent_b = c_kv_bytes - index_b
    if latent_b <= 0:
        raise ValueError(f"a DSA tier must exceed the indexer's {index_b} B, got {c_kv_bytes}")
    return AttentionCost(
        attention_flops=flops,
        indexer_flops=context * indexer_pair_flops(m),
        indexer_score_bytes=2.0 * INDEXER_SCORE_BYTES * context,
        kv_read_bytes=float(context * index_b + attended * latent_b),
        kv_write_bytes=float(c_kv_bytes),
    )


def _compressed_decode_cost(m: ModelSpec, layer_type: str, context: int,
                            c_kv_bytes: int) -> AttentionCost:
    """A decode step of a DeepSeek-V4 layer at context S. Reads the window's min(S, w) entries
    and the attended compressed entries (all floor(S / r) in HCA, the top k in CSA, whose
    indexer also reads every entry's key and writes and reads an FP32 score per entry). Writes
    the new token's window entry and its compressor rows; every r-th step the compressor also
    reads its state and writes a new entry: counted here as 1 / r of each per step."""
    entry = compressed.entry_bytes(m)
    r = compressed.compress_ratio(m, layer_type)
    attended = decode_attended_tokens(m, layer_type, context)
    read = float(attended * entry)
    write = float(entry + compressed.compressor_row_bytes(m, layer_type))
    index_flops = score_bytes = 0.0
    pooling = 0.0
    if r:
        stored = compressed.stored_entry_bytes(m, layer_type, c_kv_bytes)
        read += compressed.compressor_state_bytes(m, layer_type) / r
        write += stored / r
        pooling = compressed.compressor_flops_per_token(m, layer_type)
    if layer_type == spec.COMPRESSED_SPARSE_ATTENTION:
        index_b = compressed.tier_index_key_bytes(m, c_kv_bytes)
        if index_b <= 0:
            raise ValueError(f"a CSA tier must exceed the {entry} B entry, got {c_kv_bytes}")
        entries = compressed.compressed_entries(m, layer_type, context)
        read += entries * index_b
        index_flops = entries * indexer_pair_flops(m)
        score_bytes = 2.0 * INDEXER_SCORE_BYTES * entries
    return AttentionCost(
        attention_flops=attended * attention_pair_flops(m),
        indexer_flops=index_flops,
        indexer_score_bytes=score_bytes,
        kv_read_bytes=read,
        kv_write_bytes=write,
        compressor_flops=pooling,
    )
