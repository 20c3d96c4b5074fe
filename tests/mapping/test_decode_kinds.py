"""Decode per attention kind (docs/mapping.md, "Decode, per attention kind").

Windows and linear states live on each sequence's home rank: those layers move nothing and run
on the home chips only. DSA forms the exact top k over the shards: its bytes equal closed forms
written here from the model's numbers (not from the mapping's functions), its FLOPs add up to
the model layer's counts, and the selection waits for every shard's candidates.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxplan.config.checks import check_point
from ctxplan.config.hardware_presets import load_chip, load_cluster
from ctxplan.evaluate import EvalConfig, build_graph, evaluate
from ctxplan.mapping import ops
from ctxplan.mapping.builder import GraphBuilder
from ctxplan.mapping.memory import chip_memory, decode_layer_activations
from ctxplan.model import kinds
from ctxplan.model.attention import attention_pair_flops
from ctxplan.model.spec import (
    CHUNKED_ATTENTION,
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
CP_SENDS = list(ops.DECODE_CP_KINDS)


def cfg_of(m: ModelSpec, S: int, nd: int, *, tp: int = 1, batch: int = 1,
           pass_q: str = "broadcast", chip: str = "h100-sxm",
           kv_tier: str | int | None = None) -> EvalConfig:
    c = load_chip(chip)
    cfg = EvalConfig(model=m, chip=c, cluster=load_cluster(c.default_cluster), phase="decode",
                     context_length=S, cp=nd, tp=tp, batch=batch, kv_tier=kv_tier,
                     policy=Policy(pass_q=pass_q))
    return check_point(cfg)


def sent(b: GraphBuilder, *kinds_: str) -> int:
    return int(b.graph.nbytes[b.mask_of(list(kinds_))].sum())


def homes_of(batch: int, nd: int) -> list[int]:
    """Sequences per rank: sequence k's home is rank k mod Nd."""
    return [len(range(r, batch, nd)) for r in range(nd)]


def shards_of(S: int, nd: int) -> list[int]:
    """Contiguous shares of S, larger first."""
    base, extra = divmod(S, nd)
    return [base + (1 if r < extra else 0) for r in range(nd)]


def layers_of(m: ModelSpec, layer_type: str) -> list[int]:
    return [j for j in range(m.num_hidden_layers) if m.layer_type(j) == layer_type]


def in_layers(b: GraphBuilder, layers: list[int]) -> np.ndarray:
    return np.isin(b.layer, layers)


# -- windows and states on the home -----------------------------------------------------------


@pytest.mark.parametrize(("m", "kind", "keep"), [(GPT, SLIDING_ATTENTION, 128),
                                                 (SCOUT, CHUNKED_ATTENTION, 256)],
                         ids=["sliding", "chunked"])
@pytest.mark.parametrize(("S", "nd", "tp", "batch", "pass_q"), [
    (9000, 3, 2, 5, "broadcast"), (4097, 4, 1, 2, "ring"), (3000, 1, 2, 1, "broadcast")])
def test_window_layers_run_on_the_home_and_move_nothing(m: ModelSpec, kind: str, keep: int,
                                                        S: int, nd: int, tp: int, batch: int,
                                                        pass_q: str) -> None:
    cfg = cfg_of(m, S, nd, tp=tp, batch=batch, pass_q=pass_q)
    with recorded_parts() as parts:
        b = build_graph(cfg)
    window = layers_of(m, kind)
    assert window and len(window) < m.num_hidden_layers
    here = in_layers(b, window)
    assert not (b.mask_of(CP_SENDS) & here).any()              # nothing moves
    assert (b.mask_of(CP_SENDS) & ~here).any() == (nd > 1)      # the full layers' pass-Q does
    # the window's attention runs on the home chips only, once per layer
    homes = [r for r, n in enumerate(homes_of(batch, nd)) if n]
    attn = np.flatnonzero(b.mask_of([ops.WINDOW_ATTN]))
    assert sorted({int(b.chip_of[t]) // tp for t in attn}) == homes
    assert len(attn) == len(window) * len(homes) * tp
    assert not (b.mask_of([ops.PARTIAL_ATTN, ops.ATTN_MERGE]) & here).any()
    # every sequence's query against the last min(S, w) keys: FLOPs and KV bytes
    assert keep < S
    pair = attention_pair_flops(m, "standard")
    assert float(b.flops[attn].sum()) == pytest.approx(len(window) * batch * keep * pair,
                                                       rel=1e-12)
    heads = m.num_attention_heads // tp
    c_chip = -(-m.num_key_value_heads * m.head_dim * 2 * ACT // min(tp, m.num_key_value_heads))
    per_seq = keep * c_chip + heads * m.head_dim * 2 * ACT   # the keys, the query, the output
    got = total_of(parts, (ops.WINDOW_ATTN,), "attention", "mem_bytes")
    assert got == pytest.approx(len(window) * tp * batch * per_seq, rel=1e-12)


@pytest.mark.parametrize(("S", "nd", "tp", "batch"), [(6000, 3, 2, 5), (100_000, 2, 1, 1)])
def test_linear_layers_step_their_state_on_the_home(S: int, nd: int, tp: int,
                                                    batch: int) -> None:
    cfg = cfg_of(NEXT, S, nd, tp=tp, batch=batch)
    with recorded_parts() as parts:
        b = build_graph(cfg)
    linear = layers_of(NEXT, LINEAR_ATTENTION)
    here = in_layers(b, linear)
    assert not (b.mask_of(CP_SENDS) & here).any()
    steps = np.flatnonzero(b.mask_of([ops.GDN_STEP]))
    homes = [r for r, n in enumerate(homes_of(batch, nd)) if n]
    assert sorted({int(b.chip_of[t]) // tp for t in steps}) == homes
    assert len(steps) == len(linear) * len(homes) * tp
    # one recurrent step per sequence: 7 d_k d_v per value head plus the conv1d (32 heads of
    # 128 x 128; conv_dim 8192, kernel 4), the value heads split over TP
    per_token = 32 * 7 * 128 * 128 + 2 * 8192 * 4
    assert float(b.flops[steps].sum()) == pytest.approx(len(linear) * batch * per_token,
                                                        rel=1e-12)
    # the state (recurrent + conv, 1,097,728 B in BF16) read and written back on its chip's
    # share of the heads, the conv channels read and the output written
    state_chip = -(-1_097_728 // tp)
    per_seq = 2 * state_chip + (8192 + 4096) * ACT / tp
    got = total_of(parts, (ops.GDN_STEP,), "memory", "mem_bytes")
    assert got == pytest.approx(len(linear) * tp * batch * per_seq, rel=1e-12)


# -- DSA: the exact top k over the shards -----------------------------------------------------


def dsa_messages(tp: int) -> tuple[int, int, int]:
    """DeepSeek-V3.2, absorbed MLA, per sequence per TP chip: the MLA query (576 per head), the
    indexer's query (64 heads x 128 FP8 + an FP32 weight each), the partial output (512 per
    head) with its FP32 LSE."""
    heads = 128 // tp
    return heads * 576 * ACT, 64 * 128 + 64 * 4, heads * (512 * ACT + 4)


@pytest.mark.parametrize(("S", "nd", "tp", "batch", "pass_q"), [
    (9000, 4, 1, 1, "broadcast"), (9001, 3, 2, 5, "broadcast"), (5000, 5, 1, 3, "ring"),
    (1500, 4, 2, 2, "broadcast"), (20_000, 2, 8, 1, "broadcast")])
def test_dsa_decode_bytes_equal_closed_forms(S: int, nd: int, tp: int, batch: int,
                                             pass_q: str) -> None:
    cfg = cfg_of(V32, S, nd, tp=tp, batch=batch, pass_q=pass_q, chip="h200")
    b = build_graph(cfg)
    L, k = V32.num_hidden_layers, 2048
    q, iq, o = dsa_messages(tp)
    # the queries to every other rank and the partials back (the pattern is the broadcast
    # whatever pass_q: the selection needs every shard's candidates before any attention)
    assert sent(b, ops.PASS_Q_SEND) == L * tp * batch * (nd - 1) * (q + iq)
    assert sent(b, ops.MERGE_SEND) == L * tp * batch * (nd - 1) * o
    if k < S:
        # rank r sends each other home its min(k, shard_r) candidates (8 B each) per sequence
        # of that home; the home returns the boundary (8 B) per sequence to every other rank
        cands = [min(k, s) for s in shards_of(S, nd)]
        homes = homes_of(batch, nd)
        assert sent(b, ops.DSA_CAND_SEND) == L * tp * 8 * sum(
            c * (batch - h) for c, h in zip(cands, homes, strict=True))
        assert sent(b, ops.DSA_SELECT_SEND) == L * tp * batch * (nd - 1) * 8
    else:
        # every token is selected: no candidates, no boundary
        assert sent(b, ops.DSA_CAND_SEND, ops.DSA_SELECT_SEND) == 0
    res, _ = evaluate(cfg)
    assert res.comm is not None
    assert res.comm.simulated_bytes == res.comm.analytic_bytes == sent(b, *CP_SENDS)
    (dsa,) = res.comm.kinds
    assert dsa.pattern == "pass-q+top-k"
    assert dsa.sends_per_layer == int(b.mask_of(CP_SENDS)[b.layer == 0].sum())


@pytest.mark.parametrize(("S", "nd", "tp", "batch"), [(9000, 4, 1, 2), (9000, 3, 2, 1),
                                                     (1500, 2, 1, 1), (9000, 1, 1, 2)])
def test_dsa_decode_flops_and_bytes_equal_closed_forms(S: int, nd: int, tp: int,
                                                       batch: int) -> None:
    cfg = cfg_of(V32, S, nd, tp=tp, batch=batch, chip="h200")
    with recorded_parts() as parts:
        b = build_graph(cfg)
    L, k = V32.num_hidden_layers, 2048
    shards = shards_of(S, nd)
    cands = [min(k, s) for s in shards]
    selected = min(k, S)
    q, iq, o = dsa_messages(tp)
    # every TP chip of every rank scores every query against its shard: tp b S pairs per layer
    index = 2 * 64 * (128 + 1)
    assert float(b.flops[b.mask_of([ops.DSA_INDEX])].sum()) == pytest.approx(
        L * tp * batch * S * index, rel=1e-12)
    # the sparse attention: min(k, S) selected tokens per query in all, the heads split
    pair = attention_pair_flops(V32, "absorbed")
    assert float(b.flops[b.mask_of([ops.DSA_ATTN])].sum()) == pytest.approx(
        L * batch * selected * pair, rel=1e-12)
    # it reads the latent (1152 B) of each selected token only, the query and its output
    # (with the LSE only when partials are merged)
    out = o if nd > 1 else o - (128 // tp) * 4
    assert total_of(parts, (ops.DSA_ATTN,), "attention", "mem_bytes") == pytest.approx(
        L * tp * batch * (selected * 1152 + nd * (q + out)), rel=1e-12)
    # the indexer reads its keys (132 B), its query, writes and reads back FP32 scores, and
    # writes its candidates
    assert total_of(parts, (ops.DSA_INDEX,), "attention", "mem_bytes") == pytest.approx(
        L * tp * batch * (S * (132 + 8) + nd * iq + 8 * sum(cands)), rel=1e-12)


def test_up_to_k_tokens_dsa_decode_is_dense_mla_plus_the_indexer() -> None:
    S, nd = 2000, 2
    dsa = build_graph(cfg_of(V32, S, nd, chip="h200"))
    dense_model = dataclasses.replace(V32, layer_types=(), dsa=None)
    dense = build_graph(cfg_of(dense_model, S, nd, chip="h200", kv_tier=1152))
    L = V32.num_hidden_layers
    index = L * S * 2 * 64 * 129
    assert float(dsa.flops[dsa.mask_of([ops.DSA_INDEX, ops.DSA_ATTN])].sum()) == pytest.approx(
        float(dense.flops[dense.mask_of([ops.PARTIAL_ATTN])].sum()) + index, rel=1e-12)
    cost = kinds.decode_attention_cost(V32, INDEXED_ATTENTION, S, 1284)
    assert float(dsa.flops[dsa.mask_of([ops.DSA_INDEX, ops.DSA_ATTN])].sum()) == pytest.approx(
        L * (cost.attention_flops + cost.indexer_flops), rel=1e-12)


def test_the_selection_waits_for_every_shards_candidates() -> None:
    nd, batch = 4, 2   # homes: ranks 0 and 1
    b = build_graph(cfg_of(V32, 9000, nd, batch=batch, chip="h200"))
    deps = b.graph.deps
    layer0 = b.layer == 0
    selects = np.flatnonzero(b.mask_of([ops.DSA_SELECT]) & layer0)
    assert sorted(int(b.chip_of[t]) for t in selects) == [0, 1]
    for t in selects:
        home = int(b.chip_of[t])
        got = {int(b.chip_of[d]) for d in deps[t]
               if b.kind[d] == ops.DSA_CAND_SEND and b.peer[d] == home}
        assert got == set(range(nd)) - {home}
    # every sparse attention waits for its home's boundary: on a non-home rank, through the
    # boundary's transfer from each home
    for t in np.flatnonzero(b.mask_of([ops.DSA_ATTN]) & layer0):
        chip = int(b.chip_of[t])
        if chip in (0, 1):
            continue
        came = {int(b.chip_of[d]) for d in deps[t]
                if b.kind[d] == ops.DSA_SELECT_SEND and b.peer[d] == chip}
        assert came == {0, 1}


def test_dsa_decode_memory_counts_the_scores_and_candidates() -> None:
    S, nd, batch = 1_000_000, 8, 3
    cfg = cfg_of(DEEPSEEK_V32, S, nd, tp=8, batch=batch, chip="h200")
    base = dataclasses.replace(DEEPSEEK_V32, layer_types=(), dsa=None)
    dense = cfg_of(base, S, nd, tp=8, batch=batch, chip="h200", kv_tier=1152)
    shard = 125_000
    extra = batch * (shard * 4 + nd * 2048 * 8)
    # the closed form (docs/mapping.md, "Memory") and what decode declares per layer
    assert (chip_memory(cfg.model, cfg.layout()).activation_bytes
            - chip_memory(dense.model, dense.layout()).activation_bytes == extra)
    assert (decode_layer_activations(cfg.model, cfg.layout())
            - decode_layer_activations(dense.model, dense.layout()) == extra)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(S=st.integers(100, 40_000), nd=st.integers(1, 6), tp=st.sampled_from([1, 2, 4]),
       batch=st.integers(1, 8), pass_q=st.sampled_from(["broadcast", "ring"]))
def test_every_kind_moves_its_closed_form_for_any_pool(S: int, nd: int, tp: int, batch: int,
                                                       pass_q: str) -> None:
    """A hybrid of every kind's decode pattern: full layers' pass-Q, windows on the home, DSA's
    top k; the bytes each moves are its closed form, however S, Nd, TP and the batch fall."""
    for m in (GPT, V32):
        cfg = cfg_of(m, S, nd, tp=tp, batch=batch, pass_q=pass_q, chip="h200")
        b = build_graph(cfg)
        res, _ = evaluate(cfg)
        assert res.comm is not None
        assert res.comm.simulated_bytes == res.comm.analytic_bytes == sent(b, *CP_SENDS)
    # DSA's closed form, written here from the model's numbers
    q, iq, o = dsa_messages(tp)
    per = batch * (nd - 1) * (q + iq + o)
    if S > 2048 and nd > 1:
        cands = [min(2048, s) for s in shards_of(S, nd)]
        per += 8 * sum(c * (batch - h) for c, h in zip(cands, homes_of(batch, nd), strict=True))
        per += 8 * batch * (nd - 1)
    assert res.comm.analytic_bytes == V32.num_hidden_layers * tp * per
