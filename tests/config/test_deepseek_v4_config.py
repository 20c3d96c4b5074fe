"""DeepSeek-V4's config.json and model YAML: what the loaders read, and what they refuse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxplan.config.hf_config import model_from_hf_config
from ctxplan.config.model_presets import load_model
from ctxplan.config.model_yaml import model_from_dict, model_to_dict
from ctxplan.errors import UserInputError
from ctxplan.model import COMPRESSED_SPARSE_ATTENTION, HEAVILY_COMPRESSED_ATTENTION

HF = Path(__file__).resolve().parents[1] / "data" / "hf-configs"


def _pro() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HF / "deepseek-ai--DeepSeek-V4-Pro.json").read_text())
    return data


def _error(d: dict[str, Any], loader: Any = model_from_hf_config) -> str:
    with pytest.raises(UserInputError) as info:
        loader(d, "c.json")
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_both_fixtures_load_as_they_are() -> None:
    for name, layers in (("Pro", 61), ("Flash", 43)):
        m = load_model(str(HF / f"deepseek-ai--DeepSeek-V4-{name}.json"))
        assert m.num_hidden_layers == layers and m.compressed_attention is not None
        assert m.expert_weight_dtype == "mxfp4" and m.weight_dtype == "fp8-block128"
        assert "MTP layer(s) not modelled" not in m.source   # V4's MTP layer is modelled
        assert "expert_dtype fp4" in m.source


def test_the_smaller_nonzero_ratio_is_csa() -> None:
    d = _pro()
    d["compress_ratios"] = [16 if r == 4 else r for r in d["compress_ratios"]]
    m = model_from_hf_config(d, "c.json")
    assert m.compressed_attention is not None
    assert m.compressed_attention.csa_compress_ratio == 16
    assert m.layer_type_counts[COMPRESSED_SPARSE_ATTENTION] == 30
    # one nonzero ratio and no indexer: HCA
    d = {k: v for k, v in _pro().items() if not k.startswith("index_")}
    d["compress_ratios"] = [128 if r else 0 for r in d["compress_ratios"]]
    assert set(model_from_hf_config(d, "c.json").layer_type_counts) == {
        HEAVILY_COMPRESSED_ATTENTION}


@pytest.mark.parametrize(("patch", "field", "problem"), [
    ({"compress_ratios": [4] * 10}, "compress_ratios", "wrong number of layers"),
    ({"compress_ratios": [4, 8, 16] * 20 + [0, 0]}, "compress_ratios", "more than two"),
    ({"o_groups": None}, "o_groups", "required field missing"),
    ({"index_topk": None}, "index_topk", "required field missing"),
    ({"expert_dtype": "fp6"}, "expert_dtype", "not understood"),
    ({"num_key_value_heads": 8}, "num_key_value_heads", "several KV heads"),
    ({"num_hash_layers": 99}, "num_hash_layers", "MoE layers"),
    ({"rope_scaling": {"factor": "big"}}, "rope_scaling.factor", "invalid value"),
])
def test_config_errors_name_the_field(patch: dict[str, Any], field: str, problem: str) -> None:
    d = {**_pro(), **patch}
    d = {k: v for k, v in d.items() if v is not None}
    msg = _error(d)
    assert field in msg and problem in msg, msg


def test_yaml_refuses_v4_fields_without_compress_ratios() -> None:
    base = {k: v for k, v in model_to_dict(load_model("llama3.1-8b")).items()}
    for key, value in (("hc_mult", 4), ("o_groups", 8), ("num_nextn_predict_layers", 1)):
        msg = _error({**base, key: value}, model_from_dict)
        assert key in msg
    pro = model_to_dict(load_model("deepseek-v4-pro"))
    assert "two layer lists" in _error({**pro, "layer_pattern": ["full_attention"]},
                                       model_from_dict)
    assert "kv_lora_rank" in _error({**pro, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                                     "v_head_dim": 128}, model_from_dict)
