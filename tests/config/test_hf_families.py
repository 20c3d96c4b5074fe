"""The families of issue 16 / 15 from their config.json: each fixture gives its hand-written
ModelSpec (tests/model/family_specs.py), and each family's layer rule, defaults and dtypes."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from ctxplan.config.hf_config import model_from_hf_config
from ctxplan.config.model_presets import load_model
from ctxplan.errors import UserInputError
from ctxplan.model import FULL_ATTENTION, SLIDING_ATTENTION, param_count
from tests.model.family_specs import FAMILIES
from tests.model.test_model_families import FIXTURE, HF_DIR, PUBLISHED_TOTAL


def hf(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HF_DIR / FIXTURE[name]).read_text())
    return data


def error(d: dict[str, Any]) -> str:
    with pytest.raises(UserInputError) as info:
        model_from_hf_config(d, "c.json")
    msg = str(info.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("name", sorted(FIXTURE))
def test_each_fixture_loads_to_its_expected_spec(name: str) -> None:
    path = HF_DIR / FIXTURE[name]
    m = load_model(str(path))
    expected = FAMILIES[name]
    assert m.name == path.stem and str(path) in m.source
    assert dataclasses.replace(m, name=expected.name, source=expected.source) == expected
    total, _ = PUBLISHED_TOTAL[name]
    assert param_count(m) == pytest.approx(total, rel=0.03)


def test_layer_rules_without_layer_types_give_the_same_layers() -> None:
    # gpt-oss: the configuration class's rule (sliding on even layers) = the list in the file
    d = hf("gpt-oss-120b")
    del d["layer_types"]
    assert model_from_hf_config(d, "c.json").layer_types == FAMILIES["gpt-oss-120b"].layer_types
    # Llama 4: no_rope_layers left to the default (every 4th layer NoPE, hence full)
    d = hf("llama-4-scout")
    del d["text_config"]["no_rope_layers"]
    assert model_from_hf_config(d, "c.json").layer_types == FAMILIES["llama-4-scout"].layer_types
    # Qwen3-Next: a layer_types list given in the file wins over full_attention_interval
    d = hf("qwen3-next-80b-a3b")
    d["layer_types"] = ["linear_attention"] * 47 + ["full_attention"]
    assert model_from_hf_config(d, "c.json").n_layers_of_type(FULL_ATTENTION) == 1


def test_defaults_of_the_configuration_class_are_said_in_the_source() -> None:
    d = hf("deepseek-v3.2")
    del d["index_topk"]  # may be absent: DeepseekV32Config's default
    m = model_from_hf_config(d, "c.json")
    assert m.dsa == FAMILIES["deepseek-v3.2"].dsa
    assert "index_topk 2048 from the configuration class's defaults" in m.source
    assert "vocab_size 262208" in load_model(str(HF_DIR / FIXTURE["gemma-3-27b"])).source


def test_text_config_and_overrides_at_the_top_level() -> None:
    d = hf("llama-4-maverick") | {"name": "mav", "weight_dtype": "fp8"}
    m = model_from_hf_config(d, "c.json")
    assert (m.name, m.weight_dtype, m.intermediate_size) == ("mav", "fp8", 16384)
    assert m.moe is not None and m.moe.moe_intermediate_size == 8192  # experts: intermediate_size
    d["text_config"] = "nope"
    assert error(d).startswith("c.json: text_config = 'str': not a mapping")


def test_dtypes_from_quantization_config() -> None:
    gpt = model_from_hf_config(hf("gpt-oss-20b"), "c.json")
    assert (gpt.weight_dtype, gpt.expert_weight_dtype) == ("bf16", "mxfp4")
    assert "routed experts mxfp4" in gpt.source
    kimi = model_from_hf_config(hf("kimi-k2"), "c.json")
    assert (kimi.weight_dtype, kimi.expert_weight_dtype) == ("fp8-block128", None)
    d = hf("kimi-k2")
    d["quantization_config"]["weight_block_size"] = [1, 128]  # other blocks: scales not counted
    assert model_from_hf_config(d, "c.json").weight_dtype == "fp8"
    # MXFP4 is read as the experts' format: a dense model has none
    d = hf("gemma-3-27b") | {"quantization_config": {"quant_method": "mxfp4"}}
    assert "mxfp4 without MoE experts" in error(d)


def test_kimi_k2_is_deepseek_v3_with_its_own_sizes() -> None:
    kimi = load_model(str(HF_DIR / FIXTURE["kimi-k2"]))
    v3 = load_model("deepseek-v3")
    assert kimi.mla == v3.mla and kimi.layer_types == v3.layer_types == ()
    assert kimi.moe is not None and kimi.moe.n_routed_experts == 384


def test_sliding_windows_of_the_older_families() -> None:
    base = {"num_hidden_layers": 8, "hidden_size": 512, "num_attention_heads": 8,
            "num_key_value_heads": 2, "intermediate_size": 1024, "vocab_size": 1000}
    # Mistral 7B v0.1: a 4096-token window in every layer; later Mistrals set it to null
    m = model_from_hf_config(base | {"model_type": "mistral", "sliding_window": 4096}, "m.json")
    assert m.layer_type_counts == {SLIDING_ATTENTION: 8} and m.sliding_window == 4096
    m = model_from_hf_config(base | {"model_type": "mistral", "sliding_window": None}, "m.json")
    assert m.layer_types == () and m.sliding_window is None
    # Qwen2 / Qwen3: only with use_sliding_window, and from max_window_layers on
    qwen = base | {"model_type": "qwen2", "sliding_window": 4096, "max_window_layers": 6}
    assert model_from_hf_config(qwen, "q.json").layer_types == ()
    m = model_from_hf_config(qwen | {"use_sliding_window": True}, "q.json")
    assert [m.layer_type(j) for j in range(8)] == [FULL_ATTENTION] * 6 + [SLIDING_ATTENTION] * 2


@pytest.mark.parametrize(
    ("name", "patch", "field", "problem"),
    [
        ("gpt-oss-20b", {"layer_types": ["full_attention"] * 3}, "layer_types",
         "wrong number of layers"),
        ("gpt-oss-20b", {"layer_types": ["banded_attention"] * 24}, "layer_types",
         "unknown attention kind"),
        ("gpt-oss-20b", {"sliding_window": None}, "sliding_window", "required field missing"),
        ("qwen3-next-80b-a3b", {"linear_num_value_heads": 24}, "linear_num_value_heads",
         "value heads do not share key heads"),
        ("llama-4-scout", {"no_rope_layers": [1, 0]}, "no_rope_layers", "wrong number of layers"),
    ],
)
def test_family_errors_name_the_field(name: str, patch: dict[str, Any], field: str,
                                      problem: str) -> None:
    d = hf(name)
    (d.get("text_config") or d).update(patch)
    msg = error(d)
    # the field named first (several missing are named together)
    assert msg.startswith((f"c.json: {field} = ", f"c.json: {field}, ")), msg
    assert problem in msg, msg
