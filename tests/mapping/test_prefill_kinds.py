"""Prefill per attention kind under CP, and on a cached prefix (docs/mapping.md, "Prefill").

Bytes moved equal closed forms written here from the model's numbers (token-by-token counts
where the pattern is irregular), not from the mapping's own functions; FLOPs add up to the
model layer's counts; the structure (steps, who sends to whom, what waits for what) is the
documented one. Graphs are the family specs cut to a few layers.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxplan.config.checks import check_point
from ctxplan.config.hardware_presets import load_chip, load_cluster
from ctxplan.errors import UserInputError
from ctxplan.evaluate import EvalConfig, build_graph, evaluate
from ctxplan.mapping import ops
from ctxplan.mapping.builder import GraphBuilder
from ctxplan.model import kinds
from ctxplan.model.attention import attention_pair_flops
from ctxplan.model.spec import (
    CHUNKED_ATTENTION,
    FULL_ATTENTION,
    INDEXED_ATTENTION,
    LINEAR_ATTENTION,
    SLIDING_ATTENTION,
    ModelSpec,
)
from ctxplan.policy import Policy
from tests.mapping.mapping_helpers import recorded_parts, total_of
from tests.model.family_specs import DEEPSEEK_V32, GPT_OSS_20B, LLAMA4_SCOUT, QWEN3_NEXT

ACT = 2
GPT = GPT_OSS_20B.first_layers(4)           # sliding, full, sliding, full; MoE
SCOUT = dataclasses.replace(LLAMA4_SCOUT, attention_chunk_size=256).first_layers(4)
NEXT = QWEN3_NEXT.first_layers(4)           # linear x 3, full; MoE
V32 = DEEPSEEK_V32.first_layers(4)          # DSA; 3 dense layers and a MoE one


def cfg_of(m: ModelSpec, S: int, cp: int, *, tp: int = 1, batch: int = 1, cached: int = 0,
           ring: str = "pass-kv", kv_tier: str | int | None = None) -> EvalConfig:
    chip = load_chip("h100-sxm")
    cfg = EvalConfig(model=m, chip=chip, cluster=load_cluster(chip.default_cluster),
                     phase="prefill", context_length=S, cp=cp, tp=tp, batch=batch,
                     kv_tier=kv_tier, cached=cached, policy=Policy(prefill_ring=ring))
    return check_point(cfg)


def sent(b: GraphBuilder, *kinds_: str) -> int:
    return int(b.graph.nbytes[b.mask_of(list(kinds_))].sum())


def flops(b: GraphBuilder, *kinds_: str) -> float:
    return math.fsum(b.flops[b.mask_of(list(kinds_))].tolist())


def c_kv(cfg: EvalConfig) -> int:
    return cfg.kv()[1]


def chunk_holders(S: int, P: int, cp: int) -> list[int]:
    """Per position: its rank, written from the documented layout (zigzag of the prefix, then
    zigzag of the new tokens)."""
    out: list[int] = []
    for total in (P, S - P):
        base, extra = divmod(total, 2 * cp)
        for j in range(2 * cp):
            out += [j if j < cp else 2 * cp - 1 - j] * (base + (1 if j < extra else 0))
    return out


def halo_count(m: ModelSpec, layer_type: str, S: int, P: int, cp: int) -> int:
    """Keys each rank receives for its windows, token by token, summed over ranks."""
    owner = chunk_holders(S, P, cp)
    total = 0
    for i in range(cp):
        need: set[int] = set()
        for p in range(P, S):
            if owner[p] == i and (p == P or owner[p - 1] != i):    # a chunk of rank i starts
                need |= set(range(kinds.window_start(m, layer_type, p), p))
        total += sum(1 for t in need if owner[t] != i)
    return total


# -- windowed kinds: a halo exchange ------------------------------------------------------------


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.sampled_from([(GPT, SLIDING_ATTENTION), (SCOUT, CHUNKED_ATTENTION)]),
       st.integers(2, 3000), st.integers(0, 2999), st.sampled_from([(1, 1), (3, 1), (4, 2)]),
       st.sampled_from([1, 2]))
def test_halo_bytes_equal_a_token_by_token_count(case: tuple[ModelSpec, str], S: int, P: int,
                                                 cp_tp: tuple[int, int], batch: int) -> None:
    m, layer_type = case
    cp, tp = cp_tp
    P = min(P, S - 1)
    cfg = cfg_of(m, S, cp, tp=tp, batch=batch, cached=P)
    b = build_graph(cfg)
    per_chip = -(-c_kv(cfg) // min(tp, m.num_key_value_heads))
    windowed = m.n_layers_of_type(layer_type) if (m.sliding_window or
                                                       m.attention_chunk_size or 0) < S else 0
    assert sent(b, ops.HALO_SEND) == (
        batch * windowed * tp * per_chip * halo_count(m, layer_type, S, P, cp))
    # the full layers ride the pass-KV ring over every token, cached and new
    full = m.num_hidden_layers - windowed
    assert sent(b, ops.PASS_KV_SEND) == batch * full * (cp - 1) * S * per_chip * tp
    # every (query, key) pair of the kind is computed once, over the TP chips' heads
    pair = attention_pair_flops(m)
    want = (windowed * kinds.attended_pairs(m, layer_type, S - P, P)
            + full * kinds.attended_pairs(m, FULL_ATTENTION, S - P, P)) * batch * pair
    assert flops(b, ops.WINDOW_ATTN, ops.PASS_KV_ATTN) == pytest.approx(want, rel=1e-12)


def test_a_short_window_exchanges_w_minus_1_keys_with_each_ring_neighbour() -> None:
    # gpt-oss: w = 128, chunks of 1000 tokens: one step, 2 (Np - 1) messages per layer and
    # TP index, each of w - 1 keys, whatever S
    cp, tp = 4, 2
    for S in (8000, 16000):
        cfg = cfg_of(GPT, S, cp, tp=tp)
        b = build_graph(cfg)
        halo = b.mask_of([ops.HALO_SEND]) & (b.layer == 0)
        nb = b.graph.nbytes[halo]
        per_chip = c_kv(cfg) // tp
        assert len(nb) == 2 * (cp - 1) * tp and (nb == 127 * per_chip).all()
        pairs = {(int(s) // tp, int(d) // tp) for s, d in zip(b.chip_of[halo], b.peer[halo],
                                                               strict=True)}
        assert pairs == {(i, i + 1) for i in range(cp - 1)} | {(i + 1, i)
                                                                for i in range(cp - 1)}
        steps = b.step[b.mask_of([ops.WINDOW_ATTN]) & (b.layer == 0)]
        assert sorted(set(steps.tolist())) == [0, 1]   # local keys, then the halo
        result, _ = evaluate(cfg)
        halo_row = next(k for k in result.comm.kinds if k.layer_type == SLIDING_ATTENTION)
        assert (halo_row.pattern, halo_row.ring_steps_per_layer) == ("halo", 1)
        assert halo_row.sends_per_layer == 2 * (cp - 1) * tp


def test_halo_attention_waits_for_its_keys_and_the_local_part() -> None:
    b = build_graph(cfg_of(GPT, 8000, 3))
    layer0 = b.layer == 0
    sends = np.flatnonzero(b.mask_of([ops.HALO_SEND]) & layer0)
    for t in np.flatnonzero(b.mask_of([ops.WINDOW_ATTN]) & layer0 & (b.step == 1)):
        deps = set(b.graph.deps[t])
        incoming = {int(s) for s in sends if b.peer[s] == b.chip_of[t]}
        assert incoming and incoming <= deps
        local = [d for d in deps if b.kind[d] == ops.WINDOW_ATTN]
        assert len(local) == 1 and b.step[local[0]] == 0


def test_a_window_that_holds_the_context_runs_the_full_ring() -> None:
    b = build_graph(cfg_of(GPT, 128, 2))
    assert not b.mask_of([ops.HALO_SEND, ops.WINDOW_ATTN]).any()


# -- linear attention: the state passed chunk to chunk -----------------------------------------


def _gdn(m: ModelSpec) -> tuple[int, int, int, int]:
    la = m.linear_attention
    assert la is not None
    return (la.linear_num_value_heads, la.linear_key_head_dim, la.linear_value_head_dim,
            la.conv_dim)


@pytest.mark.parametrize(("S", "P", "cp", "tp", "batch"), [
    (4000, 0, 4, 1, 1), (4000, 1500, 3, 2, 2), (9000, 0, 1, 2, 1), (1000, 999, 2, 1, 1)])
def test_linear_state_hops_and_conv_halo_equal_closed_forms(S: int, P: int, cp: int, tp: int,
                                                            batch: int) -> None:
    cfg = cfg_of(NEXT, S, cp, tp=tp, batch=batch, cached=P)
    b = build_graph(cfg)
    heads, dk, dv, conv = _gdn(NEXT)
    L = NEXT.n_layers_of_type(LINEAR_ATTENTION)
    state_chip = heads * dk * dv * 2 // tp
    owner = chunk_holders(S, P, cp)
    # segments: runs of new tokens on one rank, in position order
    runs = [p for p in range(P, S) if p == P or owner[p - 1] != owner[p]]
    segments = len(runs)
    hops = segments - 1
    assert sent(b, ops.STATE_SEND) == batch * L * tp * hops * state_chip
    # each chunk's conv1d needs the kernel - 1 = 3 inputs before it, unless its own rank
    # holds them (rank Np - 1's second chunk; the prefix's conv state is cached on rank 0)
    conv_halo = sum(1 for p in range(P, S) for t in range(max(p - 3, 0), p)
                    if (p == P or owner[p - 1] != owner[p]) and owner[t] != owner[p]
                    and t >= P)
    assert sent(b, ops.HALO_SEND) == batch * L * tp * conv_halo * (conv * ACT // tp)
    # FLOPs: the chunkwise pass of every new token, the CP extras of every token whose chunk
    # has an incoming state, one affine update per such segment, the corrections
    T = S - P
    first_run = (runs[1] if segments > 1 else S) - P
    stated = T if P else T - first_run        # the first run starts from a zero state
    updates = segments if P else segments - 1
    want = L * batch * (T * kinds.linear_prefill_flops_per_token(NEXT)
                        + stated * (kinds.linear_cp_flops_per_token(NEXT)
                                    + kinds.linear_correction_flops_per_token(NEXT))
                        + updates * kinds.linear_state_update_flops(NEXT))
    got = flops(b, ops.GDN_CHUNK, ops.GDN_STATE, ops.GDN_CORRECT)
    assert got == pytest.approx(want, rel=1e-12)


def test_the_state_goes_up_the_ranks_and_back_down_each_hop_after_the_last() -> None:
    cp = 4
    b = build_graph(cfg_of(NEXT, 8000, cp))
    layer0 = b.layer == 0
    hops = np.flatnonzero(b.mask_of([ops.STATE_SEND]) & layer0)
    path = [(int(b.chip_of[t]), int(b.peer[t])) for t in hops]
    # chunks 0..3 on ranks 0..3, then 4..7 on ranks 3..0: rank 3's two chunks are one segment
    assert path == [(0, 1), (1, 2), (2, 3), (3, 2), (2, 1), (1, 0)]
    updates = np.flatnonzero(b.mask_of([ops.GDN_STATE]) & layer0)
    assert [int(b.chip_of[t]) for t in updates] == [1, 2, 3, 2, 1, 0]
    for hop, update in zip(hops, updates, strict=True):
        assert hop in b.graph.deps[update]            # each update waits for the state
    for update, hop in zip(updates[:-1], hops[1:], strict=True):
        # and the next hop for the update, through its SendRecv's fixed cost on the sender
        sender_op = [t for t in b.graph.deps[hop] if b.chip_of[t] == b.chip_of[hop]]
        assert len(sender_op) == 1
        assert b.kind[sender_op[0]] == ops.op_kind(ops.STATE_SEND)
        assert update in b.graph.deps[sender_op[0]]


# -- DSA: the pass-KV ring with the indexer keys -----------------------------------------------


@pytest.mark.parametrize(("S", "P", "cp", "tp", "batch"), [
    (5000, 0, 4, 1, 1), (3000, 2000, 3, 2, 2), (1500, 0, 2, 1, 1), (2048, 0, 1, 1, 1)])
def test_dsa_flops_and_bytes_equal_closed_forms(S: int, P: int, cp: int, tp: int,
                                                batch: int) -> None:
    m = V32
    cfg = cfg_of(m, S, cp, tp=tp, batch=batch, cached=P)
    c = c_kv(cfg)
    assert c == 1152 + 132                               # the MLA latent and the index key
    with recorded_parts() as parts:
        b = build_graph(cfg)
    L, T = m.num_hidden_layers, S - P
    # the ring carries the latent and the index key of every token, cached and new
    assert sent(b, ops.PASS_KV_SEND) == batch * L * (cp - 1) * S * c * tp
    index_pairs = kinds.indexer_pairs(m, INDEXED_ATTENTION, T, P)
    attended = kinds.attended_pairs(m, INDEXED_ATTENTION, T, P)
    pair = attention_pair_flops(m, "absorbed")
    idx = kinds.indexer_pair_flops(m)
    # every TP chip scores the rank's queries whole; the heads of the sparse attention split
    want = L * batch * (tp * index_pairs * idx + attended * pair)
    assert flops(b, ops.DSA_INDEX, ops.DSA_ATTN) == pytest.approx(want, rel=1e-12)
    dsa = (ops.DSA_INDEX, ops.DSA_ATTN)
    sparse = [(k, [w for w in ws if w.dtype == "bf16" and w.op_class == "attention"], n)
              for k, ws, n in parts if k in dsa]
    # the sparse attention reads the latent of each selected token once per query
    assert total_of(sparse, dsa, "attention", "mem_bytes") == pytest.approx(
        L * tp * batch * (attended * 1152 + T * (128 // tp) * (576 + 512) * ACT), rel=1e-12)
    scores = [(k, [w for w in ws if w.dtype == "fp8"], n) for k, ws, n in parts if k in dsa]
    index_bytes = total_of(scores, dsa, "attention", "mem_bytes")
    # per block: its index keys, the rank's FP8 queries, the FP32 scores written and read
    assert index_bytes == pytest.approx(
        L * tp * batch * (cp * S * 132 + cp * T * 64 * 128 + 2 * 4 * index_pairs), rel=1e-12)


def test_up_to_k_tokens_dsa_costs_dense_mla_plus_the_indexer() -> None:
    # S <= 2048: every earlier token is selected: the sparse attention is the dense one
    S = 2000
    dsa = build_graph(cfg_of(V32, S, 2))
    dense_model = dataclasses.replace(V32, layer_types=(), dsa=None)
    dense = build_graph(cfg_of(dense_model, S, 2, kv_tier=1152))
    L = V32.num_hidden_layers
    index = L * kinds.indexer_pairs(V32, INDEXED_ATTENTION, S) * kinds.indexer_pair_flops(V32)
    dense_cfg = cfg_of(dense_model, S, 2, kv_tier=1152).with_policy(mla_mode="absorbed")
    dense_abs = build_graph(dense_cfg)
    assert flops(dsa, ops.DSA_INDEX, ops.DSA_ATTN) == pytest.approx(
        flops(dense_abs, ops.PASS_KV_ATTN) + index, rel=1e-12)
    cost = kinds.prefill_attention_cost(V32, INDEXED_ATTENTION, S, "absorbed")
    assert cost.attention_flops == kinds.causal_pairs(S) * attention_pair_flops(V32, "absorbed")
    assert flops(dsa, ops.DSA_INDEX, ops.DSA_ATTN) == pytest.approx(
        L * (cost.attention_flops + cost.indexer_flops), rel=1e-12)
    assert dense.n_tasks == dsa.n_tasks


def test_dsa_selection_and_sparse_attention_follow_the_last_block() -> None:
    cp = 3
    b = build_graph(cfg_of(V32, 6000, cp))
    layer0 = b.layer == 0
    attn = np.flatnonzero(b.mask_of([ops.DSA_ATTN]) & layer0)
    assert len(attn) == cp and (b.step[attn] == cp - 1).all()
    assert (b.step[b.mask_of([ops.DSA_INDEX]) & layer0] < cp - 1).all()


def test_dsa_refuses_standard_mla() -> None:
    with pytest.raises(UserInputError, match=r"^mla_mode = 'standard'"):
        check_point(cfg_of(V32, 100, 1).with_policy(mla_mode="standard"))


# -- a cached prefix: pass-KV or pass-Q --------------------------------------------------------


@pytest.mark.parametrize(("name", "S", "P", "cp", "tp", "batch"), [
    ("llama3.1-8b", 5000, 4000, 4, 1, 1), ("llama3.1-8b", 4093, 77, 3, 2, 3),
    ("deepseek-v3", 3001, 2500, 3, 1, 1), ("llama3.1-8b", 1000, 995, 4, 1, 1)])
@pytest.mark.parametrize("ring", ["pass-kv", "pass-q"])
def test_both_rings_conserve_bytes_on_a_cached_prefix(name: str, S: int, P: int, cp: int,
                                                      tp: int, batch: int, ring: str) -> None:
    from ctxplan.config.model_presets import load_model

    m = load_model(name).first_layers(4)
    cfg = cfg_of(m, S, cp, tp=tp, batch=batch, cached=P, ring=ring)
    b = build_graph(cfg)
    L, T = m.num_hidden_layers, S - P
    mode = cfg.layout().mla_mode or "standard"
    if m.mla is None:
        qk = v = m.head_dim
        per_chip = -(-c_kv(cfg) // min(tp, m.num_key_value_heads))
    else:
        qk, v = (192, 128) if mode == "standard" else (576, 512)
        per_chip = c_kv(cfg)
    heads = m.num_attention_heads // tp
    if ring == "pass-kv":
        # every rank's block of cached and new KV visits the Np - 1 others
        expect = batch * L * (cp - 1) * S * per_chip * tp
        assert sent(b, ops.PASS_KV_SEND) == expect
        assert sent(b, ops.PREFILL_Q_SEND, ops.PREFILL_OUT_SEND) == 0
    else:
        # the T new queries visit Np - 1 ranks; Np - 1 partial outputs (+ FP32 LSE) go home
        expect = batch * L * (cp - 1) * T * tp * heads * (qk * ACT + v * ACT + 4)
        assert sent(b, ops.PREFILL_Q_SEND, ops.PREFILL_OUT_SEND) == expect
        assert sent(b, ops.PASS_KV_SEND) == 0
    # the same attention either way: T queries against P + T keys, causally
    pair = attention_pair_flops(m, mode)
    attn = flops(b, ops.PASS_KV_ATTN, ops.PREFILL_Q_ATTN)
    up = 0.0
    if m.mla is not None and mode == "standard":
        # standard MLA up-projects every latent a rank attends that it did not project itself
        kv_b = 2 * m.mla.kv_lora_rank * m.num_attention_heads * (128 + 128) * batch
        up = kv_b * L * ((cp - 1) * S + P if ring == "pass-kv" else P)
    assert attn == pytest.approx(L * batch * pair * (T * P + T * (T + 1) // 2) + up,
                                 rel=1e-12)
    result, _ = evaluate(cfg)
    if result.simulated:
        assert result.comm.simulated_bytes == result.comm.analytic_bytes == expect
        assert result.comm.pattern == ring and result.cached == P


def test_pass_q_merges_every_ranks_partial_after_the_all_to_all() -> None:
    cp = 4
    b = build_graph(cfg_of(GPT_OSS_20B.first_layers(2), 2000, cp, cached=1000,
                           ring="pass-q"))
    layer1 = b.layer == 1                                     # the full-attention layer
    outs = np.flatnonzero(b.mask_of([ops.PREFILL_OUT_SEND]) & layer1)
    merges = np.flatnonzero(b.mask_of([ops.PREFILL_MERGE]) & layer1)
    assert len(outs) == cp * (cp - 1) and len(merges) == cp
    for t in merges:
        incoming = {int(s) for s in outs if b.peer[s] == b.chip_of[t]}
        assert len(incoming) == cp - 1 and incoming <= set(b.graph.deps[t])


def test_cached_prefix_is_refused_for_decode_and_at_the_whole_context() -> None:
    with pytest.raises(UserInputError, match=r"^cached = 10"):
        check_point(dataclasses.replace(cfg_of(GPT, 100, 1), phase="decode", cached=10))
    with pytest.raises(UserInputError, match=r"^cached = 100"):
        check_point(dataclasses.replace(cfg_of(GPT, 100, 1), cached=100))


@pytest.mark.parametrize("m", [GPT, NEXT, V32, SCOUT], ids=lambda m: m.name)
def test_every_kind_reports_simulated_equal_analytic_bytes(m: ModelSpec) -> None:
    for S, P, cp, ring in ((20000, 0, 4, "pass-kv"), (20000, 15000, 3, "pass-q")):
        result, _ = evaluate(cfg_of(m, S, cp, tp=2, cached=P, ring=ring))
        assert result.simulated and result.comm is not None
        assert result.comm.simulated_bytes == result.comm.analytic_bytes > 0
        assert {k.layer_type for k in result.comm.kinds} == set(m.layer_type_counts)
