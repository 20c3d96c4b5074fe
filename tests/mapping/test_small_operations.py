"""What small operations cost (issue 26), on the mapping side: the MoE layer by batch, the
kernels a layer launches, and the collectives by size and algorithm."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxplan.config.hardware_presets import load_chip, load_cluster
from ctxplan.hardware.cluster import HIERARCHICAL, ONE_SHOT, RING, TWO_SHOT, AlgorithmCost
from ctxplan.mapping import collectives as coll
from ctxplan.mapping import ops
from ctxplan.mapping.builder import NONE, GraphBuilder
from ctxplan.mapping.ffn import emit_ffn, experts_touched
from ctxplan.mapping.layout import Layout
from ctxplan.model.precision import Precision
from tests.mapping.mapping_helpers import config, graph, model, truncated

# -- experts touched, and the MoE layer by batch -------------------------------------------


@given(e=st.integers(1, 384), k=st.integers(1, 16), n_experts=st.integers(1, 512),
       slots=st.integers(0, 100_000))
@example(e=32, k=8, n_experts=256, slots=0)
@example(e=1, k=8, n_experts=256, slots=1)
@example(e=2, k=2, n_experts=2, slots=1)
def test_experts_touched_is_bounded_and_never_falls_with_a_slot(e: int, k: int,
                                                                n_experts: int,
                                                                slots: int) -> None:
    k = min(k, n_experts)
    e = min(e, n_experts)
    now, more = experts_touched(e, [slots, slots + 1], k, n_experts)
    assert 0.0 <= now <= min(e, slots) and now <= more <= e


def test_experts_touched_on_one_chip_is_the_random_routing_expectation() -> None:
    """E (1 - (1 - k / E)^b) for b tokens on a chip holding all E experts: what the fused-MoE
    benchmarks (random gating) touch; a top-k has no repeats, so one token touches exactly k."""
    e, k = 128, 8
    got = experts_touched(e, [8, 64, 8 * 4096], k, e)
    want = [e * (1 - (1 - k / e) ** b) for b in (1, 8, 4096)]
    assert got == pytest.approx(want, rel=1e-9)
    assert got[0] == pytest.approx(8.0)


def _moe_layer_ns(name: str, chip: str, tokens: int, chips: int, ramp_ns: float = 0.0) -> int:
    """One MoE FFN layer of ``name`` for ``tokens`` decode tokens on a pool of ``chips``
    (EP over the pool), simulated: its makespan (``ramp_ns``: the GEMMs' stream ramp per
    expert, 0 in the presets)."""
    m = truncated(model(name), model(name).moe.first_k_dense_replace + 1)
    lay = Layout(phase="decode", cp=chips, tp=1, batch=max(tokens, 1), context_length=1,
                 c_kv_bytes=1, mla_mode="", precision=Precision(m.weight_dtype,
                                                                 m.weight_dtype, "bf16"))
    c = load_chip(chip)
    if ramp_ns:
        c = dataclasses.replace(c, efficiency_model=c.efficiency_model.with_class(
            "matmul", stream_ramp_ns=ramp_ns))
    b = GraphBuilder(c, load_cluster(c.default_cluster), chips)
    rank_tokens = np.zeros(chips, np.int64)
    rank_tokens[0] = tokens
    ready = np.full((chips, 0), NONE, np.int64)
    emit_ffn(b, m, lay, m.moe.first_k_dense_replace, rank_tokens, ready)
    return b.run().makespan_ns


@pytest.mark.parametrize(("name", "chip", "chips", "ramp_ns"),
                         [("qwen3-235b-a22b", "h100-sxm", 1, 0.0),
                          ("deepseek-v3", "h20", 8, 0.0),
                          ("qwen3-235b-a22b", "h100-sxm", 1, 1000.0)])
@given(tokens=st.integers(1, 300))
@example(tokens=1)
@settings(max_examples=25, deadline=None)
def test_a_moe_layers_time_never_falls_when_a_batch_adds_a_token(name: str, chip: str,
                                                                 chips: int, ramp_ns: float,
                                                                 tokens: int) -> None:
    """Also with a stream ramp per expert (each expert touched its own stream): the experts
    touched never fall as the batch grows, so neither do their ramps."""
    assert (_moe_layer_ns(name, chip, tokens, chips, ramp_ns)
            <= _moe_layer_ns(name, chip, tokens + 1, chips, ramp_ns))


def test_the_moe_layer_by_batch_rises_with_the_experts_touched_then_flattens() -> None:
    """The shape of the fused-MoE tables (validation/kernels): on one GPU the layer's time
    rises steeply while new experts are touched (batch 1 to 16 for 128 experts, top-8), then
    flattens once all are active (64 to 256), before compute adds (beyond)."""
    t = {b: _moe_layer_ns("qwen3-235b-a22b", "h100-sxm", b, 1) for b in (1, 16, 64, 256)}
    assert t[16] > 4 * t[1]
    assert t[256] < 1.3 * t[64]


# -- the kernels a layer launches ----------------------------------------------------------


def _kernels_per_layer(name: str, phase: str, cfg_kw: dict[str, object]) -> dict[str, int]:
    m = truncated(model(name), model(name).moe.first_k_dense_replace + 1
                  if model(name).moe else 1)
    cfg = config(m, phase, 4096, 1, **cfg_kw)
    lay = cfg.layout()
    from ctxplan.mapping.attention import attention_shapes
    att = attention_shapes(m, lay, "full_attention")
    return {"projection": len(att.projection(m, 1, lay)), "output": len(att.output(1, lay))}


def test_what_a_layer_launches_matches_docs_table() -> None:
    """docs/mapping.md, "What a layer launches": the kernels of the attention half's
    projections by attention kind (GQA: norm, fused qkv, RoPE, cache write; absorbed MLA:
    norm, fused q_a + kv_a, two latent norms, q_b, RoPE, cache write, W_UK)."""
    assert _kernels_per_layer("llama3.1-8b", "decode", {}) == {"projection": 4, "output": 1}
    assert _kernels_per_layer("deepseek-v3", "decode", {"mla_mode": "absorbed"}) == {
        "projection": 8, "output": 2}
    assert _kernels_per_layer("deepseek-v3", "prefill", {"mla_mode": "standard"}) == {
        "projection": 8, "output": 1}


def test_decode_runs_under_graphs_and_prefill_eager() -> None:
    m = truncated(model("llama3.1-8b"), 1)
    assert graph(config(m, "decode", 2048, 1)).launch == "graph"
    assert graph(config(m, "prefill", 2048, 1)).launch == "eager"


# -- collectives by size and algorithm ------------------------------------------------------


def _only(algorithm: str, overhead_ns: int = 1000) -> object:
    """hgx-h100-ib whose host level offers only ``algorithm`` besides a ring made costly."""
    k = load_cluster("hgx-h100-ib")
    host = k.levels[0]
    offered = {} if algorithm == RING else {algorithm: AlgorithmCost(overhead_ns, 0, 0.5)}
    host = dataclasses.replace(host, allreduce=offered,
                               collective_overhead_ns=1000 if algorithm == RING else 10**7)
    return dataclasses.replace(k, levels=(host, *k.levels[1:]))


@pytest.mark.parametrize("algorithm", [RING, ONE_SHOT, TWO_SHOT])
@given(n=st.integers(2, 8), size=st.integers(1, 1 << 24))
@example(n=8, size=1)
@example(n=3, size=7)
@settings(max_examples=20, deadline=None)
def test_an_all_reduce_moves_its_algorithms_bytes(algorithm: str, n: int, size: int) -> None:
    """Bytes conserved per algorithm: the ring 2 (n - 1) n shards of ceil(size / n), one-shot
    every rank's whole buffer to every peer, two-shot two rounds of shards to every peer."""
    b = GraphBuilder(load_chip("h100-sxm"), _only(algorithm), n)
    chosen, _, _ = coll.allreduce_algorithm(b, np.arange(n)[None, :], size)
    assert chosen == algorithm
    coll.all_reduce(b, np.arange(n)[None, :], np.full((n, 0), NONE, np.int64), size, 0)
    g = b.graph
    sent = int(g.nbytes[np.array(b.kind) == ops.TP_ALLREDUCE].sum())
    shard = -(-size // n)
    want = {RING: 2 * (n - 1) * n * shard, ONE_SHOT: n * (n - 1) * size,
            TWO_SHOT: 2 * n * (n - 1) * shard}[algorithm]
    assert sent == want
    ops_paid = [t for t, k in enumerate(b.kind) if k == ops.op_kind(ops.TP_ALLREDUCE)]
    assert len(ops_paid) == n   # one operation per chip


def test_the_library_picks_the_all_reduce_by_size() -> None:
    """On 8 H100s (hgx-h100-ib: NCCL's ring and the engines' one-shot / two-shot), a decode
    token's all-reduce goes one-shot; a large one goes by the ring; across hosts, the
    hierarchical all-reduce (reduce inside each host, then over the NICs)."""
    k = load_cluster("hgx-h100-ib")
    b = GraphBuilder(load_chip("h100-sxm"), k, 16)
    host = np.arange(8)[None, :]
    assert coll.allreduce_algorithm(b, host, 16 * 1024)[0] == ONE_SHOT
    assert coll.allreduce_algorithm(b, host, 256 << 20)[0] == RING
    assert coll.allreduce_algorithm(b, np.arange(16)[None, :], 1024)[0] == HIERARCHICAL
    sg = GraphBuilder(load_chip("sg2262"), load_cluster("sg2262-c2c"), 8)
    assert coll.allreduce_algorithm(sg, host, 1024)[0] == RING   # offers none


def test_dispatch_and_combine_pay_the_levels_own_floors() -> None:
    m = truncated(model("deepseek-v3"), 4)
    cfg = config(m, "decode", 4096, 8, chip="h800", cluster=load_cluster("hgx-h800-ib"))
    b = graph(cfg)
    host = cfg.cluster.levels[0]
    dur = b.graph.duration_ns
    for kind, want in ((ops.MOE_DISPATCH, host.dispatch_overhead_ns),
                       (ops.MOE_COMBINE, host.combine_overhead_ns)):
        got = {int(dur[t]) for t, k in enumerate(b.kind) if k == ops.op_kind(kind)}
        assert got == {want}
