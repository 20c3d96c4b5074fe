"""KV tiers: named sizes against the published layouts (DeepSeek-V3's MLA latent, FlashMLA's
FP8 cache), custom numbers, bad input."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxplan.config.model_presets import load_model
from ctxplan.errors import UserInputError
from ctxplan.model import (
    ModelSpec,
    default_kv_tiers,
    kv_bytes_per_sequence,
    kv_bytes_per_token,
    kv_tiers,
    layer_kv_bytes,
    resolve_kv_tier,
)
from tests.model.family_specs import DEEPSEEK_V32, GPT_OSS_20B, LLAMA4_SCOUT, QWEN3_NEXT
from tests.model.model_strategies import hybrid_model_specs, model_specs


def test_deepseek_v3_tiers() -> None:
    m = load_model("deepseek-v3")
    assert kv_tiers(m) == {"mla-bf16": 1152, "mla-fp8": 576, "mla-fp8-flashmla": 656}
    assert default_kv_tiers(m) == ["mla-bf16", "mla-fp8"]
    assert kv_bytes_per_token(m, 1152) == 70_272  # (512 + 64) values x 2 B x 61 layers
    assert kv_bytes_per_token(m, 576) == 35_136
    # 73.7 GB at 1M tokens in BF16
    assert kv_bytes_per_token(m, 1152) * 2**20 == pytest.approx(73.7e9, rel=0.001)


@pytest.mark.parametrize(
    ("name", "per_layer", "per_token"),
    [
        ("llama3.1-405b", 4096, 516_096),
        ("llama3.1-70b", 4096, 327_680),
        ("llama3.1-8b", 4096, 131_072),
        ("qwen2.5-7b-1m", 2048, 57_344),
    ],
)
def test_gqa_tiers(name: str, per_layer: int, per_token: int) -> None:
    m = load_model(name)
    # NVFP4: half a byte a value and one FP8 scale per 16 values
    assert kv_tiers(m) == {"kv-bf16": per_layer, "kv-fp8": per_layer // 2,
                           "kv-nvfp4": per_layer // 4 + per_layer // 32}
    assert kv_bytes_per_token(m, kv_tiers(m)["kv-bf16"]) == per_token
    assert default_kv_tiers(m) == ["kv-bf16", "kv-fp8"]


@pytest.mark.parametrize("given_tier", [700, 700.0, "700", " 700 ", "custom-700", "7e2"])
def test_custom_tier(given_tier: str | int | float) -> None:
    assert resolve_kv_tier(load_model("deepseek-v3"), given_tier) == ("custom-700", 700)


def test_named_tier_is_case_insensitive() -> None:
    # the spec's worked example writes the tiers as MLA-BF16 / MLA-FP8
    m = load_model("deepseek-v3")
    assert resolve_kv_tier(m, "MLA-BF16") == ("mla-bf16", 1152)
    assert resolve_kv_tier(m, "mla-fp8-flashmla") == ("mla-fp8-flashmla", 656)


@pytest.mark.parametrize(
    ("tier", "problem"),
    [
        ("kv-bf16", "unknown KV tier"),  # a GQA tier on an MLA model
        ("mla-fp4", "unknown KV tier"),
        ("", "unknown KV tier"),
        (0, "finite number > 0"),
        (-5, "finite number > 0"),
        ("-5", "finite number > 0"),
        (math.inf, "finite number > 0"),
        ("nan", "finite number > 0"),
        (700.5, "whole number"),
        (True, "not a tier"),
    ],
)
def test_bad_tier_names_field_value_and_choices(tier: object, problem: str) -> None:
    m = load_model("deepseek-v3")
    with pytest.raises(UserInputError) as info:
        resolve_kv_tier(m, tier)  # type: ignore[arg-type]
    msg = str(info.value)
    assert info.value.field == "kv_tier"
    assert msg.startswith("kv_tier = ")
    assert problem in msg
    assert "mla-bf16, mla-fp8, mla-fp8-flashmla" in msg
    assert "\n" not in msg


@given(model_specs())
def test_tiers_are_positive_and_fp8_halves_bf16(m: ModelSpec) -> None:
    tiers = kv_tiers(m)
    assert all(v > 0 for v in tiers.values())
    bf16, fp8 = default_kv_tiers(m)
    assert tiers[bf16] == 2 * tiers[fp8]
    for name, size in tiers.items():
        assert resolve_kv_tier(m, name) == (name, size)


@given(model_specs(), st.integers(1, 10**9))
def test_any_positive_integer_is_a_tier(m: ModelSpec, n: int) -> None:
    assert resolve_kv_tier(m, n) == (f"custom-{n}", n)
    assert resolve_kv_tier(m, str(n)) == (f"custom-{n}", n)


def test_gpt_oss_20b_kv_at_128k() -> None:
    # issue 16's target: 12 full layers keep S tokens, 12 window layers the last 128
    S = 128 * 1024
    c_kv = 2 * 8 * 64 * 2  # K and V, 8 KV heads of 64, BF16
    assert kv_tiers(GPT_OSS_20B)["kv-bf16"] == c_kv
    assert kv_bytes_per_sequence(GPT_OSS_20B, S, c_kv) == (12 * S + 12 * 128) * 2 * 8 * 64 * 2
    assert kv_bytes_per_token(GPT_OSS_20B, c_kv) == 12 * c_kv  # what each further token adds


def test_hybrid_sequences() -> None:
    S = 2**20
    # Qwen3-Next: 12 full GQA layers (2 KV heads of 256) and 36 DeltaNet states
    c = kv_tiers(QWEN3_NEXT)["kv-bf16"]
    assert c == 2 * 2 * 256 * 2
    assert kv_bytes_per_sequence(QWEN3_NEXT, S, c) == 12 * S * c + 36 * 1_097_728
    # the tier halves the KV of the full layers, not the states
    fp8 = kv_tiers(QWEN3_NEXT)["kv-fp8"]
    assert kv_bytes_per_sequence(QWEN3_NEXT, S, fp8) == 12 * S * fp8 + 36 * 1_097_728
    # Llama 4 Scout: 12 global layers, 36 chunked ones holding at most one 8K chunk
    c = kv_tiers(LLAMA4_SCOUT)["kv-bf16"]
    assert kv_bytes_per_sequence(LLAMA4_SCOUT, S, c) == (12 * S + 36 * 8192) * c
    # DSA: the indexer key is part of every token's KV
    c = kv_tiers(DEEPSEEK_V32)["mla-bf16"]
    assert kv_bytes_per_sequence(DEEPSEEK_V32, S, c) == 61 * S * (1152 + 132)


def test_dsa_custom_tier_includes_the_indexer() -> None:
    assert resolve_kv_tier(DEEPSEEK_V32, 800) == ("custom-800", 800)
    assert resolve_kv_tier(DEEPSEEK_V32, "MLA-FP8") == ("mla-fp8", 708)
    with pytest.raises(UserInputError) as info:
        resolve_kv_tier(DEEPSEEK_V32, 132)
    assert "indexer's 132 B key" in str(info.value)
    assert info.value.field == "kv_tier"


@given(model_specs(), st.integers(0, 2**21), st.integers(1, 10**5))
def test_full_attention_models_keep_every_token_in_every_layer(
    m: ModelSpec, S: int, c_kv: int
) -> None:
    assert kv_bytes_per_sequence(m, S, c_kv) == S * kv_bytes_per_token(m, c_kv)
    assert kv_bytes_per_token(m, c_kv) == c_kv * m.num_hidden_layers


@given(hybrid_model_specs(), st.integers(0, 2**21), st.integers(1, 10**5))
def test_sequence_kv_is_the_sum_over_layers(m: ModelSpec, S: int, extra: int) -> None:
    c_kv = resolve_kv_tier(m, default_kv_tiers(m)[0])[1] + extra
    per_layer = sum(layer_kv_bytes(m, m.layer_type(j), S, c_kv)
                    for j in range(m.num_hidden_layers))
    assert kv_bytes_per_sequence(m, S, c_kv) == per_layer
