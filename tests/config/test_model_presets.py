"""Model presets, ctxplan model YAML and Hugging Face config.json loading."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from ctxplan.config.model_presets import (
    PRESET_DIR,
    SUPPORTED_MODEL_TYPES,
    load_model,
    model_from_dict,
    model_from_hf_config,
    model_names,
    model_to_dict,
)
from ctxplan.errors import UserInputError
from ctxplan.model import ModelSpec, param_count

HF_DIR = Path(__file__).resolve().parents[1] / "data" / "hf-configs"
FIXTURE_PRESET = {
    "deepseek-ai--DeepSeek-V3.json": "deepseek-v3",
    "meta-llama--Meta-Llama-3.1-405B.json": "llama3.1-405b",
    "Qwen--Qwen3-235B-A22B.json": "qwen3-235b-a22b",
}
LLAMA_8B: dict[str, Any] = {
    "name": "my-llama",
    "weight_dtype": "bf16",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
}


def hf(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HF_DIR / name).read_text())
    return data


def one_line_error(fn: Any, *args: Any) -> str:
    with pytest.raises(UserInputError) as info:
        fn(*args)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


# ------------------------------------------------------------------------------------ presets


def test_preset_names() -> None:
    assert model_names() == [
        "deepseek-v3",
        "deepseek-v3.2",
        "deepseek-v4-flash",
        "deepseek-v4-pro",
        "gpt-oss-120b",
        "gpt-oss-20b",
        "kimi-k2",
        "llama3.1-405b",
        "llama3.1-70b",
        "llama3.1-8b",
        "qwen2.5-7b-1m",
        "qwen3-235b-a22b",
        "qwen3-next-80b-a3b",
    ]


@pytest.mark.parametrize("name", model_names())
def test_presets_load_with_name_source_and_round_trip(name: str) -> None:
    m = load_model(name)
    assert m.name == name
    assert m.source and "user model" not in m.source
    assert model_from_dict(model_to_dict(m), "round trip") == m
    # the YAML carries no key the schema would refuse, and nothing is left to defaults silently
    raw = yaml.safe_load((PRESET_DIR / f"{name}.yaml").read_text())
    assert raw["name"] == name


def test_weight_dtypes_of_presets() -> None:
    dtypes = {n: (load_model(n).weight_dtype, load_model(n).expert_weight_dtype)
              for n in model_names()}
    # FP8 with an FP32 scale per 128 x 128 block, as their config.json's quantization_config
    block = {"deepseek-v3", "deepseek-v3.2", "kimi-k2"}
    assert {dtypes[n] for n in block} == {("fp8-block128", None)}
    # gpt-oss: MXFP4 experts, the rest BF16 (quantization_config.modules_to_not_convert)
    assert dtypes["gpt-oss-120b"] == dtypes["gpt-oss-20b"] == ("bf16", "mxfp4")
    # DeepSeek-V4: FP8 blocks, the routed experts FP4 (config.json expert_dtype fp4: MXFP4)
    v4 = {"deepseek-v4-pro", "deepseek-v4-flash"}
    assert {dtypes[n] for n in v4} == {("fp8-block128", "mxfp4")}
    assert {d for n, d in dtypes.items()
            if n not in block | v4 and "gpt-oss" not in n} == {("bf16", None)}


def test_preset_lookup_is_forgiving() -> None:
    assert load_model("DeepSeek-V3") == load_model("deepseek-v3")
    assert load_model("deepseek-v3-671b") == load_model("deepseek-v3")  # the spec's name


def test_unknown_model() -> None:
    msg = one_line_error(load_model, "gpt-5")
    assert msg.startswith("model = 'gpt-5'")
    assert "deepseek-v3" in msg


# ------------------------------------------------------------------------- Hugging Face files


@pytest.mark.parametrize("fixture", sorted(FIXTURE_PRESET))
def test_hf_fixture_matches_preset(fixture: str) -> None:
    from_hf = load_model(str(HF_DIR / fixture))
    preset = load_model(FIXTURE_PRESET[fixture])
    assert param_count(from_hf) == param_count(preset)
    assert from_hf.name == fixture.removesuffix(".json")
    assert str(HF_DIR / fixture) in from_hf.source
    same = dataclasses.replace(from_hf, name=preset.name, source=preset.source)
    assert same == preset


def test_hf_deepseek_reads_fp8_and_notes_mtp() -> None:
    m = model_from_hf_config(hf("deepseek-ai--DeepSeek-V3.json"), "ds.json")
    # quantization_config (FP8, 128 x 128 block scales) wins over torch_dtype bfloat16
    assert m.weight_dtype == "fp8-block128"
    assert "MTP" in m.source


def test_hf_config_in_a_directory(tmp_path: Path) -> None:
    d = tmp_path / "Llama-3.1-405B"
    d.mkdir()
    (d / "config.json").write_text((HF_DIR / "meta-llama--Meta-Llama-3.1-405B.json").read_text())
    m = load_model(str(d))
    assert m.name == "Llama-3.1-405B"
    assert load_model(str(d / "config.json")) == m


def test_hf_overrides_and_inline_paste() -> None:
    d = hf("meta-llama--Meta-Llama-3.1-405B.json") | {"name": "l405-fp8", "weight_dtype": "fp8"}
    m = model_from_dict(d, "study.yaml: model")  # a pasted config.json inside a study file
    assert (m.name, m.weight_dtype) == ("l405-fp8", "fp8")


def test_hf_model_type_from_architectures() -> None:
    d = hf("meta-llama--Meta-Llama-3.1-405B.json")
    del d["model_type"]
    assert model_from_hf_config(d, "x.json").attention_kind == "gqa"


@pytest.mark.parametrize("model_type", ["gpt2", "phi3", None])
def test_unsupported_model_type(model_type: str | None) -> None:
    d = hf("meta-llama--Meta-Llama-3.1-405B.json") | {
        "model_type": model_type,
        "architectures": ["Whatever"],
    }
    msg = one_line_error(model_from_hf_config, d, "cfg.json")
    assert msg.startswith("cfg.json: model_type = ")
    assert "unsupported model_type" in msg
    assert ", ".join(SUPPORTED_MODEL_TYPES) in msg


def test_qwen2_dense_and_tied() -> None:
    # Qwen2.5-7B-Instruct-1M's config.json (the fields that matter, plus some that don't)
    d = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_attention_heads": 28,
        "num_hidden_layers": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "max_position_embeddings": 1010000,
        "rope_theta": 10000000.0,
        "sliding_window": 32768,
        "dual_chunk_attention_config": {"chunk_size": 262144, "local_size": 8192},
        "sparse_attention_config": {"sparse_attention_enabled": True},
    }
    m = model_from_hf_config(d, "qwen.json")
    preset = load_model("qwen2.5-7b-1m")
    assert dataclasses.replace(m, name=preset.name, source=preset.source) == preset
    tied = model_from_hf_config(d | {"tie_word_embeddings": True}, "q.json")
    assert param_count(m) - param_count(tied) == 152064 * 3584


def test_qwen2_moe_shared_expert_and_sparse_step() -> None:
    # Qwen1.5-MoE-A2.7B style: shared_expert_intermediate_size = 4 experts
    d = {
        "model_type": "qwen2_moe",
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "num_hidden_layers": 24,
        "vocab_size": 151936,
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "torch_dtype": "bfloat16",
    }
    m = model_from_hf_config(d, "q.json")
    assert m.moe is not None
    assert (m.moe.n_shared_experts, m.n_moe_layers, m.attention_kind) == (4, 24, "mha")
    assert param_count(m) == pytest.approx(14.3e9, rel=0.01)  # Qwen1.5-MoE-A2.7B: 14.3B total
    # every second layer sparse: layers 1, 3, 5, ...
    m2 = model_from_hf_config(d | {"decoder_sparse_step": 2}, "q.json")
    assert [i for i in range(24) if m2.is_moe_layer(i)] == list(range(1, 24, 2))
    # leading dense layers via mlp_only_layers
    m3 = model_from_hf_config(d | {"mlp_only_layers": [0, 1]}, "q.json")
    assert m3.moe is not None and m3.moe.first_k_dense_replace == 2
    msg = one_line_error(model_from_hf_config, d | {"mlp_only_layers": [5]}, "q.json")
    assert msg.startswith("q.json: mlp_only_layers = ")
    msg = one_line_error(
        model_from_hf_config, d | {"shared_expert_intermediate_size": 1000}, "q.json"
    )
    assert "shared_expert_intermediate_size" in msg


def test_deepseek_v2_lite_and_hf_moe_layer_freq() -> None:
    d = {
        "model_type": "deepseek_v2",
        "hidden_size": 2048,
        "intermediate_size": 10944,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "num_hidden_layers": 27,
        "vocab_size": 102400,
        "q_lora_rank": None,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "n_routed_experts": 64,
        "n_shared_experts": 2,
        "num_experts_per_tok": 6,
        "moe_intermediate_size": 1408,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "torch_dtype": "bfloat16",
    }
    m = model_from_hf_config(d, "lite.json")
    assert m.mla is not None and m.mla.q_lora_rank is None
    assert param_count(m) == pytest.approx(15.7e9, rel=0.01)  # DeepSeek-V2-Lite: 15.7B
    # config.json's rule: MoE when i >= first_k and i % freq == 0 -> 4, 6, 8, ...
    m2 = model_from_hf_config(d | {"first_k_dense_replace": 3, "moe_layer_freq": 2}, "x.json")
    assert [i for i in range(27) if m2.is_moe_layer(i)] == list(range(4, 27, 2))
    assert model_from_dict(model_to_dict(m2), "rt") == m2


def test_mixtral() -> None:
    d = {
        "model_type": "mixtral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 32,
        "vocab_size": 32000,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "torch_dtype": "bfloat16",
    }
    m = model_from_hf_config(d, "mixtral.json")
    assert param_count(m) == pytest.approx(46.7e9, rel=0.01)  # Mixtral 8x7B: 46.7B


@pytest.mark.parametrize(
    ("quant", "dtype"),
    [
        ({"quant_method": "fp8", "fmt": "e4m3"}, "fp8"),
        ({"quant_method": "fbgemm_fp8"}, "fp8"),
        ({"quant_method": "awq", "bits": 4}, "int4"),
        ({"quant_method": "gptq", "bits": 8}, "int8"),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "int4"),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}}},
            },
            "fp8",
        ),
    ],
)
def test_quantization_config(quant: dict[str, Any], dtype: str) -> None:
    d = hf("meta-llama--Meta-Llama-3.1-405B.json") | {"quantization_config": quant}
    assert model_from_hf_config(d, "q.json").weight_dtype == dtype


def test_unknown_quantization_names_the_field() -> None:
    d = hf("meta-llama--Meta-Llama-3.1-405B.json") | {"quantization_config": {"quant_method": "x"}}
    msg = one_line_error(model_from_hf_config, d, "q.json")
    assert msg.startswith("q.json: quantization_config.quant_method = 'x'")
    d["weight_dtype"] = "fp8"  # the fix the message gives
    assert model_from_hf_config(d, "q.json").weight_dtype == "fp8"


def test_hf_dtype_fallbacks() -> None:
    d = hf("meta-llama--Meta-Llama-3.1-405B.json")
    del d["torch_dtype"]
    assert model_from_hf_config(d | {"dtype": "float16"}, "a.json").weight_dtype == "fp16"
    m = model_from_hf_config(d, "a.json")
    assert m.weight_dtype == "bf16" and "assumed" in m.source


def test_hf_missing_field() -> None:
    d = hf("deepseek-ai--DeepSeek-V3.json")
    del d["kv_lora_rank"]
    msg = one_line_error(model_from_hf_config, d, "ds.json")
    assert msg.startswith("ds.json: kv_lora_rank = None: required field missing")
    d = hf("meta-llama--Meta-Llama-3.1-405B.json")
    del d["num_hidden_layers"]
    assert "num_hidden_layers" in one_line_error(model_from_hf_config, d, "l.json")


# ------------------------------------------------------------------------------- our YAML


def test_user_yaml_file(tmp_path: Path) -> None:
    p = tmp_path / "mine.yaml"
    p.write_text(yaml.safe_dump(LLAMA_8B))
    m = load_model(str(p))
    assert m.head_dim == 128 and m.num_key_value_heads == 8
    assert str(p) in m.source
    preset = load_model("llama3.1-8b")
    trained = {f: getattr(preset, f) for f in (
        "max_position_embeddings", "rope_scaling_factor", "original_max_position_embeddings")}
    assert dataclasses.replace(m, name=preset.name, source=preset.source, **trained) == preset


@pytest.mark.parametrize(
    ("patch", "field", "problem"),
    [
        ({"num_layers": 32}, "num_layers", "unknown key"),
        ({"num_hidden_layers": 0}, "num_hidden_layers", "invalid value"),
        ({"num_hidden_layers": "32"}, "num_hidden_layers", "invalid value"),
        ({"num_hidden_layers": 32.5}, "num_hidden_layers", "invalid value"),
        ({"hidden_size": -1}, "hidden_size", "invalid value"),
        ({"weight_dtype": "fp6"}, "weight_dtype", "invalid value"),
        ({"tie_word_embeddings": "maybe"}, "tie_word_embeddings", "invalid value"),
        ({"num_key_value_heads": 5}, "num_key_value_heads", "not a multiple"),
        ({"hidden_size": 4097, "head_dim": None}, "head_dim", "required field missing"),
        ({"kv_lora_rank": 512}, "qk_nope_head_dim", "required fields missing"),
        ({"n_routed_experts": 8}, "num_experts_per_tok", "required fields missing"),
        (
            {"n_routed_experts": 8, "num_experts_per_tok": 9, "moe_intermediate_size": 1024},
            "num_experts_per_tok",
            "more experts per token",
        ),
        (
            {
                "n_routed_experts": 8,
                "num_experts_per_tok": 2,
                "moe_intermediate_size": 1024,
                "first_k_dense_replace": 32,
            },
            "first_k_dense_replace",
            "no layer would be MoE",
        ),
        ({"n_shared_experts": 1}, "n_routed_experts", "required fields missing"),
    ],
)
def test_malformed_yaml_one_line_error(patch: dict[str, Any], field: str, problem: str) -> None:
    d = {k: v for k, v in (LLAMA_8B | patch).items() if v is not None}
    msg = one_line_error(model_from_dict, d, "mine.yaml")
    # the field named first (several missing are named together)
    assert msg.startswith((f"mine.yaml: {field} = ", f"mine.yaml: {field}, ")), msg
    assert problem in msg, msg


def test_missing_required_field() -> None:
    d = dict(LLAMA_8B)
    del d["weight_dtype"]
    msg = one_line_error(model_from_dict, d, "mine.yaml")
    assert msg.startswith("mine.yaml: weight_dtype = None: required field missing")


def test_bad_files(tmp_path: Path) -> None:
    p = tmp_path / "broken.yaml"
    p.write_text("num_hidden_layers: [\n")
    assert "cannot parse" in one_line_error(load_model, str(p))
    p.write_text("- a\n- b\n")
    assert "not a mapping" in one_line_error(load_model, str(p))


@given(
    layers=st.integers(1, 200),
    kv=st.integers(1, 16),
    group=st.integers(1, 16),
    head_dim=st.sampled_from([64, 128]),
    first_k=st.integers(0, 10),
    freq=st.integers(1, 4),
    tie=st.booleans(),
)
def test_yaml_round_trip(
    layers: int, kv: int, group: int, head_dim: int, first_k: int, freq: int, tie: bool
) -> None:
    d: dict[str, Any] = LLAMA_8B | {
        "num_hidden_layers": layers,
        "num_key_value_heads": kv,
        "num_attention_heads": kv * group,
        "hidden_size": kv * group * head_dim,
        "tie_word_embeddings": tie,
    }
    if first_k < layers and any(i >= first_k and i % freq == 0 for i in range(layers)):
        d |= {
            "n_routed_experts": 16,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 512,
            "first_k_dense_replace": first_k,
            "moe_layer_freq": freq,
        }
    m: ModelSpec = model_from_dict(d, "rt")
    assert model_from_dict(model_to_dict(m), "rt") == m
    if m.moe is not None:
        hf_rule = [i for i in range(layers) if i >= first_k and i % freq == 0]
        assert [i for i in range(layers) if m.is_moe_layer(i)] == hf_rule


# ------------------------------------------------------------- attention kinds and new dtypes

NEW_PRESETS = ("gpt-oss-120b", "gpt-oss-20b", "kimi-k2", "qwen3-next-80b-a3b", "deepseek-v3.2",
               "deepseek-v4-pro", "deepseek-v4-flash")


@pytest.mark.parametrize("name", NEW_PRESETS)
def test_new_presets_are_their_families(name: str) -> None:
    from tests.model.family_specs import FAMILIES

    m = load_model(name)
    assert dataclasses.replace(m, source=FAMILIES[name].source) == FAMILIES[name]


def test_schema_lists_agree_with_the_model_layer() -> None:
    from typing import get_args

    from ctxplan.config.model_schema import LayerType, WeightDtype
    from ctxplan.config.options import DTYPE_NAMES
    from ctxplan.model import WEIGHT_DTYPES
    from ctxplan.model.spec import LAYER_TYPES

    assert set(get_args(LayerType)) == set(LAYER_TYPES)
    assert set(get_args(WeightDtype)) == set(DTYPE_NAMES) == set(WEIGHT_DTYPES)


def test_layer_pattern_repeats_and_is_cut_at_the_layer_count() -> None:
    d = LLAMA_8B | {"num_hidden_layers": 7, "sliding_window": 512,
                    "layer_pattern": ["sliding_attention", "sliding_attention", "full_attention"]}
    m = model_from_dict(d, "mine.yaml")
    assert [m.layer_type(j)[0] for j in range(7)] == list("ssfssfs")
    assert model_to_dict(m)["layer_pattern"] == d["layer_pattern"]
    listed = model_from_dict(LLAMA_8B | {"num_hidden_layers": 7, "sliding_window": 512,
                                         "layer_types": [m.layer_type(j) for j in range(7)]}, "y")
    assert dataclasses.replace(listed, source=m.source) == m


KIND = LLAMA_8B | {"num_hidden_layers": 4}


@pytest.mark.parametrize(
    ("patch", "field", "problem"),
    [
        ({"layer_types": ["full_attention"] * 3}, "layer_types", "wrong number of layers"),
        ({"layer_types": ["banded"] * 4}, "layer_types.0", "invalid value"),
        ({"layer_types": ["full_attention"] * 4, "layer_pattern": ["full_attention"]},
         "layer_pattern", "two layer lists"),
        ({"layer_pattern": []}, "layer_pattern", "empty pattern"),
        ({"layer_pattern": ["sliding_attention"]}, "sliding_window", "required field missing"),
        ({"sliding_window": 128}, "sliding_window", "no layer is sliding_attention"),
        ({"attention_chunk_size": 8192}, "attention_chunk_size", "no layer is chunked"),
        ({"layer_pattern": ["linear_attention"], "linear_num_key_heads": 16},
         "linear_num_value_heads", "required fields missing"),
        ({"index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048}, "index_n_heads",
         "no layer is indexed_attention"),
        ({"layer_pattern": ["indexed_attention"], "index_n_heads": 64, "index_head_dim": 128,
          "index_topk": 2048}, "layer_pattern", "indexed_attention without MLA"),
        ({"expert_weight_dtype": "mxfp4"}, "expert_weight_dtype", "a dense model has no experts"),
        ({"linear_state_dtype": "int4"}, "linear_state_dtype", "invalid value"),
    ],
)
def test_malformed_kinds_one_line_error(patch: dict[str, Any], field: str, problem: str) -> None:
    msg = one_line_error(model_from_dict, KIND | patch, "mine.yaml")
    # the field named first (several missing are named together)
    assert msg.startswith((f"mine.yaml: {field} = ", f"mine.yaml: {field}, ")), msg
    assert problem in msg, msg


@given(st.data())
def test_yaml_round_trip_of_hybrid_models(data: st.DataObject) -> None:
    from ctxplan.model.spec import (
        CHUNKED_ATTENTION,
        INDEXED_ATTENTION,
        LINEAR_ATTENTION,
        SLIDING_ATTENTION,
    )
    from tests.model.model_strategies import hybrid_model_specs

    m = data.draw(hybrid_model_specs())
    present = set(m.layer_types)
    moe = m.moe
    if moe is not None and moe.first_k_dense_replace % moe.moe_layer_freq:
        moe = dataclasses.replace(moe, first_k_dense_replace=0)  # a pattern config.json can say
    m = dataclasses.replace(  # our YAML refuses a kind's parameters when no layer has the kind
        m, moe=moe,
        sliding_window=m.sliding_window if SLIDING_ATTENTION in present else None,
        attention_chunk_size=m.attention_chunk_size if CHUNKED_ATTENTION in present else None,
        linear_attention=m.linear_attention if LINEAR_ATTENTION in present else None,
        dsa=m.dsa if INDEXED_ATTENTION in present else None,
        expert_weight_dtype=data.draw(st.sampled_from([None, "mxfp4", "fp8-block128"]))
        if moe is not None else None)
    back = model_from_dict(model_to_dict(m), "rt")
    # (a single MoE layer may come back with another, equivalent period)
    n = m.num_hidden_layers
    assert [back.is_moe_layer(j) for j in range(n)] == [m.is_moe_layer(j) for j in range(n)]
    assert dataclasses.replace(back, moe=m.moe) == m
