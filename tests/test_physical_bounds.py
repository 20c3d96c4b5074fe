"""Physical bounds the simulator may never beat, over random valid configurations.

* TTFT >= total FLOPs / (chips x peak): the work of a prefill, counted from the model alone
  (projections, FFN, the causal attention core, the LM head), split by the dtype that runs it,
  cannot finish faster than every chip of the pool at its nominal peak.
* TPOT >= bytes that must be read per step / HBM bandwidth: the chip that holds a sequence's
  token must stream its weight shard (all of it: a dense model touches every weight) and its
  own KV shard; and all chips together must read the whole model's weights once and the whole
  KV once. For MLA and MoE models too: every projection (absorbed MLA's kv_b_proj halves
  included), per MoE layer the router, the shared experts and top_k routed experts per token;
  on an ideal chip the bound is within 1% of TPOT, so a weight read left out fails it.
* No resource is busier than the makespan (utilisation <= 100%), per the kernel's own ledger.

The bounds are computed here from the model and chip figures, not from the mapping layer, so
a mapping that drops work or a kernel that overlaps a resource with itself fails them. Small
dense models and contexts keep the run short.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ctxplan.config.hardware_presets import chip_names, load_chip, load_cluster
from ctxplan.config.model_presets import load_model
from ctxplan.evaluate import EvalConfig, evaluate
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster, Level
from ctxplan.hardware.efficiency import ClassEfficiency, EfficiencyModel
from ctxplan.model.attention import attention_pair_flops, causal_pairs
from ctxplan.model.linear import (
    Linear,
    attention_linears,
    dense_ffn_linears,
    expert_linears,
    lm_head_linear,
    router_linear,
    shared_expert_linears,
)
from ctxplan.model.params import bytes_per_param
from ctxplan.model.precision import Precision
from ctxplan.model.spec import FULL_ATTENTION, ModelSpec
from ctxplan.policy import Policy

MODELS = ("llama3.1-8b", "qwen2.5-7b-1m")
SETTINGS = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def valid_tps(m: ModelSpec) -> list[int]:
    heads, kvh = m.num_attention_heads, m.num_key_value_heads
    return [t for t in range(1, 9) if heads % t == 0 and (t <= kvh or t % kvh == 0)]


@st.composite
def configs(draw: st.DrawFn, phase: str) -> EvalConfig:
    m = load_model(draw(st.sampled_from(MODELS)))
    chip = load_chip(draw(st.sampled_from(sorted(chip_names()))))
    cluster = load_cluster(chip.default_cluster)
    tp = draw(st.sampled_from(valid_tps(m)))
    cp = draw(st.integers(1, 8))
    context = draw(st.integers(256, 24_576))
    batch = draw(st.integers(1, 3))
    precision = Precision(attention_weights=draw(st.sampled_from(["bf16", "fp8"])),
                          ffn_weights=draw(st.sampled_from(["bf16", "fp8"])),
                          attention=draw(st.sampled_from(["bf16", "fp8"])))
    return EvalConfig(model=m, chip=chip, cluster=cluster, phase=phase, context_length=context,
                      cp=cp, tp=tp, batch=batch,
                      policy=Policy(precision=precision, periodic_shortcut=draw(st.booleans())))


def _simulate(cfg: EvalConfig) -> tuple[float, object]:
    res, trace = evaluate(cfg, trace=True)
    assume(res.simulated)          # a point that does not fit has nothing to bound
    assert res.latency_s is not None and trace is not None
    _check_utilisation(res, trace)
    return res.latency_s, res


def _check_utilisation(res: object, trace: object) -> None:
    sim = trace.result  # type: ignore[attr-defined]
    span = sim.makespan_ns
    assert span > 0
    for rid, busy in enumerate(sim.resource_busy_ns):
        assert busy <= span, f"resource {rid} busy {busy} ns > makespan {span} ns"
    assert 0 < res.max_compute_utilisation <= 1  # type: ignore[attr-defined]
    assert 0 <= res.max_link_utilisation <= 1  # type: ignore[attr-defined]


def prefill_flops_by_dtype(m: ModelSpec, cfg: EvalConfig) -> dict[str, float]:
    """FLOPs of one full prefill of ``batch`` sequences of S tokens, by the dtype running them."""
    p = cfg.resolved_precision()
    s, b, L = cfg.context_length, cfg.batch, m.num_hidden_layers
    out: dict[str, float] = {}

    def add(dtype: str, flops: float) -> None:
        out[dtype] = out.get(dtype, 0.0) + flops

    add(p.attention_weights, L * sum(x.flops(s * b) for x in attention_linears(m)))
    add(p.ffn_weights, L * sum(x.flops(s * b) for x in dense_ffn_linears(m)))
    add(p.attention, L * b * causal_pairs(s) * attention_pair_flops(m))
    add("bf16", lm_head_linear(m).flops(b))     # the first token's logits
    return out


@SETTINGS
@given(cfg=configs("prefill"))
def test_ttft_is_never_below_the_flops_at_peak(cfg: EvalConfig) -> None:
    ttft, _ = _simulate(cfg)
    chips = cfg.cp * cfg.tp
    peak = cfg.chip.peak_flops_per_s
    bound = sum(f / (chips * peak[d]) for d, f in prefill_flops_by_dtype(cfg.model, cfg).items())
    assert ttft >= bound * (1 - 1e-9), (ttft, bound)


def weight_bytes(m: ModelSpec, p: Precision) -> tuple[float, float]:
    """Per layer: attention projection bytes and FFN bytes (the whole layer, unsharded)."""
    attn = sum(x.params for x in attention_linears(m)) * bytes_per_param(p.attention_weights)
    ffn = sum(x.params for x in dense_ffn_linears(m)) * bytes_per_param(p.ffn_weights)
    return attn, ffn


@SETTINGS
@given(cfg=configs("decode"))
def test_tpot_is_never_below_the_bytes_read_at_full_bandwidth(cfg: EvalConfig) -> None:
    tpot, _ = _simulate(cfg)
    m = cfg.model
    L = m.num_hidden_layers
    bw = cfg.chip.memory_bandwidth_bytes_per_s
    _, c_kv = cfg.kv()
    attn, ffn = weight_bytes(m, cfg.resolved_precision())
    # The home chip of sequence 0 (rank 0, first TP chip): its weight shard, every layer, and
    # its share of every sequence's KV (the KV heads split over min(tp, kv_heads) chips).
    split = min(cfg.tp, m.num_key_value_heads)
    shard_tokens = cfg.context_length // cfg.cp
    home = L * ((attn + ffn) / cfg.tp + cfg.batch * shard_tokens * (c_kv // split))
    assert tpot >= home / bw * (1 - 1e-9), (tpot, home / bw)
    # All chips together read the model's weights once and the whole KV once.
    total = L * (attn + ffn + cfg.batch * cfg.context_length * c_kv)
    assert tpot >= total / (cfg.cp * cfg.tp * bw) * (1 - 1e-9)


# -- MLA and MoE decode ------------------------------------------------------------------------
# The bytes one decode step must read, from the model alone: every attention projection of
# every layer (MLA's kv_b_proj included: absorbed MLA applies its two halves, W_UK and W_UV, to
# every query, standard MLA to every KV token), the dense FFNs, per MoE layer the router, the
# shared experts and at least top_k distinct routed experts per token, the LM head, and the KV.
# The home chip (rank 0, TP index 0) holds its TP shard of every projection (replicated ones
# whole) and its own KV shard, and reads them in sequence on one HBM.

def _shard_bytes(linears: list[Linear], tp: int, dtype: str) -> float:
    return sum(x.params / (1 if x.shard == "replicated" else tp) for x in linears) \
        * bytes_per_param(dtype)


def decode_read_bounds(cfg: EvalConfig) -> tuple[float, float]:
    """(bytes the home chip must read, bytes all chips together must read) per decode step."""
    m, p = cfg.model, cfg.resolved_precision()
    tp, nd, b = cfg.tp, cfg.cp, cfg.batch
    _, c_kv = cfg.kv()
    split = min(tp, 1 if m.mla is not None else m.num_key_value_heads)
    home = total = 0.0
    for layer in range(m.num_hidden_layers):
        attn = attention_linears(m, m.layer_types[layer] if m.layer_types else FULL_ATTENTION)
        home += _shard_bytes(attn, tp, p.attention_weights)
        total += _shard_bytes(attn, 1, p.attention_weights)
        home += len(range(0, b, nd)) * (cfg.context_length // nd) * -(-c_kv // split)
        total += b * cfg.context_length * c_kv
        if m.is_moe_layer(layer):
            assert m.moe is not None
            always = _shard_bytes([router_linear(m)], 1, "bf16") + _shard_bytes(
                shared_expert_linears(m), 1, p.ffn_weights)
            routed = min(m.moe.num_experts_per_tok * b, m.moe.n_routed_experts) * _shard_bytes(
                expert_linears(m), 1, p.ffn_weights)
            total += always + routed
            # Without TP the home chip routes its own tokens; alone, it also holds the experts.
            home += (always if tp == 1 else 0.0) + (routed if nd * tp == 1 else 0.0)
        else:
            ffn = dense_ffn_linears(m)
            home += _shard_bytes(ffn, tp, p.ffn_weights)
            total += _shard_bytes(ffn, 1, p.ffn_weights)
    head = [lm_head_linear(m)]
    home += _shard_bytes(head, tp, "bf16")
    total += _shard_bytes(head, 1, "bf16")
    return home, total


MLA_MOE_CASES = [
    # (model, layers kept, chip, context, Nd, tp, batch, MLA mode, kv tier)
    ("deepseek-v3", 5, "sg2262", 20_000, 1, 1, 1, None, None),        # MLA absorbed + MoE
    ("deepseek-v3", 5, "sg2262", 9_000, 4, 2, 3, None, "mla-fp8"),
    ("deepseek-v3", 4, "sg2262", 5_000, 2, 1, 1, "standard", None),   # kv_b on every KV token
    ("deepseek-v3", 4, "h200", 12_000, 3, 8, 2, None, None),          # TP8 MLA (replicated)
    ("qwen3-235b-a22b", 3, "h100-sxm", 16_000, 2, 4, 1, None, None),  # GQA + MoE
]


def _truncated(name: str, layers: int) -> ModelSpec:
    m = load_model(name)
    return dataclasses.replace(m, num_hidden_layers=layers, layer_types=m.layer_types[:layers])


@pytest.mark.parametrize("case", MLA_MOE_CASES, ids=lambda c: f"{c[0]}-nd{c[4]}-tp{c[5]}")
def test_mla_and_moe_decode_never_beat_the_bytes_they_must_read(case: tuple[Any, ...]) -> None:
    name, layers, chip_name, context, nd, tp, batch, mla_mode, tier = case
    chip = load_chip(chip_name)
    cfg = EvalConfig(model=_truncated(name, layers), chip=chip,
                     cluster=load_cluster(chip.default_cluster), phase="decode",
                     context_length=context, cp=nd, tp=tp, batch=batch, kv_tier=tier,
                     policy=Policy(mla_mode=mla_mode, pass_q="ring" if nd % 2 else "broadcast"))
    tpot = _simulate_fitting(cfg)
    home, total = decode_read_bounds(cfg)
    bw = chip.memory_bandwidth_bytes_per_s
    assert tpot >= home / bw * (1 - 1e-9), (tpot, home / bw)
    assert tpot >= total / (nd * tp * bw) * (1 - 1e-9), (tpot, total / (nd * tp * bw))


def _simulate_fitting(cfg: EvalConfig) -> float:
    res, trace = evaluate(cfg, trace=True)
    assert res.simulated and res.latency_s is not None, res.reason
    _check_utilisation(res, trace)
    return res.latency_s


def _ideal(chip: Chip) -> tuple[Chip, Cluster]:
    """The chip with every byte at full HBM bandwidth, FLOPs a million times faster and no
    per-kernel cost; links free and instant: a decode step is then the home chip's bytes."""
    model = EfficiencyModel({k: ClassEfficiency(1.0, 0.0, 0.0)
                             for k in chip.efficiency_model.compute}, 1.0)
    fast = dataclasses.replace(
        chip, peak_flops_per_s={d: f * 1e6 for d, f in chip.peak_flops_per_s.items()},
        efficiency_model=model, op_overhead_ns=0, kernel_floor_ns={}, launch_gap_ns=0,
        eager_dispatch_ns=0)
    level = Level("all", 4096, "switch", 1e18, 0, 1.0)
    return fast, Cluster("ideal", chip.name, (level,), "test", False)


@pytest.mark.parametrize("layers", [4, 6])
def test_the_bound_is_tight_on_an_ideal_chip(layers: int) -> None:
    """On one ideal chip the bytes it must read are nearly all of TPOT (absorbed MLA and MoE,
    DeepSeek-V3's first layers), so a weight read with 0 bytes (absorbed MLA's kv_b_proj,
    16.8 M parameters per layer, was one) falls below the bound here, where real chips'
    efficiencies would hide it."""
    chip, cluster = _ideal(load_chip("sg2262"))
    cfg = EvalConfig(model=_truncated("deepseek-v3", layers), chip=chip, cluster=cluster,
                     phase="decode", context_length=4096, cp=1, tp=1,
                     policy=Policy(mla_mode="absorbed"))
    tpot = _simulate_fitting(cfg)
    home, _ = decode_read_bounds(cfg)
    bound = home / chip.memory_bandwidth_bytes_per_s
    assert bound <= tpot < 1.01 * bound
