"""Which attention kinds the emitters simulate (ctxplan.mapping.kinds): prefill every kind;
decode every kind but full attention is refused with one error on layer_types, except a window
that holds the context."""

from __future__ import annotations

import pytest

from ctxplan.config.model_presets import load_model
from ctxplan.errors import UserInputError
from ctxplan.mapping.kinds import check_simulated_kinds, unsimulated_kinds
from tests.model.family_specs import FAMILIES, LLAMA4_SCOUT


def test_full_attention_models_are_simulated() -> None:
    for name in ("deepseek-v3", "llama3.1-8b", "kimi-k2"):
        assert unsimulated_kinds(load_model(name), 2**20) == {}
    assert unsimulated_kinds(FAMILIES["glm-4.5"], 2**20) == {}


def test_a_window_that_holds_the_context_is_full_attention() -> None:
    gpt = FAMILIES["gpt-oss-20b"]
    assert unsimulated_kinds(gpt, 128) == {}  # S <= w: every key in the window
    assert unsimulated_kinds(gpt, 129) == {"sliding_attention": 12}
    assert unsimulated_kinds(LLAMA4_SCOUT, 8192) == {}
    assert unsimulated_kinds(LLAMA4_SCOUT, 8193) == {"chunked_attention": 36}


def test_linear_attention_and_dsa_are_not_simulated_in_decode_yet() -> None:
    assert unsimulated_kinds(FAMILIES["qwen3-next-80b-a3b"], 1) == {"linear_attention": 36}
    # for S <= top-k the main attention is dense, but the decode indexer is not emitted
    assert unsimulated_kinds(FAMILIES["deepseek-v3.2"], 1) == {"indexed_attention": 61}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_prefill_simulates_every_kind(name: str) -> None:
    assert unsimulated_kinds(FAMILIES[name], 2**20, "prefill") == {}
    check_simulated_kinds(FAMILIES[name], 2**20, "prefill")


@pytest.mark.parametrize(("name", "context", "hint"), [
    ("gpt-oss-120b", 131072, "at most 128 tokens"),
    ("gemma-3-27b", 32768, "at most 1,024 tokens"),
    ("qwen3-next-80b-a3b", 131072, "check decode memory only"),
])
def test_the_refusal_is_one_line_on_layer_types(name: str, context: int, hint: str) -> None:
    with pytest.raises(UserInputError) as info:
        check_simulated_kinds(FAMILIES[name], context)
    msg = str(info.value)
    assert msg.startswith(f"layer_types = '{name}: ") and "\n" not in msg
    assert f"decode not simulated at context {context:,}" in msg and hint in msg
    assert "simulate the prefill" in msg and "per-kind context parallelism" in msg
