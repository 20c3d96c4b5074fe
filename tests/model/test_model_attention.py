"""Attention-core FLOPs: dims of each mode, Meta's 1M-token Llama3-405B prefill count."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxplan.config.model_presets import load_model
from ctxplan.model import (
    MLA_MODES,
    AttentionDims,
    ModelSpec,
    attention_core_flops,
    attention_dims,
    attention_linears,
    attention_pair_flops,
    causal_pairs,
    default_mla_mode,
    embedding_params,
    mla_absorb_flops_per_token,
    param_count,
)
from tests.model.model_strategies import model_specs


def test_mla_dims_standard_and_absorbed() -> None:
    m = load_model("deepseek-v3")
    assert attention_dims(m) == AttentionDims(q_heads=128, kv_heads=128, qk_dim=192, v_dim=128)
    assert attention_dims(m, "absorbed") == AttentionDims(128, 1, 576, 512)
    assert attention_pair_flops(m, "standard") == 2 * 128 * (192 + 128)
    assert attention_pair_flops(m, "absorbed") == 2 * 128 * (576 + 512)
    # absorbed extra work per query: W_UK and W_UV, i.e. kv_b_proj applied once per query
    assert mla_absorb_flops_per_token(m) == 2 * 128 * 128 * 512 + 2 * 128 * 512 * 128
    kv_b = next(lin for lin in attention_linears(m) if lin.name == "kv_b_proj")
    assert mla_absorb_flops_per_token(m) == kv_b.flops(1)


def test_default_modes() -> None:
    assert default_mla_mode(is_prefill=True) == "standard"
    assert default_mla_mode(is_prefill=False) == "absorbed"
    assert MLA_MODES == ("standard", "absorbed")


def test_gqa_ignores_mla_mode() -> None:
    m = load_model("llama3.1-405b")
    dims = AttentionDims(128, 8, 128, 128)
    assert attention_dims(m, "standard") == attention_dims(m, "absorbed") == dims
    assert mla_absorb_flops_per_token(m) == 0
    with pytest.raises(ValueError, match="mla_mode"):
        attention_dims(m, "fused")


def test_llama3_405b_1m_prefill_matches_meta() -> None:
    # Meta, arXiv:2411.01783: 2*W*T + 0.5*4*T^2*D*layers = 8.1e17 + 4.1e18 = 4.9e18 at T = 1M
    m = load_model("llama3.1-405b")
    t = 1_000_000
    linear_flops = 2 * (param_count(m) - embedding_params(m)) * t  # the lookup is not a matmul
    attn_flops = m.num_hidden_layers * attention_core_flops(m, t, causal_pairs(t) / t)
    assert linear_flops == pytest.approx(8.1e17, rel=0.01)
    assert attn_flops == pytest.approx(4.1e18, rel=0.02)
    assert linear_flops + attn_flops == pytest.approx(4.9e18, rel=0.02)
    # the attention term is exactly 0.5 * 4 * T^2 * D * layers up to the diagonal
    d = m.hidden_size
    assert attn_flops == pytest.approx(0.5 * 4 * t * t * d * m.num_hidden_layers, rel=1e-5)


def test_decode_step_flops() -> None:
    m = load_model("deepseek-v3")
    s = 2**20
    assert attention_core_flops(m, 1, s, "absorbed") == 2 * 128 * (576 + 512) * s


def test_causal_pairs() -> None:
    assert causal_pairs(4) == 10
    assert causal_pairs(2, kv_before=3) == 2 * 3 + 3
    # splitting a sequence into chunks conserves the pairs
    assert causal_pairs(3) + causal_pairs(5, kv_before=3) == causal_pairs(8)
    with pytest.raises(ValueError):
        causal_pairs(-1)


@given(model_specs(), st.sampled_from(MLA_MODES), st.integers(0, 10**6), st.integers(0, 10**6))
def test_core_flops_are_pairs_times_pair_flops(m: ModelSpec, mode: str, q: int, kv: int) -> None:
    assert attention_core_flops(m, q, kv, mode) == attention_pair_flops(m, mode) * q * kv
    d = attention_dims(m, mode)
    assert d.q_heads % d.kv_heads == 0


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=8))
def test_causal_pairs_are_additive_over_chunks(chunks: list[int]) -> None:
    before, total = 0, 0
    for n in chunks:
        total += causal_pairs(n, before)
        before += n
    assert total == causal_pairs(before) == before * (before + 1) // 2
