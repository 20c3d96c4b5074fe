"""The new families through evaluate: storage vs matmul dtypes, memory for every kind, decode
per kind (issues 15 and 16): what each kind's cache does to TPOT as S grows."""

from __future__ import annotations

import dataclasses

import pytest

from ctxplan import api
from ctxplan.config.model_presets import load_model
from ctxplan.evaluate import check_memory, evaluate
from ctxplan.model.spec import ModelSpec

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
    assert chip.peak_flops_per_s["fp4"] == 4 * chip.peak_flops_per_s["bf16"]  # 9 PF dense
    no_fp4 = dataclasses.replace(chip, name="b200-no-fp4", peak_flops_per_s={
        k: v for k, v in chip.peak_flops_per_s.items() if k != "fp4"})
    bf16_run, _ = evaluate(dataclasses.replace(cfg, chip=no_fp4))
    fp4_run, _ = evaluate(cfg)
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
    # issue 16 target: 12 full layers keep S tokens, 12 window layers the last 128; the decode
    # at that point is simulated, with that memory
    S = 131072
    cfg = api.eval_config("gpt-oss-20b", "b200", S, "decode", 1, kv_tier="kv-bf16")
    assert check_memory(cfg).kv_bytes == (12 * S + 12 * 128) * 2 * 8 * 64 * 2
    res, _ = evaluate(cfg)
    assert res.simulated and res.tpot_s is not None
    assert res.memory.kv_bytes == (12 * S + 12 * 128) * 2 * 8 * 64 * 2


def _tpot_growth(m: str | ModelSpec, chip: str, nd: int, short: str = "8K",
                 long: str = "1M") -> float:
    a = api.evaluate(m, chip, short, "decode", nd)
    b = api.evaluate(m, chip, long, "decode", nd)
    assert a.tpot_s is not None and b.tpot_s is not None, (a.reason, b.reason)
    return b.tpot_s - a.tpot_s


def test_dsa_decode_tpot_grows_with_s_far_more_slowly_than_dense_mla() -> None:
    # issue 15: past k tokens the main attention reads k latents whatever S; only the indexer
    # (132 B per token) grows. Same pool (SG2262, Nd = 16), 8K -> 1M.
    dense = _tpot_growth("deepseek-v3", "sg2262", 16)
    sparse = _tpot_growth("deepseek-v3.2", "sg2262", 16)
    assert dense > 0 and 0 <= sparse < dense / 5


def test_window_and_linear_layers_add_nothing_to_decode_as_s_grows() -> None:
    # issue 16: gpt-oss's 12 window layers read 128 keys whatever S, so its TPOT grows about
    # half as fast as the same model with every layer full; Qwen3-Next's 36 linear layers step
    # a fixed state, so it grows about a quarter as fast as with 48 full layers.
    gpt = load_model("gpt-oss-20b")
    gpt_full = dataclasses.replace(gpt, name="gpt-oss-20b-all-full", layer_types=(),
                                   sliding_window=None)
    assert _tpot_growth(gpt, "h100-sxm", 4) < 0.6 * _tpot_growth(gpt_full, "h100-sxm", 4)
    nxt = load_model("qwen3-next-80b-a3b")
    nxt_full = dataclasses.replace(nxt, name="qwen3-next-all-full", layer_types=())
    assert _tpot_growth(nxt, "h100-sxm", 4, long="512K") < 0.35 * _tpot_growth(
        nxt_full, "h100-sxm", 4, long="512K")


@pytest.mark.parametrize("name", NEW)
def test_every_family_decodes_per_kind_with_its_bytes_conserved(name: str) -> None:
    # issue 16: decode simulates every kind (the window and the state on the home, DSA's
    # exact top-k over the shards); the CP bytes the simulation moved are the closed form's
    res = api.evaluate(name, "h200", "128K", "decode", 4, tp=8, batch=3)
    assert res.simulated and res.tpot_s is not None and res.comm is not None
    assert res.comm.simulated_bytes == res.comm.analytic_bytes > 0
    assert sum(k.layers for k in res.comm.kinds) == load_model(name).num_hidden_layers
    # a point that does not fit is reported as such (memory only), whatever its kinds
    if name == "deepseek-v3.2":
        big = api.evaluate(name, "h100-sxm", "1M", "decode", 1)
        assert not big.simulated and "does not fit" in big.reason


def test_a_dsa_evaluation_costs_no_more_than_the_dense_one() -> None:
    # issue 15 target: DeepSeek-V3.2 at DeepSeek-V3's point: the same task graph size (the
    # selection and sparse attention ride the last ring step's op), far less attention time
    v3 = api.evaluate("deepseek-v3", "sg2262", "128K", "prefill", 8)
    v32 = api.evaluate("deepseek-v3.2", "sg2262", "128K", "prefill", 8)
    assert v3.simulated and v32.simulated
    assert v32.tasks <= v3.tasks and v32.events <= v3.events
    assert v32.ttft_s is not None and v3.ttft_s is not None and v32.ttft_s < v3.ttft_s / 2
