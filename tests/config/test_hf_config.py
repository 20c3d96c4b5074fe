"""The Hugging Face translator table (ctxplan.config.hf_config): one line per family."""

from __future__ import annotations

from typing import Any

import pytest

from ctxplan.config import hf_config
from ctxplan.config.hf_config import FAMILIES, Family, FamilyParts, model_from_hf_config
from ctxplan.config.model_build import MoELayers
from ctxplan.errors import UserInputError

DENSE: dict[str, Any] = {"num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8,
                         "num_key_value_heads": 2, "intermediate_size": 1024,
                         "vocab_size": 1000, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize("model_type", list(FAMILIES))
def test_a_config_without_model_type_is_known_by_its_architecture(model_type: str) -> None:
    arch = FAMILIES[model_type].architecture
    found = hf_config._model_type({"architectures": [arch]}, "c.json")
    # Kimi K2 names DeepSeek-V3's class: read as deepseek_v3, with the same translator
    assert found == model_type or (model_type, found) == ("kimi_k2", "deepseek_v3")
    assert FAMILIES[found].translate is FAMILIES[model_type].translate


def test_a_family_is_one_translator_and_one_table_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def every_other_layer_moe(c: Any, where: str) -> FamilyParts:
        return FamilyParts(moe=MoELayers(8, 0, 2, 256, list(range(1, c.num_hidden_layers, 2)),
                                         "moe_layer_freq"))

    monkeypatch.setitem(FAMILIES, "toy_moe", Family("ToyMoeForCausalLM", every_other_layer_moe))
    m = model_from_hf_config(DENSE | {"model_type": "toy_moe"}, "toy/config.json")
    assert m.name == "toy" and m.moe is not None
    assert [i for i in range(4) if m.is_moe_layer(i)] == [1, 3]
    # The shared checks apply to every family: more experts per token than experts.
    monkeypatch.setitem(FAMILIES, "toy_bad", Family("ToyBad", lambda c, w: FamilyParts(
        moe=MoELayers(2, 0, 3, 256, [0, 1, 2, 3], "moe_layer_freq"))))
    with pytest.raises(UserInputError, match="num_experts_per_tok"):
        model_from_hf_config(DENSE | {"model_type": "toy_bad"}, "bad.json")


def test_an_unknown_model_type_lists_the_table() -> None:
    with pytest.raises(UserInputError) as info:
        model_from_hf_config(DENSE | {"model_type": "gpt2"}, "g.json")
    assert all(t in str(info.value) for t in FAMILIES)
