"""The new families through evaluate: storage vs matmul dtypes, memory for every kind, and the
refusal to simulate the kinds the emitters do not model yet (issue 16, stage 2)."""

from __future__ import annotations

import dataclasses

import pytest

from ctxplan import api
from ctxplan.config.model_presets import load_model
from ctxplan.errors import UserInputError
from ctxplan.evaluate import check_memory, evaluate

NEW = ("gpt-oss-120b", "gpt-oss-20b", "kimi-k2", "qwen3-next-80b-a3b", "deepseek-v3.2")


def test_the_ffn_defaults_to_the_experts_dtype_and_its_matmul_to_what_the_chip_has() -> None:
    cfg = api.eval_config("gpt-oss-20b", "h100-sxm", 128, "decode", 1)
    p = cfg.resolved_precision()
    assert (p.attention_weights, p.ffn_weights) == ("bf16", "mxfp4")
    assert p.matmul_dtype("mxfp4") == "bf16"  # no FP4 peak on H100: not an input error
    fp4_chip = dataclasses.replace(cfg.chip, name="h100-fp4", peak_flops_per_s={
        **cfg.chip.peak_flops_per_s, "fp4": 2 * cfg.chip.peak_flops_per_s["fp8"]})
    p4 = dataclasses.replace(cfg, chip=fp4_chip).resolved_precision()
    assert p4.matmul_dtype("mxfp4") == "fp4"
    kimi = api.eval_config("kimi-k2", "h100-sxm", 128, "decode", 16, tp=8).resolved_precision()
    assert kimi.matmul_dtype(kimi.ffn_weights) == "fp8"  # fp8-block128 runs FP8 GEMMs


def test_experts_run_faster_where_the_chip_has_an_fp4_peak() -> None:
    cfg = api.eval_config("gpt-oss-20b", "b200", 128, "prefill", 1, batch=64)
    chip = cfg.chip
    assert "fp4" not in chip.peak_flops_per_s
    fp4 = dataclasses.replace(chip, name="b200-fp4", peak_flops_per_s={
        **chip.peak_flops_per_s, "fp4": 4 * chip.peak_flops_per_s["bf16"]})
    bf16_run, _ = evaluate(cfg)
    fp4_run, _ = evaluate(dataclasses.replace(cfg, chip=fp4))
    assert fp4_run.busy_s_by_kind["experts"] < bf16_run.busy_s_by_kind["experts"]
    # the same bytes of weights either way: storage does not depend on the chip
    assert fp4_run.memory.weights_bytes == bf16_run.memory.weights_bytes


def test_weight_only_int4_runs_at_bf16() -> None:
    res = api.evaluate("llama3.1-8b", "h100-sxm", "8K", "decode", 1, ffn_weights="int4")
    bf16 = api.evaluate("llama3.1-8b", "h100-sxm", "8K", "decode", 1)
    assert res.simulated and res.tpot_s is not None and bf16.tpot_s is not None
    assert res.tpot_s < bf16.tpot_s  # a quarter of the FFN bytes to stream
    assert res.memory.weights_bytes < bf16.memory.weights_bytes


def test_sliding_layers_within_their_window_simulate_as_full_attention() -> None:
    m = load_model("gpt-oss-20b")
    full = dataclasses.replace(m, layer_types=(), sliding_window=None)
    for phase, cp in (("decode", 1), ("prefill", 2)):
        got, _ = evaluate(api.eval_config(m, "h100-sxm", 128, phase, cp))
        ref, _ = evaluate(api.eval_config(full, "h100-sxm", 128, phase, cp))
        assert got.simulated and got.latency_s == ref.latency_s and got.tasks == ref.tasks


@pytest.mark.parametrize("name", NEW)
def test_memory_needs_no_simulation_for_every_family(name: str) -> None:
    m = load_model(name)
    mem = check_memory(api.eval_config(m, "b200", "1M", "decode", 64, tp=8))
    assert mem.kv_bytes > 0 and mem.weights_bytes > 0


def test_gpt_oss_20b_kv_at_128k_is_the_window_count() -> None:
    # issue 16 target: 12 full layers keep S tokens, 12 window layers the last 128
    S = 131072
    mem = check_memory(api.eval_config("gpt-oss-20b", "b200", S, "decode", 1))
    assert mem.kv_bytes == (12 * S + 12 * 128) * 2 * 8 * 64 * 2


def test_a_kind_decode_does_not_model_is_refused_by_evaluate_and_solve() -> None:
    with pytest.raises(UserInputError, match=r"^layer_types = 'qwen3-next-80b-a3b: 36 linear"):
        api.evaluate("qwen3-next-80b-a3b", "h100-sxm", "128K", "decode", 4, tp=2)
    # the prefill of the same model is simulated, every kind with its own CP pattern
    pre = api.evaluate("qwen3-next-80b-a3b", "h100-sxm", "128K", "prefill", 4, tp=2)
    assert pre.simulated and pre.comm is not None
    assert pre.comm.pattern == "pass-kv+state-chain"
    with pytest.raises(UserInputError, match=r"^layer_types = 'gpt-oss-20b: 12 sliding"):
        api.solve("gpt-oss-20b", "h100-sxm", "128K", tpot_max="50ms")
    # a point that does not fit is reported as such (memory only), whatever its kinds
    res = api.evaluate("deepseek-v3.2", "h100-sxm", "1M", "decode", 1)
    assert not res.simulated and "does not fit" in res.reason


def test_a_dsa_evaluation_costs_no_more_than_the_dense_one() -> None:
    # issue 15 target: DeepSeek-V3.2 at DeepSeek-V3's point: the same task graph size (the
    # selection and sparse attention ride the last ring step's op), far less attention time
    v3 = api.evaluate("deepseek-v3", "sg2262", "128K", "prefill", 8)
    v32 = api.evaluate("deepseek-v3.2", "sg2262", "128K", "prefill", 8)
    assert v3.simulated and v32.simulated
    assert v32.tasks <= v3.tasks and v32.events <= v3.events
    assert v32.ttft_s is not None and v3.ttft_s is not None and v32.ttft_s < v3.ttft_s / 2
