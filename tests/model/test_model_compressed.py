"""DeepSeek-V4 at the model level: its cache against the engines' figures, its (query, entry)
pairs against brute-force counts, its parameters against the published totals."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ctxplan.config.model_presets import load_model
from ctxplan.config.model_yaml import model_from_dict, model_to_dict
from ctxplan.model import (
    COMPRESSED_LAYER_TYPES,
    COMPRESSED_SPARSE_ATTENTION,
    HEAVILY_COMPRESSED_ATTENTION,
    WINDOW_ATTENTION,
    ModelSpec,
    active_param_count,
    attended_pairs,
    attention_dims,
    attention_linears,
    attention_pair_flops,
    decode_attention_cost,
    embedding_params,
    indexer_pair_flops,
    indexer_pairs,
    kv_bytes_per_sequence,
    kv_bytes_per_token,
    kv_tiers,
    layer_kv_bytes,
    param_count,
    prefill_attention_cost,
    resolve_kv_tier,
    weight_bytes,
)
from ctxplan.model import compressed as c
from ctxplan.model.params import (
    ffn_params,
    mhc_params,
    mtp_param_count,
    mtp_weight_bytes,
    non_layer_weight_bytes,
    weight_bytes_per_layer,
)
from tests.model.model_strategies import compressed_model_specs

PRO = load_model("deepseek-v4-pro")
FLASH = load_model("deepseek-v4-flash")


# -- the cache -----------------------------------------------------------------------------


def test_entry_and_indexer_key_bytes_are_the_engines_layout() -> None:
    # 448 FP8 latent values + 64 BF16 RoPE values + 8 B of scales; indexer key 128 values + FP32
    assert c.entry_bytes(PRO) == 448 + 128 + 8 == 584
    assert (c.indexer_key_bytes(PRO, "fp8"), c.indexer_key_bytes(PRO, "fp4")) == (132, 68)
    assert kv_tiers(PRO) == kv_tiers(FLASH) == {"v4-fp8": 716, "v4-fp4-index": 652}
    assert resolve_kv_tier(PRO, "V4-FP8") == ("v4-fp8", 716)


def test_pro_grows_5511_bytes_per_token_and_holds_5_78_gb_at_1m() -> None:
    # CSA: (584 + 132) / 4 = 179 B per layer per token; HCA: 584 / 128 = 4.5625 B
    assert c.growth_bytes_per_token(PRO, COMPRESSED_SPARSE_ATTENTION, 716) == 179
    assert c.growth_bytes_per_token(PRO, HEAVILY_COMPRESSED_ATTENTION, 716) == 4.5625
    assert kv_bytes_per_token(PRO, 716) == 30 * 179 + 31 * 4.5625 == 5511.4375
    growth = 5511.4375 * 2**20
    assert growth == pytest.approx(5.78e9, rel=2e-3)
    total = kv_bytes_per_sequence(PRO, 2**20, 716)
    # plus every layer's 128-entry window ring and the compressors' rolling states
    rings = 61 * 128 * 584
    states = sum(c.compressor_state_bytes(PRO, k) * n for k, n in PRO.layer_type_counts.items())
    assert total == growth + rings + states
    assert total == pytest.approx(5.78e9, rel=0.01)
    # the FP4 indexer key: 163 B per CSA layer per token
    assert kv_bytes_per_token(PRO, 652) == 30 * 163 + 31 * 4.5625


def test_flash_grows_3_85_kb_per_token() -> None:
    assert kv_bytes_per_token(FLASH, 716) == 21 * 179 + 20 * 4.5625 == 3850.25
    # the two window-only layers keep 128 entries whatever the context
    assert layer_kv_bytes(FLASH, WINDOW_ATTENTION, 2**20, 716) == 128 * 584


def test_a_v4_number_tier_is_the_csa_entry_with_its_key() -> None:
    assert resolve_kv_tier(PRO, 700) == ("custom-700", 700)
    with pytest.raises(Exception, match="584"):
        resolve_kv_tier(PRO, 584)


def test_entries_are_complete_groups_and_the_state_holds_the_rest() -> None:
    assert [c.compressed_entries(PRO, COMPRESSED_SPARSE_ATTENTION, s) for s in (3, 4, 7, 8)] == [
        0, 1, 1, 2]
    assert c.compressed_entries(PRO, HEAVILY_COMPRESSED_ATTENTION, 2**20) == 8192
    # CSA's overlapping compressor: 2 x (2 x 4 rows of 2 x 512) FP32, and its indexer's (x 128)
    assert c.compressor_state_bytes(PRO, COMPRESSED_SPARSE_ATTENTION) == (
        2 * 8 * 1024 * 4 + 2 * 8 * 256 * 4)
    assert c.compressor_state_bytes(PRO, HEAVILY_COMPRESSED_ATTENTION) == 2 * 128 * 512 * 4
    assert c.compressor_state_bytes(PRO, WINDOW_ATTENTION) == 0


# -- pairs against brute force ------------------------------------------------------------


def _brute_entries(m: ModelSpec, kind: str, lo: int, hi: int, capped: bool) -> int:
    """(query, entry) pairs of the queries at 1-based positions lo + 1 .. hi, by counting."""
    r = c.compress_ratio(m, kind)
    if not r:
        return 0
    total = 0
    for t in range(lo + 1, hi + 1):
        seen = sum(1 for j in range(t) if (j + 1) * r <= t)   # entry j done by token (j+1) r
        if capped and kind == COMPRESSED_SPARSE_ATTENTION:
            assert m.dsa is not None
            seen = min(seen, m.dsa.index_topk)
        total += seen
    return total


def _brute_window(m: ModelSpec, lo: int, hi: int) -> int:
    w = c.window(m)
    return sum(min(t, w) for t in range(lo + 1, hi + 1))


@given(compressed_model_specs(), st.sampled_from(COMPRESSED_LAYER_TYPES), st.integers(0, 300),
       st.integers(0, 300))
@example(PRO, COMPRESSED_SPARSE_ATTENTION, 0, 300)
def test_pairs_match_brute_force(m: ModelSpec, kind: str, before: int, q: int) -> None:
    small = dataclasses.replace(m, dsa=dataclasses.replace(m.dsa, index_topk=min(
        m.dsa.index_topk, 7))) if m.dsa is not None else m
    for spec in (m, small):
        main = _brute_window(spec, before, before + q) + _brute_entries(
            spec, kind, before, before + q, capped=True)
        assert attended_pairs(spec, kind, q, before) == main
        assert indexer_pairs(spec, kind, q, before) == (
            _brute_entries(spec, kind, before, before + q, capped=False)
            if kind == COMPRESSED_SPARSE_ATTENTION else 0)


@given(compressed_model_specs(), st.sampled_from(COMPRESSED_LAYER_TYPES),
       st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6))
def test_pairs_of_consecutive_ranges_add_up(m: ModelSpec, kind: str, a: int, b: int,
                                            d: int) -> None:
    whole = attended_pairs(m, kind, a + b + d)
    assert whole == (attended_pairs(m, kind, a) + attended_pairs(m, kind, b, a)
                     + attended_pairs(m, kind, d, a + b))
    assert indexer_pairs(m, kind, a + b) == indexer_pairs(m, kind, a) + indexer_pairs(
        m, kind, b, a)


@given(compressed_model_specs(), st.sampled_from(COMPRESSED_LAYER_TYPES),
       st.integers(0, 10**7), st.integers(0, 10**7))
def test_costs_and_cache_never_fall_as_context_grows(m: ModelSpec, kind: str, s1: int,
                                                     s2: int) -> None:
    lo, hi = sorted((s1, s2))
    tier = c.entry_bytes(m) + c.indexer_key_bytes(m)
    a, b = (decode_attention_cost(m, kind, s, tier) for s in (lo, hi))
    assert a.attention_flops <= b.attention_flops and a.indexer_flops <= b.indexer_flops
    assert a.kv_read_bytes <= b.kv_read_bytes
    assert layer_kv_bytes(m, kind, lo, tier) <= layer_kv_bytes(m, kind, hi, tier)
    pa, pb = (prefill_attention_cost(m, kind, s) for s in (lo, hi))
    assert pa.attention_flops <= pb.attention_flops and pa.indexer_flops <= pb.indexer_flops


def test_one_decode_step_of_each_kind_at_1m() -> None:
    s, tier = 2**20, 716
    pair = attention_pair_flops(PRO)
    assert pair == 2 * 128 * (512 + 512)   # MQA: the latent is key (RoPE inside) and value
    csa = decode_attention_cost(PRO, COMPRESSED_SPARSE_ATTENTION, s, tier)
    assert csa.attention_flops == (128 + 1024) * pair            # the window + the top 1024
    assert csa.indexer_flops == (s // 4) * indexer_pair_flops(PRO)
    reads = (128 + 1024) * 584 + (s // 4) * 132 + c.compressor_state_bytes(
        PRO, COMPRESSED_SPARSE_ATTENTION) / 4
    assert csa.kv_read_bytes == reads
    hca = decode_attention_cost(PRO, HEAVILY_COMPRESSED_ATTENTION, s, tier)
    assert hca.attention_flops == (128 + 8192) * pair and hca.indexer_flops == 0
    window = decode_attention_cost(FLASH, WINDOW_ATTENTION, s, tier)
    assert window.kv_read_bytes == 128 * 584 and window.kv_write_bytes == 584


def test_prefill_of_csa_is_the_window_and_the_top_k_of_the_entries() -> None:
    s = 65536
    cost = prefill_attention_cost(PRO, COMPRESSED_SPARSE_ATTENTION, s)
    window = 128 * 129 // 2 + (s - 128) * 128
    entries = sum(min(t // 4, 1024) for t in range(1, s + 1))
    assert cost.attention_flops == (window + entries) * attention_pair_flops(PRO)
    assert cost.indexer_flops == sum(t // 4 for t in range(1, s + 1)) * indexer_pair_flops(PRO)
    assert cost.compressor_flops == s * (2 * 2 * 512 + 2 * 2 * 128)


# -- the block and its parameters ----------------------------------------------------------


def test_attention_block_shapes() -> None:
    dims = attention_dims(PRO)
    assert (dims.q_heads, dims.kv_heads, dims.qk_dim, dims.v_dim) == (128, 1, 512, 512)
    lin = {x.name: x for x in attention_linears(PRO, COMPRESSED_SPARSE_ATTENTION)}
    # the latent serves every head: replicated under TP, as MLA's (the KV is replicated too)
    assert lin["wkv"].shard == "replicated" and lin["wkv"].out_features == 512
    # grouped low-rank output: 16 groups of 8 heads x 512 -> 1024 each, then 16 x 1024 -> 7168
    assert lin["wo_a"].params == 16 * (8 * 512) * 1024 and lin["wo_a"].groups == 16
    assert (lin["wo_b"].in_features, lin["wo_b"].out_features) == (16 * 1024, 7168)
    assert "indexer_wq_b" in lin and "compressor_wkv" in lin
    hca = {x.name for x in attention_linears(PRO, HEAVILY_COMPRESSED_ATTENTION)}
    assert "compressor_wkv" in hca and "indexer_wq_b" not in hca
    assert "compressor_wkv" not in {x.name for x in attention_linears(FLASH, WINDOW_ATTENTION)}


def test_mhc_the_hash_layers_and_the_mtp_layer() -> None:
    assert PRO.residual_width == 4 * 7168
    assert mhc_params(PRO) == 24 * 4 * 7168 + 24 + 3
    # the first 3 layers route by token-id hash: no router
    assert [PRO.is_hash_routed(j) for j in range(5)] == [True, True, True, False, False]
    assert ffn_params(PRO, 3) - ffn_params(PRO, 2) == 384 * 7168
    # the MTP layer: weights counted in memory, not in the published total
    mtp = mtp_param_count(PRO)
    assert 25e9 < mtp < 27e9
    layers = sum(weight_bytes_per_layer(PRO, j) for j in range(61))
    assert weight_bytes(PRO) == layers + non_layer_weight_bytes(PRO) + mtp_weight_bytes(PRO)
    assert mtp_weight_bytes(PRO) < mtp   # FP4 experts, FP8 elsewhere


# Published (DeepSeek-V4 release): Pro 1.6T total, 49B activated; Flash 284B, 13B. "Activated"
# leaves the embedding lookup out (as DeepSeek-V3's 37B: 36.6B so counted); the totals leave the
# MTP layer out (Flash's 284B has three significant digits and rules it out: with it, 290.9B).
def test_parameters_against_the_published_totals() -> None:
    assert param_count(FLASH) == pytest.approx(284e9, rel=0.01)            # 284.33B
    assert round(param_count(PRO) / 1e11) == 16                            # 1.573T: "1.6T"
    assert param_count(PRO) + mtp_param_count(PRO) == pytest.approx(1.6e12, rel=0.01)
    active_pro = active_param_count(PRO) - embedding_params(PRO)           # 48.84B
    assert active_pro == pytest.approx(49e9, rel=0.01)
    assert round((active_param_count(FLASH) - embedding_params(FLASH)) / 1e9) == 13  # 13.27B


def test_presets_round_trip_through_yaml() -> None:
    for m in (PRO, FLASH):
        assert model_from_dict(model_to_dict(m), "x") == m
        assert m.context_limit == 2**20   # max(1,048,576, 16 x 65,536)


def test_compressed_kinds_refuse_positional_counts() -> None:
    from ctxplan.model import block_pairs, kv_tokens

    with pytest.raises(ValueError, match="pooled entries"):
        block_pairs(PRO, COMPRESSED_SPARSE_ATTENTION, 0, 10, 0, 10)
    with pytest.raises(ValueError, match="layer_kv_bytes"):
        kv_tokens(PRO, HEAVILY_COMPRESSED_ATTENTION, 10)
    assert block_pairs(FLASH, WINDOW_ATTENTION, 0, 300, 0, 300) == attended_pairs(
        FLASH, WINDOW_ATTENTION, 300)
