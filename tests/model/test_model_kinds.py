"""Attention kinds: (query, key) pairs against brute-force masks, caches, FLOPs and bytes."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxplan.config.model_presets import load_model
from ctxplan.model import (
    CHUNKED_ATTENTION,
    FULL_ATTENTION,
    INDEXED_ATTENTION,
    LINEAR_ATTENTION,
    SLIDING_ATTENTION,
    ModelSpec,
    attended_pairs,
    attention_pair_flops,
    block_pairs,
    capped_pairs,
    causal_pairs,
    chunked_pairs,
    decode_attention_cost,
    indexer_key_bytes,
    indexer_pair_flops,
    indexer_pairs,
    kv_tiers,
    kv_tokens,
    layer_kv_bytes,
    linear_correction_flops_per_token,
    linear_cp_flops_per_token,
    linear_decode_flops_per_token,
    linear_prefill_flops_per_token,
    linear_recurrent_state_bytes,
    linear_state_bytes,
    linear_state_update_flops,
    model_default_mla_mode,
    pairs_below,
    prefill_attention_cost,
    window_start,
)
from tests.model.family_specs import DEEPSEEK_V32, GEMMA3_27B, GPT_OSS_20B, LLAMA4_SCOUT, QWEN3_NEXT
from tests.model.model_strategies import HYBRID_LAYER_TYPES, hybrid_model_specs


# The masks as transformers writes them (masking_utils.py), counted pair by pair.
def _brute_window(q: int, before: int, w: int) -> int:
    return sum(1 for i in range(before, before + q) for j in range(i + 1) if j > i - w)


def _brute_chunked(q: int, before: int, c: int) -> int:
    return sum(1 for i in range(before, before + q) for j in range(i + 1) if j // c == i // c)


@given(st.integers(0, 60), st.integers(0, 60), st.integers(1, 40))
def test_window_and_chunk_pairs_equal_the_masks(q: int, before: int, span: int) -> None:
    assert capped_pairs(q, before, span) == _brute_window(q, before, span)
    assert chunked_pairs(q, before, span) == _brute_chunked(q, before, span)


def _mask(m: ModelSpec, layer_type: str, p: int, j: int) -> bool:
    """Does the query at p see the key at j (the indexer's causal mask for DSA)?"""
    if j > p:
        return False
    if layer_type == SLIDING_ATTENTION:
        assert m.sliding_window is not None
        return j > p - m.sliding_window
    if layer_type == CHUNKED_ATTENTION:
        assert m.attention_chunk_size is not None
        return j // m.attention_chunk_size == p // m.attention_chunk_size
    return True


_WINDOWED = dataclasses.replace(GPT_OSS_20B, sliding_window=7)
_CHUNKED = dataclasses.replace(LLAMA4_SCOUT, attention_chunk_size=5)


@given(st.sampled_from([(_WINDOWED, FULL_ATTENTION), (_WINDOWED, SLIDING_ATTENTION),
                        (_CHUNKED, CHUNKED_ATTENTION), (DEEPSEEK_V32, INDEXED_ATTENTION)]),
       st.integers(0, 30), st.integers(0, 30), st.integers(0, 30), st.integers(0, 30))
def test_pairs_of_any_rectangle_equal_the_mask(case: tuple[ModelSpec, str], a: int, b: int,
                                               c: int, d: int) -> None:
    # what the CP emitters count between a rank's queries and another rank's keys
    m, layer_type = case
    q_lo, q_hi = sorted((a, b))
    k_lo, k_hi = sorted((c, d))
    brute = sum(_mask(m, layer_type, p, j) for p in range(q_lo, q_hi)
                for j in range(k_lo, k_hi))
    assert block_pairs(m, layer_type, q_lo, q_hi, k_lo, k_hi) == brute
    assert pairs_below(m, layer_type, q_hi, k_hi) == sum(
        _mask(m, layer_type, p, j) for p in range(q_hi) for j in range(k_hi))
    # the first key each query sees
    for p in range(q_lo, q_hi):
        first = min(j for j in range(p + 1) if _mask(m, layer_type, p, j))
        assert window_start(m, layer_type, p) == first


def test_rectangles_cover_the_attended_pairs() -> None:
    # queries after a prefix against every key: the kind's pairs (DSA: its indexer's)
    for m, layer_type in ((GPT_OSS_20B, SLIDING_ATTENTION), (LLAMA4_SCOUT, CHUNKED_ATTENTION),
                          (GPT_OSS_20B, FULL_ATTENTION)):
        for q, before in ((5000, 0), (3000, 9000), (1, 8191), (10_000, 8192)):
            assert block_pairs(m, layer_type, before, before + q, 0, before + q) == (
                attended_pairs(m, layer_type, q, before))
    assert block_pairs(DEEPSEEK_V32, INDEXED_ATTENTION, 100, 300, 0, 300) == (
        indexer_pairs(DEEPSEEK_V32, INDEXED_ATTENTION, 200, 100))


def test_gated_deltanet_under_cp() -> None:
    # Qwen3-Next: 32 value heads of d_k = d_v = 128, sub-chunks of 64
    h, d, c = 32, 128, 64
    assert linear_recurrent_state_bytes(QWEN3_NEXT) == h * d * d * 2
    assert linear_recurrent_state_bytes(QWEN3_NEXT) < linear_state_bytes(QWEN3_NEXT)
    assert linear_cp_flops_per_token(QWEN3_NEXT) == h * (4 * d * d + 2 * d**3 / c + 2 * c * d)
    assert linear_state_update_flops(QWEN3_NEXT) == h * (2 * d**3 + d * d)
    assert linear_correction_flops_per_token(QWEN3_NEXT) == h * 2 * d * d
    # CP about doubles the chunkwise pass's work for a chunk with an incoming state
    ratio = linear_cp_flops_per_token(QWEN3_NEXT) / (
        linear_prefill_flops_per_token(QWEN3_NEXT) - 2 * 8192 * 4)
    assert 0.8 < ratio < 1.0


@given(hybrid_model_specs(), st.sampled_from(HYBRID_LAYER_TYPES), st.integers(0, 5000),
       st.integers(0, 5000), st.integers(0, 5000))
def test_pairs_of_consecutive_ranges_add_up(
    m: ModelSpec, layer_type: str, a: int, b: int, c: int
) -> None:
    # what the CP ring's chunks rely on: any split of [0, S) into ranges sums to the whole
    whole = attended_pairs(m, layer_type, a + b + c)
    assert whole == (attended_pairs(m, layer_type, a) + attended_pairs(m, layer_type, b, a)
                     + attended_pairs(m, layer_type, c, a + b))
    assert indexer_pairs(m, layer_type, a + b) == (
        indexer_pairs(m, layer_type, a) + indexer_pairs(m, layer_type, b, a))
    assert 0 <= whole <= causal_pairs(a + b + c)


def test_pairs_by_kind() -> None:
    S = 10_000
    assert attended_pairs(GPT_OSS_20B, FULL_ATTENTION, S) == S * (S + 1) // 2
    assert attended_pairs(GPT_OSS_20B, SLIDING_ATTENTION, S) == 128 * 129 // 2 + (S - 128) * 128
    assert attended_pairs(LLAMA4_SCOUT, CHUNKED_ATTENTION, S) == (
        8192 * 8193 // 2 + (S - 8192) * (S - 8191) // 2)
    assert attended_pairs(DEEPSEEK_V32, INDEXED_ATTENTION, S) == (
        2048 * 2049 // 2 + (S - 2048) * 2048)
    assert indexer_pairs(DEEPSEEK_V32, INDEXED_ATTENTION, S) == S * (S + 1) // 2
    assert attended_pairs(QWEN3_NEXT, LINEAR_ATTENTION, S) == 0


def test_kept_tokens_by_kind() -> None:
    for S in (1, 100, 128, 129, 131_072):
        assert kv_tokens(GPT_OSS_20B, FULL_ATTENTION, S) == S
        assert kv_tokens(GPT_OSS_20B, SLIDING_ATTENTION, S) == min(S, 128)
        assert kv_tokens(LLAMA4_SCOUT, CHUNKED_ATTENTION, S) == min(S, 8192)
        assert kv_tokens(DEEPSEEK_V32, INDEXED_ATTENTION, S) == S
        assert kv_tokens(QWEN3_NEXT, LINEAR_ATTENTION, S) == 0
    assert kv_tokens(GEMMA3_27B, SLIDING_ATTENTION, 2**20) == 1024


def test_dsa_indexer_key_and_tiers() -> None:
    # FP8 key of 128 values and one FP32 scale per 128: DeepSeek-V3.2's Indexer k_cache
    assert indexer_key_bytes(DEEPSEEK_V32) == 132
    assert indexer_key_bytes(GPT_OSS_20B) == 0
    assert kv_tiers(DEEPSEEK_V32) == {
        "mla-bf16": 1152 + 132, "mla-fp8": 576 + 132, "mla-fp8-flashmla": 656 + 132}
    assert indexer_pair_flops(DEEPSEEK_V32) == 2 * 64 * (128 + 1)


def test_dsa_up_to_k_tokens_is_dense_mla_plus_the_indexer() -> None:
    v3 = load_model("deepseek-v3")
    k = 2048
    for S in (1, 1000, k):
        for mode in ("standard", "absorbed"):
            sparse = prefill_attention_cost(DEEPSEEK_V32, INDEXED_ATTENTION, S, mode)
            dense = prefill_attention_cost(v3, FULL_ATTENTION, S, mode)
            assert sparse.attention_flops == dense.attention_flops
            assert sparse.indexer_flops == causal_pairs(S) * 16_512
        c = kv_tiers(DEEPSEEK_V32)["mla-fp8-flashmla"]
        step = decode_attention_cost(DEEPSEEK_V32, INDEXED_ATTENTION, S, c)
        dense_step = decode_attention_cost(v3, FULL_ATTENTION, S, c - 132)
        assert step.attention_flops == dense_step.attention_flops
        assert step.indexer_flops == S * 16_512
        # every indexer key plus the latent of all S (= top-k) tokens
        assert step.kv_read_bytes == dense_step.kv_read_bytes + S * 132


def test_dsa_main_attention_stops_growing_past_k() -> None:
    c = kv_tiers(DEEPSEEK_V32)["mla-fp8-flashmla"]
    at_128k = decode_attention_cost(DEEPSEEK_V32, INDEXED_ATTENTION, 2**17, c)
    at_1m = decode_attention_cost(DEEPSEEK_V32, INDEXED_ATTENTION, 2**20, c)
    assert at_1m.attention_flops == at_128k.attention_flops == 2048 * attention_pair_flops(
        DEEPSEEK_V32, "absorbed")
    assert at_1m.indexer_flops == 8 * at_128k.indexer_flops
    assert at_1m.kv_read_bytes == 2**20 * 132 + 2048 * 656
    assert at_1m.indexer_score_bytes == 2 * 4 * 2**20  # FP32 scores written, read by top-k
    # decode reads grow with S at 132 B per token against DeepSeek-V3's 656 (FP8 FlashMLA)
    v3 = load_model("deepseek-v3")
    v3_growth = (decode_attention_cost(v3, FULL_ATTENTION, 2**20, 656).kv_read_bytes
                 - decode_attention_cost(v3, FULL_ATTENTION, 2**17, 656).kv_read_bytes)
    assert (at_1m.kv_read_bytes - at_128k.kv_read_bytes) / v3_growth == pytest.approx(132 / 656)


def test_dsa_runs_absorbed_in_both_phases() -> None:
    assert model_default_mla_mode(DEEPSEEK_V32, is_prefill=True) == "absorbed"
    v3 = load_model("deepseek-v3")
    assert model_default_mla_mode(v3, is_prefill=True) == "standard"
    assert model_default_mla_mode(v3, is_prefill=False) == "absorbed"


def test_gated_deltanet_state_of_qwen3_next() -> None:
    # recurrent 32 x 128 x 128 and conv 8192 x 3, BF16
    assert linear_state_bytes(QWEN3_NEXT) == (32 * 128 * 128 + 8192 * 3) * 2 == 1_097_728
    la = QWEN3_NEXT.linear_attention
    assert la is not None
    fp32 = dataclasses.replace(QWEN3_NEXT, linear_attention=dataclasses.replace(
        la, state_dtype="fp32"))
    assert linear_state_bytes(fp32) == 2 * 1_097_728
    # the state is the layer's whole cache, whatever S and whatever the KV tier
    for S in (1, 2**20):
        assert layer_kv_bytes(QWEN3_NEXT, LINEAR_ATTENTION, S, 1) == 1_097_728
        assert layer_kv_bytes(QWEN3_NEXT, LINEAR_ATTENTION, S, 4096) == 1_097_728
    with pytest.raises(ValueError, match="no linear attention"):
        linear_state_bytes(GPT_OSS_20B)


def _chunk_matmul_flops(C: int, dk: int, dv: int) -> int:
    """FLOPs of one chunk of one value head in transformers' torch_chunk_gated_delta_rule,
    listed op by op from the code: (rows, inner, cols) of each matmul at 2 FLOPs per
    multiply-add; a unit lower-triangular C x C solve against n columns is C (C - 1) / 2 n
    multiply-adds, ~C^2 n FLOPs."""
    matmuls = [
        (C, dk, C),   # ut_system = k_beta @ key^T
        (C, dk, C),   # intra_chunk_attn = query @ key^T
        (C, dk, dv),  # k_cumdecay @ last_recurrent_state
        (C, dk, dv),  # query @ last_recurrent_state
        (C, C, dv),   # intra_chunk_attn @ v_new
        (dk, C, dv),  # key^T @ v_new
    ]
    solves = C * C * dv + C * C * dk  # solve_triangular for new_values and k_cumdecay
    return sum(2 * r * i * c for r, i, c in matmuls) + solves


def test_gated_deltanet_flops() -> None:
    heads, dk, dv, conv = 32, 128, 128, 2 * 8192 * 4
    per_token = heads * _chunk_matmul_flops(64, dk, dv) / 64 + conv
    assert linear_prefill_flops_per_token(QWEN3_NEXT) == per_token
    assert linear_decode_flops_per_token(QWEN3_NEXT) == heads * 7 * dk * dv + conv
    pre = prefill_attention_cost(QWEN3_NEXT, LINEAR_ATTENTION, 100_000)
    assert pre.attention_flops == 100_000 * per_token  # linear in S
    dec = decode_attention_cost(QWEN3_NEXT, LINEAR_ATTENTION, 2**20, 2048)
    assert dec.kv_read_bytes == dec.kv_write_bytes == 1_097_728  # state in, state back
    assert dec == decode_attention_cost(QWEN3_NEXT, LINEAR_ATTENTION, 8, 2048)
    # at 1M, one full-attention layer's decode step costs far more than a linear one
    full = decode_attention_cost(QWEN3_NEXT, FULL_ATTENTION, 2**20, 2048, "standard")
    assert full.attention_flops > 1000 * dec.attention_flops


def test_windowed_decode_reads_only_the_window() -> None:
    c = 2048
    for S in (64, 128, 2**17):
        step = decode_attention_cost(GPT_OSS_20B, SLIDING_ATTENTION, S, c)
        assert step.kv_read_bytes == min(S, 128) * c
        assert step.kv_write_bytes == c
        assert step.attention_flops == min(S, 128) * attention_pair_flops(GPT_OSS_20B)
        full = decode_attention_cost(GPT_OSS_20B, FULL_ATTENTION, S, c)
        assert full.kv_read_bytes == S * c
    # chunked: the worst step a sequence of S tokens has met
    assert decode_attention_cost(LLAMA4_SCOUT, CHUNKED_ATTENTION, 10**6, 4096).kv_read_bytes == (
        8192 * 4096)


@given(hybrid_model_specs(), st.sampled_from(HYBRID_LAYER_TYPES), st.integers(0, 10**6),
       st.integers(0, 10**6))
def test_costs_never_fall_as_context_grows(m: ModelSpec, layer_type: str, s1: int,
                                           s2: int) -> None:
    lo, hi = sorted((s1, s2))
    c_kv = 1000 + indexer_key_bytes(m)
    a = decode_attention_cost(m, layer_type, lo, c_kv)
    b = decode_attention_cost(m, layer_type, hi, c_kv)
    assert a.attention_flops <= b.attention_flops and a.indexer_flops <= b.indexer_flops
    assert a.kv_read_bytes <= b.kv_read_bytes
    assert layer_kv_bytes(m, layer_type, lo, c_kv) <= layer_kv_bytes(m, layer_type, hi, c_kv)
    pa, pb = (prefill_attention_cost(m, layer_type, s) for s in (lo, hi))
    assert pa.attention_flops <= pb.attention_flops


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="unknown layer type"):
        kv_tokens(GPT_OSS_20B, "mamba", 10)
    with pytest.raises(ValueError, match=">= 0"):
        attended_pairs(GPT_OSS_20B, SLIDING_ATTENTION, -1)
    with pytest.raises(ValueError, match="cap must be > 0"):
        capped_pairs(1, 0, 0)
