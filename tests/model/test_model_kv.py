"""KV tiers: named sizes against reference/models.md, custom numbers, bad input."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxplan.config.model_presets import load_model
from ctxplan.errors import UserInputError
from ctxplan.model import ModelSpec, default_kv_tiers, kv_bytes_per_token, kv_tiers, resolve_kv_tier
from tests.model.model_strategies import model_specs


def test_deepseek_v3_tiers() -> None:
    m = load_model("deepseek-v3")
    assert kv_tiers(m) == {"mla-bf16": 1152, "mla-fp8": 576, "mla-fp8-flashmla": 656}
    assert default_kv_tiers(m) == ["mla-bf16", "mla-fp8"]
    assert kv_bytes_per_token(m, 1152) == 70_272  # reference/models.md
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
    assert kv_tiers(m) == {"kv-bf16": per_layer, "kv-fp8": per_layer // 2}
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
