"""ModelSpec properties: attention kind, MoE layer pattern, invariants."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given

from ctxplan.config.model_presets import load_model
from ctxplan.model import ModelSpec, MoESpec
from tests.model.model_strategies import model_specs


def test_attention_kinds() -> None:
    assert load_model("deepseek-v3").attention_kind == "mla"
    assert load_model("llama3.1-8b").attention_kind == "gqa"
    mha = dataclasses.replace(load_model("llama3.1-8b"), num_key_value_heads=32)
    assert mha.attention_kind == "mha"


def test_deepseek_v3_moe_layers() -> None:
    m = load_model("deepseek-v3")
    assert [m.is_moe_layer(i) for i in range(4)] == [False, False, False, True]
    assert (m.n_dense_layers, m.n_moe_layers) == (3, 58)
    assert load_model("qwen3-235b-a22b").n_moe_layers == 94
    assert load_model("llama3.1-70b").n_moe_layers == 0
    with pytest.raises(ValueError):
        m.is_moe_layer(61)


def test_moe_layer_freq_counts_from_first_moe_layer() -> None:
    base = load_model("deepseek-v3")
    assert base.moe is not None
    m = dataclasses.replace(
        base,
        num_hidden_layers=10,
        moe=dataclasses.replace(base.moe, first_k_dense_replace=1, moe_layer_freq=3),
    )
    assert [i for i in range(10) if m.is_moe_layer(i)] == [1, 4, 7]
    assert m.n_moe_layers == 3


def test_invariants() -> None:
    m = load_model("llama3.1-8b")
    with pytest.raises(ValueError, match="multiple"):
        dataclasses.replace(m, num_key_value_heads=5)
    with pytest.raises(ValueError):
        dataclasses.replace(m, num_hidden_layers=0)
    with pytest.raises(ValueError):
        MoESpec(8, 0, 9, 1024, 0)
    with pytest.raises(ValueError, match="at least one layer"):
        dataclasses.replace(m, moe=MoESpec(8, 0, 2, 1024, first_k_dense_replace=32))


@given(model_specs())
def test_moe_layer_count_matches_predicate(m: ModelSpec) -> None:
    moe_layers = [i for i in range(m.num_hidden_layers) if m.is_moe_layer(i)]
    assert len(moe_layers) == m.n_moe_layers
    assert m.n_dense_layers + m.n_moe_layers == m.num_hidden_layers
    if m.moe is not None:
        assert moe_layers[0] == m.moe.first_k_dense_replace
