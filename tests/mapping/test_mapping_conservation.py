"""Conservation: the CP bytes the simulation moved equal the closed form, exactly.

Prefill pass-KV: b * L * (Np - 1) * S * c_kv per chip-ring, times tp rings.
Decode pass-Q + merge: L * b * (Nd - 1) * tp * (query + partial output + LSE bytes per chip).
Checked over S (including S not divisible by 2 * Np and S < Np), N, tp, batch, named and custom
KV tiers and the three model families (MLA + MoE, GQA dense, GQA MoE). The hypothesis cases use
the preset models cut to a few layers (both closed forms are linear in L, and the MoE / dense
layer mix is kept); explicit full-depth cases follow. Attention FLOPs are conserved too.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctxplan.evaluate import EvalConfig, evaluate
from ctxplan.mapping import ops
from ctxplan.mapping.builder import GraphBuilder
from ctxplan.model.kv import kv_tiers
from ctxplan.model.spec import ModelSpec
from ctxplan.sim import SimResult
from tests.mapping.mapping_helpers import (
    MODEL_CHIP,
    config,
    decode_dims,
    graph,
    min_layers,
    model,
    pass_kv_bytes,
    pass_q_bytes,
    truncated,
    valid_tps,
)

MODELS = tuple(MODEL_CHIP)


@st.composite
def cp_configs(draw: st.DrawFn, phase: str) -> EvalConfig:
    name = draw(st.sampled_from(MODELS))
    m = model(name)
    m = truncated(m, draw(st.integers(min_layers(m), min_layers(m) + 2)))
    tp = draw(st.sampled_from(valid_tps(m)))
    # MoE graphs grow as N^2 (all-to-all): keep the pool at 16 chips or less. Odd and prime
    # degrees are in on purpose (uneven splits); cp = 1 has its own explicit case.
    cp = draw(st.sampled_from([n for n in (2, 3, 4, 5, 7, 8, 11, 16) if n * tp <= 16]))
    S = draw(st.one_of(st.integers(1, 2 * cp + 1), st.integers(2 * cp + 2, 4096)))
    batch = draw(st.sampled_from([1, 3]))
    tier: str | int = draw(st.one_of(st.sampled_from(sorted(kv_tiers(m))),
                                     st.integers(1, 5000)))
    mla_mode = draw(st.sampled_from([None, "standard", "absorbed"])) if m.mla else None
    return config(m, phase, S, cp, tp=tp, batch=batch, kv_tier=tier, mla_mode=mla_mode)


def _kv_b_params(m: ModelSpec) -> int:
    assert m.mla is not None
    return m.mla.kv_lora_rank * m.num_attention_heads * (m.mla.qk_nope_head_dim
                                                         + m.mla.v_head_dim)


def _simulate(cfg: EvalConfig) -> tuple[GraphBuilder, SimResult]:
    b = graph(cfg)
    return b, b.run()


def _check_prefill(cfg: EvalConfig, b: GraphBuilder, res: SimResult) -> None:
    m, lay = cfg.model, cfg.layout()
    _, c_kv = cfg.kv()
    sends = [t for t, k in enumerate(b.kind) if k == ops.PASS_KV_SEND]
    assert all(res.end_ns[t] >= res.start_ns[t] >= 0 for t in sends)  # all simulated
    simulated = sum(b.graph.nbytes[t] for t in sends)
    assert simulated == pass_kv_bytes(m, cfg.context_length, cfg.cp, cfg.tp, cfg.batch, c_kv)
    # Attention compute is conserved as well: the ring's blocks cover exactly the causal pairs.
    attn = math.fsum(b.flops[t] for t, k in enumerate(b.kind) if k == ops.PASS_KV_ATTN)
    qk, v = decode_dims(m, lay.mla_mode or "standard")
    pair = 2 * m.num_attention_heads * (qk + v)
    S, L, batch = cfg.context_length, m.num_hidden_layers, cfg.batch
    # Standard MLA up-projects each received latent block (kv_b_proj) inside the ring step:
    # every rank receives the (Np - 1) * S / Np tokens it does not hold, (Np - 1) * S in all.
    up = 2 * _kv_b_params(m) * batch * (cfg.cp - 1) * S if lay.mla_mode == "standard" else 0
    assert attn == pytest.approx(L * batch * pair * S * (S + 1) / 2 + L * up, rel=1e-9)


def _check_decode(cfg: EvalConfig, b: GraphBuilder, res: SimResult) -> None:
    m, lay = cfg.model, cfg.layout()
    sends = [t for t, k in enumerate(b.kind) if k in ops.DECODE_CP_KINDS]
    assert all(res.end_ns[t] >= res.start_ns[t] >= 0 for t in sends)
    simulated = sum(b.graph.nbytes[t] for t in sends)
    assert simulated == pass_q_bytes(m, cfg.cp, cfg.tp, cfg.batch, lay.mla_mode or "standard")
    # Every cached token of every sequence is attended once per layer per TP chip's heads.
    attn = math.fsum(b.flops[t] for t, k in enumerate(b.kind) if k == ops.PARTIAL_ATTN)
    qk, v = decode_dims(m, lay.mla_mode or "standard")
    pair = 2 * m.num_attention_heads * (qk + v)
    # Standard MLA decode up-projects the whole local latent shard every step.
    tokens = cfg.batch * cfg.context_length
    up = 2 * _kv_b_params(m) * tokens if lay.mla_mode == "standard" else 0
    assert attn == pytest.approx(m.num_hidden_layers * (tokens * pair + up), rel=1e-9)


FAST = settings(max_examples=50, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(cp_configs("prefill"))
def test_prefill_pass_kv_bytes_equal_closed_form(cfg: EvalConfig) -> None:
    _check_prefill(cfg, *_simulate(cfg))


@FAST
@given(cp_configs("decode"))
def test_decode_pass_q_bytes_equal_closed_form(cfg: EvalConfig) -> None:
    _check_decode(cfg, *_simulate(cfg))


@pytest.mark.parametrize(
    ("name", "S", "cp", "tp", "batch", "tier"),
    [
        ("llama3.1-8b", 100, 1, 2, 3, "kv-bf16"),      # cp = 1: no CP traffic at all
        ("llama3.1-8b", 3, 4, 1, 1, "kv-bf16"),        # S < Np: empty chunks still ride the ring
        ("llama3.1-8b", 4093, 5, 2, 3, 777),            # S not divisible by 2 * Np, custom tier
        ("llama3.1-8b", 2048, 2, 8, 1, "kv-fp8"),       # tp = kv_heads: one KV head per chip
        ("qwen3-235b-a22b", 1000, 2, 8, 3, "kv-bf16"),  # tp above 4 KV heads: KV replicated 2x
        ("deepseek-v3", 1001, 16, 1, 1, "mla-bf16"),    # full 61 layers, MoE, N = 16
        ("deepseek-v3", 999, 4, 2, 3, "mla-fp8"),       # MLA latent replicated on both TP chips
    ],
)
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_full_depth_through_evaluate(name: str, S: int, cp: int, tp: int, batch: int,
                                     tier: str | int, phase: str) -> None:
    """The EvalResult's comm report: simulated == analytic == the independent closed form."""
    m = model(name)
    cfg = config(m, phase, S, cp, tp=tp, batch=batch, kv_tier=tier)
    lay = cfg.layout()
    _, c_kv = cfg.kv()
    # The whole graph, every layer, simulated.
    b, res = _simulate(cfg)
    if phase == "prefill":
        _check_prefill(cfg, b, res)
        expect = pass_kv_bytes(m, S, cp, tp, batch, c_kv)
    else:
        _check_decode(cfg, b, res)
        expect = pass_q_bytes(m, cp, tp, batch, lay.mla_mode)
    # evaluate() reports the same count when the point fits in memory (the mapping is exact
    # either way), including when it simulates fewer layers and extrapolates the rest.
    result, _ = evaluate(cfg)
    if result.simulated:
        assert result.comm is not None
        assert result.comm.simulated_bytes == result.comm.analytic_bytes == expect
        assert result.comm.pattern == ("pass-kv" if phase == "prefill" else "pass-q")


@example(cp=4, S=8191, phase="prefill")
@example(cp=3, S=2, phase="decode")
@settings(max_examples=15, deadline=None, derandomize=True)
@given(cp=st.integers(2, 16), S=st.integers(1, 50_000), phase=st.sampled_from(["prefill",
                                                                               "decode"]))
def test_link_bytes_in_the_kernel_match(cp: int, S: int, phase: str) -> None:
    """A dense model with tp = 1 moves nothing but the CP pattern, so the bytes the kernel
    booked on the egress resources (tx ports, mesh links) are the CP bytes, independently of
    the builder's per-task accounting."""
    m = model("llama3.1-8b")
    cfg = config(m, phase, S, cp)
    b = graph(cfg)
    res = b.run()
    names = b.graph.resource_names
    egress = sum(res.resource_bytes[r] for r in range(b.n_chips, len(names))
                 if names[r].endswith(".tx") or "->" in names[r])
    ingress = sum(res.resource_bytes[r] for r in range(b.n_chips, len(names))
                  if names[r].endswith(".rx"))
    if phase == "prefill":
        expect = pass_kv_bytes(m, S, cp, 1, 1, m.num_key_value_heads * m.head_dim * 2 * 2)
    else:
        expect = pass_q_bytes(m, cp, 1, 1, "")
    assert egress == expect
    assert ingress == egress  # every hop of this all-switch cluster holds one tx and one rx
