"""DP attention with EP (issue 25 item 1): a decode pool of DP ranks, each a CP group holding
its own sequences whole, the experts over every chip.

What must hold: the attention traffic of a DP rank stays inside its CP group (nothing moves for
attention with cp = 1); the MoE all-to-all carries every DP rank's tokens to every chip, each
routed token-slot exactly once; the KV a chip holds is its DP rank's sequences' share; the graph
tiles and runs the same in both kernels; dp = 1 is the layout it always was (its key too).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctxplan import api
from ctxplan.errors import UserInputError
from ctxplan.evaluate import build_graph, evaluate
from ctxplan.mapping import ops
from ctxplan.mapping.builder import GraphBuilder
from ctxplan.mapping.decode import emit_decode
from ctxplan.mapping.ffn import dispatch_bytes_per_slot
from ctxplan.mapping.layout import route_matrix, split_even
from ctxplan.mapping.memory import kv_bytes_by_rank
from ctxplan.mapping.prefill import emit_prefill
from tests.mapping.mapping_helpers import MODEL_CHIP, min_layers, model, truncated, valid_tps
from tests.model.family_specs import DEEPSEEK_V4_FLASH


def _cfg(model, chip, S, cp, *, tp, dp, batch, **kw):
    return api.eval_config(model, chip, S, "decode", cp, tp=tp, dp=dp, batch=batch, **kw)


def _build(cfg, tile: bool = True) -> GraphBuilder:
    lay = cfg.layout()
    b = GraphBuilder(cfg.chip, cfg.cluster, lay.n_chips)
    emit_decode(b, cfg.model, lay, tile=tile)
    b.flush()
    return b


def _short(name: str, layers: int):
    return truncated(api.eval_config(name, "h200", 1024, "decode", 1).model, layers)


CASES = [
    # model layers, chip, S, cp, tp, dp, batch
    ("deepseek-v3", 5, "h200", 3001, 2, 2, 2, 5),      # uneven batch over DP, CP inside
    ("deepseek-v3", 5, "h200", 4096, 1, 1, 4, 4),      # pure DP, one chip per DP rank
    ("qwen3-235b-a22b", 3, "h100-sxm", 2048, 1, 4, 3, 7),
    ("gpt-oss-20b", 4, "h100-sxm", 9000, 2, 2, 2, 4),  # windows on the homes beside pass-Q
]


def _case_cfg(case):
    name, layers, chip, S, cp, tp, dp, batch = case
    return _cfg(_short(name, layers), chip, S, cp, tp=tp, dp=dp, batch=batch)


def _ids(case) -> str:
    return f"{case[0]}-S{case[3]}-dp{case[6]}-cp{case[4]}-tp{case[5]}-b{case[7]}"


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_attention_traffic_stays_inside_each_dp_rank(case):
    cfg = _case_cfg(case)
    lay = cfg.layout()
    b = _build(cfg)
    group = np.arange(lay.n_chips) // lay.group_chips
    kinds = np.asarray(b.kind)
    attention = np.isin(kinds, ops.DECODE_CP_KINDS)
    src, dst = b.chip_of[attention], b.peer[attention]
    assert np.array_equal(group[src], group[dst])
    if lay.cp == 1:
        assert not attention.any()   # each sequence's KV whole on its chip: nothing moves
    else:
        assert attention.any()


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_moe_all_to_all_carries_every_dp_ranks_tokens_over_the_whole_pool(case):
    cfg = _case_cfg(case)
    m, lay = cfg.model, cfg.layout()
    if m.moe is None:
        pytest.skip("a dense model has no all-to-all")
    b = _build(cfg, tile=False)
    kinds = np.asarray(b.kind)
    layers = np.asarray(b.layer)
    moe_layer = next(j for j in range(m.num_hidden_layers) if m.is_moe_layer(j))
    sel = (kinds == ops.MOE_DISPATCH) & (layers == moe_layer)
    slot = dispatch_bytes_per_slot(m, lay)
    # what crosses chips: whole slots, never more than every sequence's top-k (a chip's slots
    # for its own experts stay; test_dispatch_slots_are_conserved_exactly counts those)
    total_slots = lay.batch * m.moe.num_experts_per_tok
    sent = int(b.graph.nbytes[np.flatnonzero(sel)].sum())
    assert sent % slot == 0
    assert 0 < sent // slot <= total_slots
    # the receivers span DP ranks: the experts are over every chip, not the sender's group
    dst = b.peer[sel]
    groups = set((dst // lay.group_chips).tolist())
    assert groups == set(range(lay.dp))


def test_dispatch_slots_are_conserved_exactly():
    # TP 1, so every home chip's tokens are its sequences: slots sent to other chips plus the
    # slots a chip keeps for its own experts = batch x top_k.
    m = _short("deepseek-v3", 5)
    for dp, cp, batch in ((4, 1, 4), (2, 2, 6), (3, 1, 7)):
        cfg = _cfg(m, "h200", 2048, cp, tp=1, dp=dp, batch=batch)
        lay = cfg.layout()
        b = _build(cfg, tile=False)
        kinds = np.asarray(b.kind)
        sel = (kinds == ops.MOE_DISPATCH) & (np.asarray(b.layer) == 3)
        slot = dispatch_bytes_per_slot(m, lay)
        crossed = int(b.graph.nbytes[np.flatnonzero(sel)].sum()) // slot
        # uniform routing keeps 1 / n of a chip's slots (rounded as route_matrix rounds); a
        # home's tokens are its DP rank's sequences with home there (k mod cp)
        homes = np.concatenate([[len(range(h, g.batch, g.cp)) for h in range(g.cp)]
                                for g in lay.dp_groups()]).astype(np.int64)
        assert homes.sum() == batch
        kept = int(np.trace(route_matrix(homes * m.moe.num_experts_per_tok, lay.n_chips)))
        assert crossed + kept == batch * m.moe.num_experts_per_tok


def test_comm_closed_form_equals_simulated_bytes_with_dp():
    m = _short("deepseek-v3", 5)
    for dp, cp, batch in ((2, 2, 5), (2, 3, 4), (4, 1, 8)):
        r, _ = evaluate(_cfg(m, "h200", 3001, cp, tp=2, dp=dp, batch=batch))
        assert r.comm is not None
        assert r.comm.simulated_bytes == r.comm.analytic_bytes
        assert r.dp == dp and r.chips == dp * cp * 2


def test_a_chip_holds_its_dp_ranks_sequences_kv():
    m = _short("deepseek-v3", 5)
    S = 8192
    whole = _cfg(m, "h200", S, 1, tp=1, dp=1, batch=1).layout()
    one_sequence = kv_bytes_by_rank(m, whole)[0]
    lay = _cfg(m, "h200", S, 1, tp=1, dp=3, batch=7).layout()   # 3, 2, 2 sequences
    assert kv_bytes_by_rank(m, lay) == [3 * one_sequence, 2 * one_sequence, 2 * one_sequence]
    cp = _cfg(m, "h200", S, 2, tp=1, dp=2, batch=4).layout()    # 2 each, halved over CP
    by_rank = kv_bytes_by_rank(m, cp)
    assert len(by_rank) == 4 and sum(by_rank) == 4 * one_sequence


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_dp_graph_tiles_and_runs_the_same_in_both_kernels(case):
    _assert_tiles_and_runs_alike(_case_cfg(case), _build)


def _assert_tiles_and_runs_alike(cfg, build) -> None:
    """The tiled graph equals the written-out one, and both kernels run it alike."""
    tiled, written = build(cfg, True), build(cfg, False)
    g, h = tiled.graph, written.graph
    assert g.n_tasks == h.n_tasks
    for name in ("duration_ns", "tail_ns", "nbytes", "res_ptr", "res_idx"):
        assert np.array_equal(getattr(g, name), getattr(h, name)), name
    assert tiled.run() == build(cfg, True).run(kernel="reference")


def test_dp_one_is_the_layout_it_was():
    m = _short("deepseek-v3", 5)
    cfg = _cfg(m, "h200", 2048, 2, tp=2, dp=1, batch=3)
    assert "dp" not in cfg.key_fields()
    assert "dp" in _cfg(m, "h200", 2048, 2, tp=2, dp=3, batch=3).key_fields()


def test_mtp_drafts_run_per_dp_rank():
    m = DEEPSEEK_V4_FLASH.first_layers(6)
    plain, _ = evaluate(_cfg(m, "b200", 4096, 1, tp=1, dp=2, batch=2))
    drafted, _ = evaluate(_cfg(m, "b200", 4096, 1, tp=1, dp=2, batch=2, mtp_speculation=True))
    assert plain.tpot_s is not None and drafted.tpot_s is not None
    assert drafted.tokens_per_step > 1.0


@pytest.mark.parametrize("kw, field", [
    (dict(phase="decode", dp=4, batch=2), "dp"),
    (dict(phase="prefill", dp=3, batch=2), "dp"),
    (dict(phase="decode", dp=2, batch=2, pp=2), "dp"),
])
def test_bad_dp_is_refused_with_its_field(kw, field):
    phase = kw.pop("phase")
    with pytest.raises(UserInputError) as err:
        api.eval_config("deepseek-v3", "h200", 4096, phase, 1, **kw)
    assert err.value.field == field


@st.composite
def dp_configs(draw: st.DrawFn):
    name = draw(st.sampled_from(["deepseek-v3", "qwen3-235b-a22b", "llama3.1-8b"]))
    m = _short(name, min_layers(model(name)) + draw(st.integers(0, 1)))
    tp = draw(st.sampled_from([t for t in valid_tps(m, (1, 2, 4)) if t <= 4]))
    dp = draw(st.integers(1, 4))
    cp = draw(st.sampled_from([c for c in (1, 2, 3) if dp * c * tp <= 16]))
    batch = dp + draw(st.integers(0, 5))
    S = draw(st.integers(1, 4096))
    return _cfg(m, MODEL_CHIP[name], S, cp, tp=tp, dp=dp, batch=batch)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dp_configs())
@example(_cfg(_short("deepseek-v3", 4), "sg2262", 7, 3, tp=1, dp=4, batch=5))
def test_dp_pools_conserve_their_bytes_and_keep_attention_inside_each_dp_rank(cfg):
    m, lay = cfg.model, cfg.layout()
    r, _ = evaluate(cfg)
    assert r.comm is not None and r.comm.simulated_bytes == r.comm.analytic_bytes
    b = _build(cfg, tile=False)
    kinds = np.asarray(b.kind)
    group = np.arange(lay.n_chips) // lay.group_chips
    attention = np.isin(kinds, ops.DECODE_CP_KINDS)
    assert np.array_equal(group[b.chip_of[attention]], group[b.peer[attention]])
    if m.moe is not None:
        layer = m.moe.first_k_dense_replace
        sel = (kinds == ops.MOE_DISPATCH) & (np.asarray(b.layer) == layer)
        slot = dispatch_bytes_per_slot(m, lay)
        tokens = np.zeros(lay.n_chips, np.int64)
        for g, sub in enumerate(lay.dp_groups()):
            for h in range(sub.cp):
                seqs = len(range(h, sub.batch, sub.cp))
                first = (g * lay.cp + h) * lay.tp
                tokens[first:first + lay.tp] = split_even(seqs, lay.tp)
        kept = int(np.trace(route_matrix(tokens * m.moe.num_experts_per_tok, lay.n_chips)))
        crossed = int(b.graph.nbytes[np.flatnonzero(sel)].sum())
        assert crossed % slot == 0
        assert crossed // slot + kept == lay.batch * m.moe.num_experts_per_tok


# -- prefill: several requests prefilled at once, one per DP rank's CP ring ------------------

PREFILL_CASES = [
    # model layers, chip, S, cp, tp, dp, batch, policy
    ("deepseek-v3", 5, "h200", 3001, 2, 2, 2, 3, {}),
    ("qwen3-235b-a22b", 3, "h100-sxm", 2048, 3, 1, 2, 2, {}),
    ("gpt-oss-20b", 4, "h100-sxm", 9000, 2, 1, 3, 4, {}),   # halo beside pass-KV
    ("deepseek-v3", 5, "h200", 8192, 2, 1, 2, 2, {"prefill_chunk": "2K"}),
    ("llama3.1-8b", 2, "h100-sxm", 4096, 2, 2, 2, 2, {"prefill_ring": "pass-q",
                                                      "cached": 3000}),
]


def _prefill_cfg(case):
    name, layers, chip, S, cp, tp, dp, batch, kw = case
    return api.eval_config(_short(name, layers), chip, S, "prefill", cp, tp=tp, dp=dp,
                           batch=batch, **kw)


def _build_prefill(cfg, tile: bool = True) -> GraphBuilder:
    lay = cfg.layout()
    b = GraphBuilder(cfg.chip, cfg.cluster, lay.n_chips)
    emit_prefill(b, cfg.model, lay, tile=tile)
    b.flush()
    return b


@pytest.mark.parametrize("case", PREFILL_CASES, ids=lambda c: f"{c[0]}-dp{c[6]}-cp{c[4]}")
def test_a_dp_prefill_rings_inside_each_dp_rank_and_conserves_its_bytes(case):
    cfg = _prefill_cfg(case)
    lay = cfg.layout()
    b = _build_prefill(cfg)
    group = np.arange(lay.n_chips) // lay.group_chips
    ring = np.isin(np.asarray(b.kind), ops.PREFILL_CP_KINDS)
    assert ring.any()
    assert np.array_equal(group[b.chip_of[ring]], group[b.peer[ring]])
    r, _ = evaluate(cfg)
    assert r.comm is not None and r.comm.simulated_bytes == r.comm.analytic_bytes
    # as many ring bytes as the DP ranks' own prefills of their sequences alone
    alone = sum(evaluate(replace(cfg, dp=1, batch=sub.batch))[0].comm.simulated_bytes
                for sub in lay.dp_groups())
    assert r.comm.simulated_bytes == alone


@pytest.mark.parametrize("case", PREFILL_CASES, ids=lambda c: f"{c[0]}-dp{c[6]}-cp{c[4]}")
def test_a_dp_prefill_tiles_and_runs_the_same_in_both_kernels(case):
    _assert_tiles_and_runs_alike(_prefill_cfg(case), _build_prefill)


def test_a_dp_prefill_holds_each_dp_ranks_kv():
    m = _short("deepseek-v3", 5)
    lay = api.eval_config(m, "h200", 4096, "prefill", 1, dp=3, batch=4).layout()
    one = api.eval_config(m, "h200", 4096, "prefill", 1, batch=1).layout()
    two = api.eval_config(m, "h200", 4096, "prefill", 1, batch=2).layout()
    assert kv_bytes_by_rank(m, lay) == [kv_bytes_by_rank(m, two)[0],
                                        kv_bytes_by_rank(m, one)[0],
                                        kv_bytes_by_rank(m, one)[0]]


@pytest.mark.parametrize(("name", "layers", "chip", "dp_p", "tp_d", "dp_d", "batch"), [
    ("deepseek-v3", 5, "h200", 2, 2, 3, 5),       # shares cross: [3, 2] -> [2, 2, 1]
    ("gpt-oss-20b", 4, "h100-sxm", 3, 2, 1, 3),   # windows beside full layers, to one rank
    ("qwen3-next-80b-a3b", 4, "h100-sxm", 2, 1, 2, 4),   # linear states, rank to rank
])
def test_a_dp_prefill_hands_each_sequence_from_its_own_dp_rank(name, layers, chip, dp_p,
                                                                tp_d, dp_d, batch):
    """Each decode chip receives what it keeps, and each prefill DP rank sends exactly its
    own sequences' share of the decode pool's KV (every sequence is the same length, so the
    same bytes), from its own chips; the graph simulates."""
    m = _short(name, layers)
    cfg = api.eval_config(m, chip, 6000, "prefill", 2, tp=2, dp=dp_p, batch=batch,
                          handoff_to=2, handoff_tp=tp_d, handoff_dp=dp_d)
    lay, lay_d = cfg.layout(), cfg.handoff_layout()
    assert lay_d is not None
    b = build_graph(cfg, lay, None, lay_d=lay_d)
    moving = np.flatnonzero(np.asarray(b.kind) == "kv_handoff")
    first = cfg.graph_cluster().decode_start(lay.n_chips, False)
    got = np.bincount(b.peer[moving].astype(np.int64) - first, weights=b.graph.nbytes[moving],
                      minlength=lay_d.n_chips)
    assert np.array_equal(got.astype(np.int64), np.repeat(kv_bytes_by_rank(m, lay_d),
                                                          lay_d.tp))
    total = int(got.sum())
    sent = np.bincount(b.chip_of[moving].astype(np.int64) // lay.group_chips,
                       weights=b.graph.nbytes[moving], minlength=lay.dp).astype(np.int64)
    assert len(sent) == dp_p
    assert [int(x) * batch for x in sent] == [share * total for share in lay.dp_batches()]
    r, _ = evaluate(cfg)
    assert r.simulated and r.handoff is not None
    assert r.handoff.bytes_moved == r.handoff.decode_kv_bytes == total


@pytest.mark.parametrize(("name", "layers", "chip", "tp_d", "dp", "batch"), [
    ("deepseek-v3", 5, "h200", 2, 3, 5),          # MLA: the latent on every TP chip
    ("gpt-oss-20b", 4, "h100-sxm", 2, 2, 3),      # windows to the homes beside full layers
    ("qwen3-next-80b-a3b", 4, "h100-sxm", 1, 2, 4),   # linear states to the homes
])
def test_a_handoff_to_a_dp_pool_lands_each_sequence_on_its_own_dp_rank(name, layers, chip,
                                                                       tp_d, dp, batch):
    m = _short(name, layers)
    cfg = api.eval_config(m, chip, 6000, "prefill", 2, tp=2, batch=batch, handoff_to=2,
                          handoff_tp=tp_d, handoff_dp=dp)
    lay, lay_d = cfg.layout(), cfg.handoff_layout()
    assert lay_d is not None and lay_d.dp == dp
    b = build_graph(cfg, lay, None, lay_d=lay_d)
    moving = np.asarray(b.kind) == "kv_handoff"
    first = cfg.graph_cluster().decode_start(lay.n_chips, False)
    got = np.bincount(b.peer[moving].astype(np.int64) - first,
                      weights=b.graph.nbytes[np.flatnonzero(moving)],
                      minlength=lay_d.n_chips)
    want = np.repeat(kv_bytes_by_rank(m, lay_d), lay_d.tp)
    assert np.array_equal(got.astype(np.int64), want)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(["deepseek-v3", "gpt-oss-20b", "qwen3-next-80b-a3b"]),
       dp_p=st.integers(1, 4), dp_d=st.integers(1, 4), extra=st.integers(0, 5),
       cp_p=st.integers(1, 3), cp_d=st.integers(1, 3), tp_d=st.sampled_from([1, 2]))
@example(name="gpt-oss-20b", dp_p=3, dp_d=2, extra=2, cp_p=2, cp_d=3, tp_d=2)
def test_every_dp_handoff_lands_what_each_chip_keeps_from_its_own_rank(
        name, dp_p, dp_d, extra, cp_p, cp_d, tp_d):
    """Any DP ranks on either side: each decode chip receives exactly what it keeps, and each
    prefill DP rank sends its own sequences' share of it (integer bytes, none lost)."""
    from ctxplan.mapping.handoff import handoff_plan

    m = _short(name, {"deepseek-v3": 5}.get(name, 4))
    batch = max(dp_p, dp_d) + extra
    cfg = api.eval_config(m, "h200", 5000, "prefill", cp_p, tp=2,
                          dp=dp_p, batch=batch, handoff_to=cp_d, handoff_tp=tp_d,
                          handoff_dp=dp_d)
    lay, lay_d = cfg.layout(), cfg.handoff_layout()
    assert lay_d is not None
    plan = handoff_plan(m, lay, lay_d)
    got = np.zeros(lay_d.n_chips, np.int64)
    sent = np.zeros(lay.dp, np.int64)
    for j in range(m.num_hidden_layers):
        t = plan.layer(j)
        np.add.at(got, t.dst, t.nbytes)
        np.add.at(sent, t.src // lay.group_chips, t.nbytes)
    assert np.array_equal(got, np.repeat(kv_bytes_by_rank(m, lay_d), lay_d.tp))
    total = int(got.sum())
    assert [int(x) * batch for x in sent] == [share * total for share in lay.dp_batches()]
