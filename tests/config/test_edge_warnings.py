"""What a run warns about (config/edge_warnings.py) and the channel that carries it
(ctxplan.run_warnings): the context beyond the model, FP4 weights without FP4 compute."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ctxplan import api
from ctxplan.config.edge_warnings import (
    MAX_CONTEXT_TOKENS,
    context_warnings,
    precision_warnings,
)
from ctxplan.config.model_presets import load_model
from ctxplan.config.model_yaml import model_from_dict
from ctxplan.errors import UserInputError
from ctxplan.run_warnings import RunWarnings, merged, warning_line
from tests.helpers.inputs import TINY_MODEL

# A tiny model trained to 2K tokens (1K, extended 2x by rope scaling)
SHORT: dict[str, Any] = {**TINY_MODEL, "max_position_embeddings": 1024,
                         "rope_scaling": {"type": "yarn", "factor": 2, "beta_fast": 32,
                                          "original_max_position_embeddings": 1024}}


def test_the_limit_is_the_longer_of_the_two_statements() -> None:
    m = model_from_dict(SHORT, "x")
    assert m.context_limit == 2048
    assert load_model("deepseek-v3").context_limit == 163840      # 40 x 4,096 = 163,840
    assert load_model("llama3.1-405b").context_limit == 131072    # max(131,072, 8 x 8,192)
    assert load_model("qwen3-235b-a22b").context_limit == 40960   # no rope_scaling
    assert model_from_dict(TINY_MODEL, "x").context_limit is None  # states none: no warning
    assert context_warnings(model_from_dict(TINY_MODEL, "x"), 10**6) == ()


def test_a_context_beyond_the_limit_warns_once_naming_both_numbers() -> None:
    m = load_model("deepseek-v3")
    assert context_warnings(m, 163840) == ()
    (line,) = context_warnings(m, 2**20)
    assert "1,048,576" in line and "163,840" in line and "\n" not in line
    assert line.startswith("context_length = 1,048,576: beyond deepseek-v3's")
    with pytest.raises(UserInputError, match="163,840") as info:
        context_warnings(m, 2**20, strict=True)
    assert info.value.field == "context_length" and "strict-context" in info.value.fix


def test_contexts_above_16m_are_refused_whatever_the_model() -> None:
    m = load_model("llama3.1-8b")
    context_warnings(m, MAX_CONTEXT_TOKENS)
    with pytest.raises(UserInputError, match="16M"):
        context_warnings(m, MAX_CONTEXT_TOKENS + 1)
    with pytest.raises(UserInputError, match="16M"):
        api.eval_config("deepseek-v3", "h100-sxm", "100M", "decode", 2)


def test_fp4_weights_without_fp4_compute_are_said() -> None:
    (line,) = precision_warnings({"ffn_weights": "mxfp4", "attention_weights": "bf16"},
                                 "h100-sxm", ("bf16", "fp8"))
    assert line.startswith("ffn_weights = mxfp4: chip h100-sxm has no FP4 peak") and "BF16" in line
    assert precision_warnings({"ffn_weights": "nvfp4"}, "gb300", ("bf16", "fp8", "fp4")) == ()
    # an equal-width stand-in (FP16 weights at the BF16 peak) and weight-only int4 are not warned
    assert precision_warnings({"ffn_weights": "fp16", "attention_weights": "int4"}, "h100",
                              ("bf16", "fp8")) == ()


def test_results_carry_their_warnings_and_the_store_does_not(tmp_path: Any) -> None:
    store = tmp_path / "r.sqlite"
    m = model_from_dict(SHORT, "x")
    r = api.evaluate(m, "h100-sxm", "4K", "decode", 1, store=store)
    assert len(r.warnings) == 1 and "4,096" in r.warnings[0] and "2,048" in r.warnings[0]
    assert r.to_dict()["warnings"] == list(r.warnings)
    again = api.evaluate(m, "h100-sxm", "4K", "decode", 1, store=store)   # from the store
    assert again.warnings == r.warnings
    assert api.evaluate(m, "h100-sxm", "2K", "decode", 1).warnings == ()
    with pytest.raises(UserInputError, match="2,048"):
        api.evaluate(m, "h100-sxm", "4K", "decode", 1, strict_context=True)


def test_a_solve_and_a_sweep_carry_their_points_warnings() -> None:
    m = model_from_dict(SHORT, "x")
    kw: dict[str, Any] = dict(max_chips=4, kv_tiers="kv-bf16", prefill_tp=1, decode_tp=1)
    s = api.solve(m, "h100-sxm", "4K", **kw)
    assert len(s.warnings) == 1 and s.to_dict()["warnings"] == list(s.warnings)
    sweep = api.sweep(m, "h100-sxm", "1K,3K,4K", **kw)
    assert [len(p.warnings) for p in sweep.points] == [0, 1, 1]
    assert len(sweep.warnings) == 2 and sweep.to_dict()["warnings"] == list(sweep.warnings)
    # strict: refused before any point runs, whichever context is too long
    with pytest.raises(UserInputError, match="contexts"):
        api.sweep(m, "h100-sxm", "1K,4K", strict_context=True, **kw)


def test_the_channel_keeps_order_and_each_line_once() -> None:
    w = RunWarnings(["b", "a"])
    w.add("b")
    w.extend(["c", "a"])
    assert w.lines == ("b", "a", "c") and len(w) == 3
    assert merged(["x", "y"], ["y", "z"]) == ("x", "y", "z")
    assert warning_line("f", 3, "p\nq", "c") == "f = 3: p q; c"
    assert warning_line("f", "text", "p", "c") == "f = text: p; c"


def test_dataclass_results_default_to_no_warnings() -> None:
    from ctxplan.evaluate import EvalResult
    from ctxplan.solve import SolveResult

    for cls in (EvalResult, SolveResult):
        (f,) = [f for f in dataclasses.fields(cls) if f.name == "warnings"]
        assert f.default == ()
