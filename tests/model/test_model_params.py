"""Parameter counts, weight bytes and linear shapes against published figures."""

from __future__ import annotations

import pytest
from hypothesis import given

from ctxplan.config.model_presets import load_model
from ctxplan.model import (
    ModelSpec,
    active_param_count,
    attention_linears,
    bytes_per_param,
    dense_ffn_linears,
    embedding_params,
    expert_linears,
    lm_head_params,
    param_count,
    router_linear,
    shared_expert_linears,
    weight_bytes,
    weight_bytes_per_layer,
)
from ctxplan.model.params import non_layer_params
from tests.model.model_strategies import model_specs

# Published totals. DeepSeek-V3: technical report arXiv:2412.19437 (671B without the 14B MTP
# module). Llama 3.1: Meta (405B) and the HF safetensors counts (70.6B, 8.03B). Qwen: model cards.
PUBLISHED_TOTAL = {
    "deepseek-v3": 671e9,
    "llama3.1-405b": 405e9,
    "llama3.1-70b": 70.6e9,
    "llama3.1-8b": 8.03e9,
    "qwen3-235b-a22b": 235e9,
    "qwen2.5-7b-1m": 7.61e9,
}
PUBLISHED_ACTIVE = {"deepseek-v3": 37e9, "qwen3-235b-a22b": 22e9}
# Non-embedding counts the Qwen model cards publish (embedding and LM head excluded).
PUBLISHED_NON_EMBEDDING = {"qwen3-235b-a22b": 234e9, "qwen2.5-7b-1m": 6.53e9}


@pytest.mark.parametrize("name", sorted(PUBLISHED_TOTAL))
def test_param_count_matches_published_total(name: str) -> None:
    actual = param_count(load_model(name))
    published = PUBLISHED_TOTAL[name]
    rel = abs(actual - published) / published
    assert rel < 0.01, (
        f"{name}: {actual / 1e9:.3f}B vs published {published / 1e9:.3f}B ({rel:.2%})"
    )


@pytest.mark.parametrize("name", sorted(PUBLISHED_ACTIVE))
def test_active_params_match_published(name: str) -> None:
    actual = active_param_count(load_model(name))
    published = PUBLISHED_ACTIVE[name]
    rel = abs(actual - published) / published
    assert rel < 0.03, f"{name}: {actual / 1e9:.3f}B active vs {published / 1e9:.1f}B ({rel:.2%})"


@pytest.mark.parametrize("name", sorted(PUBLISHED_NON_EMBEDDING))
def test_non_embedding_params_match_model_card(name: str) -> None:
    m = load_model(name)
    actual = param_count(m) - embedding_params(m) - lm_head_params(m)
    published = PUBLISHED_NON_EMBEDDING[name]
    rel = abs(actual - published) / published
    assert rel < 0.01, (
        f"{name}: {actual / 1e9:.3f}B vs published {published / 1e9:.2f}B ({rel:.2%})"
    )


def test_dense_model_active_equals_total() -> None:
    m = load_model("llama3.1-405b")
    assert active_param_count(m) == param_count(m)


def test_deepseek_v3_linear_shapes() -> None:
    m = load_model("deepseek-v3")
    shapes = {
        lin.name: (lin.in_features, lin.out_features, lin.shard) for lin in attention_linears(m)
    }
    assert shapes == {
        "q_a_proj": (7168, 1536, "replicated"),
        "q_b_proj": (1536, 128 * 192, "col"),
        "kv_a_proj_with_mqa": (7168, 576, "replicated"),
        "kv_b_proj": (512, 128 * 256, "col"),
        "o_proj": (128 * 128, 7168, "row"),
    }
    assert [(lin.name, lin.in_features, lin.out_features) for lin in expert_linears(m)] == [
        ("gate_up", 7168, 4096),
        ("down", 2048, 7168),
    ]
    assert sum(lin.params for lin in shared_expert_linears(m)) == 3 * 7168 * 2048
    assert router_linear(m).params == 7168 * 256
    assert router_linear(m).shard == "replicated"
    assert [(lin.name, lin.shard) for lin in dense_ffn_linears(m)] == [
        ("gate_up", "col"),
        ("down", "row"),
    ]


def test_gqa_linear_shapes() -> None:
    m = load_model("llama3.1-405b")
    shapes = {
        lin.name: (lin.in_features, lin.out_features, lin.shard) for lin in attention_linears(m)
    }
    assert shapes == {
        "q_proj": (16384, 16384, "col"),
        "k_proj": (16384, 1024, "col"),
        "v_proj": (16384, 1024, "col"),
        "o_proj": (16384, 16384, "row"),
    }
    with pytest.raises(ValueError, match="no MoE"):
        expert_linears(m)


def test_mla_without_q_lora_projects_q_directly() -> None:
    import dataclasses

    m = load_model("deepseek-v3")
    assert m.mla is not None
    lite = dataclasses.replace(m, mla=dataclasses.replace(m.mla, q_lora_rank=None))
    names = [lin.name for lin in attention_linears(lite)]
    assert names == ["q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"]


def test_qwen3_has_no_shared_experts() -> None:
    assert shared_expert_linears(load_model("qwen3-235b-a22b")) == []


def test_weight_bytes_follow_dtype() -> None:
    m = load_model("deepseek-v3")
    dense, moe = weight_bytes_per_layer(m, 0), weight_bytes_per_layer(m, 3)
    assert moe > 15 * dense  # 11.5 GB vs 0.58 GB in FP8
    # FP8 with an FP32 scale per 128 x 128 block: 1 + 4 / 16384 bytes per parameter
    assert weight_bytes_per_layer(m, 3, "bf16") == pytest.approx(2 * moe / (1 + 4 / 16384))
    assert weight_bytes_per_layer(m, 3, "fp8") == pytest.approx(moe / (1 + 4 / 16384))
    # FP8 DeepSeek-V3 is ~671 GB of weights
    assert weight_bytes(m) == pytest.approx(671e9, rel=0.01)
    assert weight_bytes(load_model("llama3.1-405b")) == pytest.approx(2 * 405.85e9, rel=0.001)
    with pytest.raises(ValueError):
        weight_bytes_per_layer(m, 61)


def test_bytes_per_param() -> None:
    assert [bytes_per_param(d) for d in ("bf16", "fp16", "fp8", "fp32", "int8", "int4")] == [
        2,
        2,
        1,
        4,
        1,
        0.5,
    ]
    with pytest.raises(ValueError, match="unknown dtype"):
        bytes_per_param("fp6")


@given(model_specs())
def test_layers_plus_rest_sum_to_total(m: ModelSpec) -> None:
    per_layer = sum(weight_bytes_per_layer(m, i, "fp32") for i in range(m.num_hidden_layers))
    assert per_layer / 4 + non_layer_params(m) == param_count(m)
    assert active_param_count(m) <= param_count(m)
    if m.moe is None or m.moe.num_experts_per_tok == m.moe.n_routed_experts:
        assert active_param_count(m) == param_count(m)
