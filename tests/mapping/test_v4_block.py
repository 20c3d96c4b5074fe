"""What DeepSeek-V4's block adds around its attention (docs/mapping.md, "DeepSeek-V4"): the MoE run
"attention CP, MoE TP" (``moe_parallel = tp``), hash-routed layers without a router, mHC's
4-wide residual traffic and the grouped output projection under TP."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ctxplan.config.checks import check_point
from ctxplan.config.hardware_presets import load_chip, load_cluster
from ctxplan.evaluate import EvalConfig, build_graph, check_memory, evaluate
from ctxplan.mapping import ops
from ctxplan.mapping.builder import GraphBuilder
from ctxplan.mapping.ops import linear_work, residual_work
from ctxplan.model.linear import (
    attention_linears,
    expert_linears,
    router_linear,
    shared_expert_linears,
)
from ctxplan.model.spec import COMPRESSED_SPARSE_ATTENTION, ModelSpec
from ctxplan.policy import Policy
from tests.model.family_specs import DEEPSEEK_V4_FLASH

FLASH = DEEPSEEK_V4_FLASH.first_layers(4)   # layers 0-2 hash-routed, layer 3 gated


def cfg_of(m: ModelSpec, phase: str, S: int, cp: int, *, tp: int = 1, batch: int = 1,
           moe: str = "ep", chip: str = "h100-sxm") -> EvalConfig:
    k = load_chip(chip)
    cfg = EvalConfig(model=m, chip=k, cluster=load_cluster(k.default_cluster), phase=phase,
                     context_length=S, cp=cp, tp=tp, batch=batch,
                     policy=Policy(moe_parallel=moe))
    return check_point(cfg)


def sent(b: GraphBuilder, *kinds_: str) -> int:
    return int(b.graph.nbytes[b.mask_of(list(kinds_))].sum())


def flops(b: GraphBuilder, kinds_: list[str], layer: int | None = None) -> float:
    mask = b.mask_of(kinds_)
    if layer is not None:
        mask &= b.layer == layer
    return math.fsum(b.flops[mask].tolist())


@pytest.mark.parametrize(("phase", "S", "cp", "tp", "batch"),
                         [("prefill", 6000, 3, 2, 1), ("prefill", 999, 4, 1, 2),
                          ("decode", 9000, 3, 2, 5), ("decode", 9000, 4, 1, 2)])
def test_moe_tp_gathers_the_pool_and_keeps_the_expert_flops(phase: str, S: int, cp: int,
                                                            tp: int, batch: int) -> None:
    m = FLASH
    ep = build_graph(cfg_of(m, phase, S, cp, tp=tp, batch=batch))
    tp_ = build_graph(cfg_of(m, phase, S, cp, tp=tp, batch=batch, moe="tp"))
    assert not tp_.mask_of([ops.MOE_DISPATCH, ops.MOE_COMBINE]).any()
    n = cp * tp
    # tokens per chip after the TP reduce-scatter, written from the layout
    if phase == "prefill":
        from ctxplan.mapping.layout import prefill_rank_tokens
        rank_tokens = [batch * t for t in prefill_rank_tokens(S, cp)]
    else:
        rank_tokens = [len(range(r, batch, cp)) for r in range(cp)]
    chip_tokens = [t // tp + (1 if j < t % tp else 0) for t in rank_tokens for j in range(tp)]
    share = max(chip_tokens) * m.hidden_size * 2      # each chip's share, padded
    ring = n * (n - 1) * share                         # a ring all-gather over the pool
    layers = m.n_moe_layers
    assert sent(tp_, ops.MOE_ALLGATHER) == sent(tp_, ops.MOE_REDUCESCATTER) == layers * ring
    # the same routed and shared expert FLOPs; the router runs on every chip over every token
    # (TP), on the gated layer only
    total = sum(chip_tokens)
    router = router_linear(m).flops(total)
    got = flops(tp_, [ops.ROUTER_SHARED, ops.EXPERTS])
    want = flops(ep, [ops.ROUTER_SHARED, ops.EXPERTS]) + (n - 1) * router
    assert got == pytest.approx(want, rel=1e-12)


def test_moe_tp_holds_every_expert_split_over_the_pool() -> None:
    m = DEEPSEEK_V4_FLASH
    ep = check_memory(cfg_of(m, "decode", 131072, 8, tp=1, chip="b200"))
    tp = check_memory(cfg_of(m, "decode", 131072, 8, tp=1, chip="b200", moe="tp"))
    # 256 experts over 8 chips: the same routed bytes either way; the shared expert, whole on
    # every chip under EP, split over the 8 (FP4 like the routed: the FFN's dtype)
    shared = sum(x.params for x in shared_expert_linears(m)) * 4.25 / 8
    moe_layers = m.n_moe_layers + 1   # with the MTP layer's
    assert ep.weights_bytes - tp.weights_bytes == pytest.approx(
        moe_layers * shared * (1 - 1 / 8), abs=moe_layers)
    # and over 512 chips, EP replicates (one expert a chip), TP splits
    big_ep = cfg_of(m, "decode", 131072, 64, tp=8, chip="gb300").layout()
    from dataclasses import replace

    from ctxplan.mapping.memory import weight_bytes_per_chip
    big_tp = replace(big_ep, policy=replace(big_ep.policy, moe_parallel="tp"))
    per_expert = sum(x.params for x in expert_linears(m)) * 4.25 / 8
    diff = weight_bytes_per_chip(m, big_ep) - weight_bytes_per_chip(m, big_tp)
    assert diff == pytest.approx(moe_layers * (per_expert * (1 - 256 / 512)
                                               + shared * (1 - 1 / 512)), rel=1e-6)


def test_auto_keeps_the_faster_moe() -> None:
    cfg = cfg_of(FLASH, "prefill", 8192, 4, chip="b200", moe="auto")
    r, _ = evaluate(cfg)
    mc = r.moe
    assert mc is not None and r.simulations == 2
    assert mc.latency_ep_s is not None and mc.latency_tp_s is not None
    assert r.latency_s == min(mc.latency_ep_s, mc.latency_tp_s)
    assert mc.used == ("tp" if mc.latency_tp_s < mc.latency_ep_s else "ep")
    # the default reports nothing new, and keeps its key
    plain, _ = evaluate(cfg.with_policy(moe_parallel="ep"))
    assert plain.moe is None and "moe_parallel" not in str(cfg.with_policy(
        moe_parallel="ep").key_fields())


def test_hash_routed_layers_have_no_router() -> None:
    m = FLASH
    b = build_graph(cfg_of(m, "prefill", 4096, 2))
    hashed = flops(b, [ops.ROUTER_SHARED], 2)     # CSA, hash-routed
    gated = flops(b, [ops.ROUTER_SHARED], 3)      # HCA, gated
    assert gated - hashed == pytest.approx(router_linear(m).flops(4096))


def test_mhc_moves_fourteen_hidden_widths_per_token_and_sublayer() -> None:
    lay = cfg_of(FLASH, "prefill", 4096, 1).layout()
    w = residual_work(FLASH, 10, lay)
    h = FLASH.hidden_size
    # before: the 4-wide stream read, the sublayer's input written; after: the stream and the
    # output read, the stream written
    assert w.mem_bytes == (4 + 1 + 4 + 1 + 4) * h * 10 * 2
    # an ordinary residual is its add and norm: 4 widths
    from tests.model.family_specs import DEEPSEEK_V32
    assert residual_work(DEEPSEEK_V32, 10, lay).mem_bytes == 4 * DEEPSEEK_V32.hidden_size * 20


def test_the_grouped_output_projection_reads_a_tp_chips_groups_only() -> None:
    m = FLASH
    lay = cfg_of(m, "prefill", 4096, 1, tp=2).layout()
    wo_a = [x for x in attention_linears(m, COMPRESSED_SPARSE_ATTENTION) if x.name == "wo_a"]
    assert wo_a[0].groups == 8
    w = linear_work(wo_a, 100, lay, "bf16")
    heads_d, out = 64 * 512, 8 * 1024
    params = heads_d * out // 8
    assert w.flops == 2 * params / 2 * 100
    assert w.mem_bytes == params / 2 * 2 + 100 * (heads_d / 2 + out / 2) * 2
    assert np.isclose(w.m_rows, 100)


def test_mtp_speculation_verifies_two_tokens_and_drafts_one() -> None:
    from dataclasses import replace

    from ctxplan.errors import UserInputError

    m = FLASH
    plain = cfg_of(m, "decode", 20_000, 3, tp=2, batch=4, chip="b200")
    spec = plain.with_policy(mtp_speculation=True)
    a, b = build_graph(plain), build_graph(spec)
    # every query, output and candidate travels for two tokens a sequence
    assert sent(b, *ops.DECODE_CP_KINDS) == 2 * sent(a, *ops.DECODE_CP_KINDS)
    attention = [ops.PARTIAL_ATTN, ops.WINDOW_ATTN, ops.CSA_ATTN, ops.HCA_ATTN]
    inside = [layer for layer in range(m.num_hidden_layers)]
    got = sum(flops(b, attention, j) for j in inside)
    assert got == pytest.approx(2 * sum(flops(a, attention, j) for j in inside), rel=1e-12)
    # the MTP layer after the last: its eh_proj on every home chip, and a second LM head
    homes = 3 * 2
    assert int(b.mask_of([ops.MTP_PROJ]).sum()) == homes
    assert int(b.mask_of([ops.LM_HEAD]).sum()) == 2 * homes
    ra, _ = evaluate(plain)
    rb, _ = evaluate(spec)
    assert rb.tokens_per_step == pytest.approx(1.85) and ra.tokens_per_step == 1.0
    assert rb.latency_s is not None and ra.latency_s is not None
    assert ra.latency_s < rb.latency_s * rb.tokens_per_step   # a longer step, more tokens
    assert rb.latency_s < ra.latency_s
    with pytest.raises(UserInputError, match="no MTP layer"):
        check_point(replace(cfg_of(m, "decode", 4096, 1), model=replace(m, mtp_layer_types=()),
                            policy=Policy(mtp_speculation=True)))
