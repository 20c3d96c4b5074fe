"""The new families: parameter counts against the publishers' totals, and the hand-written
specs (tests/model/family_specs.py) against their config.json fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxplan.config.model_presets import load_model
from ctxplan.model import (
    FULL_ATTENTION,
    INDEXED_ATTENTION,
    ModelSpec,
    active_param_count,
    attention_linears,
    embedding_params,
    param_count,
    weight_bytes,
)
from ctxplan.model.params import attention_params
from tests.model.family_specs import (
    DEEPSEEK_V32,
    FAMILIES,
    GEMMA3_27B,
    GPT_OSS_20B,
    GPT_OSS_120B,
    LLAMA4_MAVERICK,
    LLAMA4_SCOUT,
    QWEN3_NEXT,
)

HF_DIR = Path(__file__).resolve().parents[1] / "data" / "hf-configs"
GIB = 2**30

# name -> (published total parameters, source). Our counts leave out what docs/model.md lists
# (biases, q/k norms, MTP modules, vision towers), so each sits a little below its total.
PUBLISHED_TOTAL = {
    "gpt-oss-120b": (116.83e9, "model card arXiv:2508.10925, Table 1"),
    "gpt-oss-20b": (20.91e9, "model card arXiv:2508.10925, Table 1"),
    "kimi-k2": (1.04e12, "Kimi K2 report arXiv:2507.20534 (1.04T total)"),
    # HF's safetensors count; it includes the 1-layer MTP module (~11.5B), which we do not count
    "deepseek-v3.2": (685e9, "deepseek-ai/DeepSeek-V3.2-Exp model page (685B)"),
    "glm-4.5": (355e9, "GLM-4.5 report arXiv:2508.06471 (355B total)"),
    "qwen3-next-80b-a3b": (80e9, "Qwen3-Next-80B-A3B model card (80B total)"),
    # text model: 25,600M non-embedding + 1,416M embedding (the 417M vision encoder excluded)
    "gemma-3-27b": (27.016e9, "Gemma 3 report arXiv:2503.19786, Table 1"),
    "llama-4-scout": (109e9, "Meta Llama 4 model card (109B total)"),
    "llama-4-maverick": (400e9, "Meta Llama 4 model card (400B total)"),
    # without their MTP layer (test_model_compressed.py has the tighter checks)
    "deepseek-v4-pro": (1.6e12, "DeepSeek-V4 release (1.6T total, 49B activated)"),
    "deepseek-v4-flash": (284e9, "DeepSeek-V4 release (284B total, 13B activated)"),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_TOTAL))
def test_total_parameters_within_3_percent(name: str) -> None:
    total, _ = PUBLISHED_TOTAL[name]
    assert param_count(FAMILIES[name]) == pytest.approx(total, rel=0.03)


@pytest.mark.parametrize(
    ("m", "active", "gib"),
    [(GPT_OSS_120B, 5.13e9, 60.8), (GPT_OSS_20B, 3.61e9, 12.8)],
)
def test_gpt_oss_active_and_checkpoint(m: ModelSpec, active: float, gib: float) -> None:
    # The model card counts the unembedding but not the embedding as active (Table 1), and
    # ships the experts in MXFP4 (4.25 bits), the rest in BF16: its checkpoint sizes.
    assert active_param_count(m) - embedding_params(m) == pytest.approx(active, rel=0.01)
    assert weight_bytes(m) / GIB == pytest.approx(gib, rel=0.01)
    assert weight_bytes(m, "bf16") / GIB > 3 * gib  # the same weights all in BF16


def test_active_parameters_of_the_other_families() -> None:
    # Llama 4: "17B active" for both; Kimi K2: 32.6B activated (report, Table 2)
    assert active_param_count(LLAMA4_SCOUT) == pytest.approx(17e9, rel=0.03)
    assert active_param_count(LLAMA4_MAVERICK) == pytest.approx(17e9, rel=0.03)
    assert active_param_count(FAMILIES["kimi-k2"]) == pytest.approx(32.6e9, rel=0.03)


def test_deepseek_v32_is_v3_plus_the_indexer() -> None:
    v3 = load_model("deepseek-v3")
    # per layer: wq_b 1536 x 64*128, wk 7168 x 128, weights_proj 7168 x 64, k_norm 2 x 128
    indexer = 1536 * 8192 + 7168 * 128 + 7168 * 64 + 2 * 128
    assert attention_params(DEEPSEEK_V32, INDEXED_ATTENTION) - attention_params(v3) == indexer
    assert param_count(DEEPSEEK_V32) - param_count(v3) == 61 * indexer
    names = [x.name for x in attention_linears(DEEPSEEK_V32, INDEXED_ATTENTION)]
    assert names[-4:] == ["indexer_wq_b", "indexer_wk", "indexer_weights_proj", "o_proj"]


def test_qwen3_next_layers() -> None:
    full = attention_linears(QWEN3_NEXT, FULL_ATTENTION)
    assert full[0].out_features == 16 * 256 * 2  # q_proj carries the output gate
    linear = {x.name: (x.in_features, x.out_features) for x in attention_linears(
        QWEN3_NEXT, "linear_attention")}
    assert linear == {"in_proj_qkvz": (2048, 2 * 2048 + 2 * 4096), "in_proj_ba": (2048, 64),
                      "out_proj": (4096, 2048)}


# -- the hand-written specs agree with their fixtures --------------------------------------------

FIXTURE = {
    "gpt-oss-120b": "openai--gpt-oss-120b.json",
    "gpt-oss-20b": "openai--gpt-oss-20b.json",
    "kimi-k2": "moonshotai--Kimi-K2-Instruct.json",
    "deepseek-v3.2": "deepseek-ai--DeepSeek-V3.2-Exp.json",
    "glm-4.5": "zai-org--GLM-4.5.json",
    "qwen3-next-80b-a3b": "Qwen--Qwen3-Next-80B-A3B-Instruct.json",
    "gemma-3-27b": "google--gemma-3-27b-it.json",
    "llama-4-scout": "meta-llama--Llama-4-Scout-17B-16E-Instruct.json",
    "llama-4-maverick": "meta-llama--Llama-4-Maverick-17B-128E-Instruct.json",
    "deepseek-v4-pro": "deepseek-ai--DeepSeek-V4-Pro.json",
    "deepseek-v4-flash": "deepseek-ai--DeepSeek-V4-Flash.json",
}
SAME_NAME = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
             "vocab_size", "sliding_window", "attention_chunk_size", "head_dim")


def _text(name: str) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((HF_DIR / FIXTURE[name]).read_text())
    return cfg.get("text_config", cfg)


@pytest.mark.parametrize("name", sorted(FIXTURE))
def test_specs_match_their_fixtures(name: str) -> None:
    m, c = FAMILIES[name], _text(name)
    for field in SAME_NAME:
        if field in c:
            assert getattr(m, field) == c[field], field
    if m.mla is not None:
        for field in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                      "v_head_dim"):
            assert getattr(m.mla, field) == c[field], field
    if m.moe is not None:
        experts = c.get("n_routed_experts", c.get("num_local_experts", c.get("num_experts")))
        assert m.moe.n_routed_experts == experts
        assert m.moe.num_experts_per_tok == c["num_experts_per_tok"]
    if m.dsa is not None:
        assert (m.dsa.index_n_heads, m.dsa.index_head_dim, m.dsa.index_topk) == (
            c["index_n_heads"], c["index_head_dim"], c["index_topk"])
    if m.linear_attention is not None:
        la = m.linear_attention
        for field in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                      "linear_value_head_dim", "linear_conv_kernel_dim"):
            assert getattr(la, field) == c[field], field


def test_layer_patterns_match_their_fixtures() -> None:
    for m in (GPT_OSS_120B, GPT_OSS_20B):  # layer_types given in the file
        assert [m.layer_type(j) for j in range(m.num_hidden_layers)] == _text(m.name)[
            "layer_types"]
        assert _text(m.name)["quantization_config"]["quant_method"] == m.expert_weight_dtype
    for m in (LLAMA4_SCOUT, LLAMA4_MAVERICK):  # chunked on RoPE layers, full on NoPE ones
        c = _text(m.name)
        rope = c["no_rope_layers"]
        assert [m.layer_type(j) == "chunked_attention" for j in range(48)] == [
            bool(x) for x in rope]
        assert [j for j in range(48) if m.is_moe_layer(j)] == c["moe_layers"]
        assert m.moe is not None and m.moe.moe_intermediate_size == c["intermediate_size"]
        assert m.intermediate_size == c["intermediate_size_mlp"]
    c = _text(QWEN3_NEXT.name)
    every = c["full_attention_interval"]
    assert [QWEN3_NEXT.layer_type(j) == FULL_ATTENTION for j in range(48)] == [
        (j + 1) % every == 0 for j in range(48)]
    # Gemma 3's pattern (5 local : 1 global) is Gemma3TextConfig's default sliding_window_pattern
    assert [GEMMA3_27B.layer_type(j) == FULL_ATTENTION for j in range(62)] == [
        (j + 1) % 6 == 0 for j in range(62)]
    assert "index_topk" in _text(DEEPSEEK_V32.name)
    assert DEEPSEEK_V32.layer_type_counts == {INDEXED_ATTENTION: 61}
