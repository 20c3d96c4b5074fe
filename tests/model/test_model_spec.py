"""ModelSpec properties: attention kind, MoE layer pattern, layer kinds and signatures,
invariants."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest
from hypothesis import given

from ctxplan.config.model_presets import load_model
from ctxplan.model import (
    CHUNKED_ATTENTION,
    FULL_ATTENTION,
    INDEXED_ATTENTION,
    LINEAR_ATTENTION,
    SLIDING_ATTENTION,
    LayerSignature,
    ModelSpec,
    MoESpec,
)
from tests.model.family_specs import DEEPSEEK_V32, GPT_OSS_20B, LLAMA4_MAVERICK, QWEN3_NEXT
from tests.model.model_strategies import hybrid_model_specs, model_specs


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


def test_existing_models_are_all_full_attention() -> None:
    m = load_model("deepseek-v3")
    assert m.layer_types == ()
    assert {m.layer_type(j) for j in range(61)} == {FULL_ATTENTION}
    assert m.layer_type_counts == {FULL_ATTENTION: 61}
    assert m.layer_groups == {
        LayerSignature(FULL_ATTENTION, "dense"): (0, 1, 2),
        LayerSignature(FULL_ATTENTION, "moe"): tuple(range(3, 61)),
    }
    with pytest.raises(ValueError):
        m.layer_type(61)


def test_an_all_full_list_is_the_default_spelling() -> None:
    m = load_model("llama3.1-8b")
    explicit = dataclasses.replace(m, layer_types=[FULL_ATTENTION] * 32)  # type: ignore[arg-type]
    assert explicit == m and hash(explicit) == hash(m)
    assert explicit.layer_types == ()


def test_layer_signatures_of_hybrid_families() -> None:
    assert GPT_OSS_20B.layer_signature(0) == (SLIDING_ATTENTION, "moe")
    assert GPT_OSS_20B.layer_signature(1) == (FULL_ATTENTION, "moe")
    assert GPT_OSS_20B.layer_type_counts == {FULL_ATTENTION: 12, SLIDING_ATTENTION: 12}
    assert list(QWEN3_NEXT.layer_groups) == [
        (LINEAR_ATTENTION, "moe"), (FULL_ATTENTION, "moe")]
    assert QWEN3_NEXT.layer_groups[LayerSignature(FULL_ATTENTION, "moe")] == tuple(range(3, 48, 4))
    # Llama 4 Maverick: chunked except every 4th layer; MoE on odd layers
    groups = LLAMA4_MAVERICK.layer_groups
    assert groups[LayerSignature(CHUNKED_ATTENTION, "dense")] == tuple(range(0, 48, 2))
    assert groups[LayerSignature(CHUNKED_ATTENTION, "moe")] == tuple(range(1, 48, 4))
    assert groups[LayerSignature(FULL_ATTENTION, "moe")] == tuple(range(3, 48, 4))
    assert (FULL_ATTENTION, "dense") not in groups
    assert DEEPSEEK_V32.layer_type_counts == {INDEXED_ATTENTION: 61}


def test_first_layers_cuts_the_pattern() -> None:
    m = QWEN3_NEXT.first_layers(5)
    assert m.num_hidden_layers == 5
    assert [m.layer_type(j) for j in range(5)] == [
        LINEAR_ATTENTION, LINEAR_ATTENTION, LINEAR_ATTENTION, FULL_ATTENTION, LINEAR_ATTENTION]
    with pytest.raises(ValueError):
        QWEN3_NEXT.first_layers(0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"layer_types": (SLIDING_ATTENTION,) * 3}, "3 entries for 24 layers"),
        ({"layer_types": ("mamba",) * 24}, "unknown layer type 'mamba'"),
        ({"sliding_window": None}, "sliding_attention layers need sliding_window"),
        ({"sliding_window": 0}, "sliding_window must be None or > 0"),
        ({"layer_types": (CHUNKED_ATTENTION,) * 24}, "need attention_chunk_size"),
        ({"layer_types": (LINEAR_ATTENTION,) * 24}, "need linear_attention"),
        ({"layer_types": (INDEXED_ATTENTION,) * 24}, "need dsa"),
        ({"expert_weight_dtype": "fp5"}, "unknown weight dtype 'fp5'"),
        ({"weight_dtype": "int3"}, "unknown weight dtype 'int3'"),
        ({"moe": None}, "expert_weight_dtype needs MoE layers"),
    ],
)
def test_layer_kind_invariants(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(GPT_OSS_20B, **change)


def test_dsa_needs_mla_with_a_query_latent() -> None:
    with pytest.raises(ValueError, match="runs over MLA"):
        dataclasses.replace(GPT_OSS_20B, layer_types=(INDEXED_ATTENTION,) * 24,
                            dsa=DEEPSEEK_V32.dsa)
    assert DEEPSEEK_V32.mla is not None
    with pytest.raises(ValueError, match="runs over MLA"):
        dataclasses.replace(DEEPSEEK_V32, mla=dataclasses.replace(DEEPSEEK_V32.mla,
                                                                  q_lora_rank=None))
    with pytest.raises(ValueError, match="MHA / GQA only"):
        dataclasses.replace(DEEPSEEK_V32, attention_output_gate=True)


@given(hybrid_model_specs())
def test_layer_groups_partition_the_layers(m: ModelSpec) -> None:
    seen = sorted(j for layers in m.layer_groups.values() for j in layers)
    assert seen == list(range(m.num_hidden_layers))
    for sig, layers in m.layer_groups.items():
        assert all(m.layer_signature(j) == sig for j in layers)
    assert sum(m.layer_type_counts.values()) == m.num_hidden_layers
    assert hash(m) == hash(dataclasses.replace(m))


def test_a_spec_with_its_caches_filled_pickles_and_copies() -> None:
    # sweeps send specs to worker processes; the cached views must not travel
    m = QWEN3_NEXT
    assert m.layer_groups and m.layer_type_counts
    back = pickle.loads(pickle.dumps(m))
    assert back == m and back.layer_groups == m.layer_groups
    assert copy.deepcopy(m) == m
