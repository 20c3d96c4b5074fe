"""The shapes ``capacity`` searches (serve/shapes.py): the rule, the bound's premises on the
simulator, and the pruned search against every pair simulated."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ctxplan import api
from ctxplan.evaluate import check_memory
from ctxplan.serve.capacity import _Pools, _search_pairs
from ctxplan.serve.instances import SimulatedDecode, max_batch, rate_bound
from ctxplan.serve.shapes import CUT, SEARCHED, candidate_pairs
from ctxplan.solve import EvalCache, solve


@pytest.mark.parametrize(("model", "chip", "context", "n_p", "tp_p", "n_d", "tp_d", "dp"), [
    ("llama3.1-8b", "h100-sxm", 8192, 2, 1, 1, 2, 1),        # dense, one host
    ("deepseek-v3", "sg2262", 131072, 7, 1, 6, 2, 1),        # MoE, MLA, TP on the decode side
    ("llama3.1-70b", "h100-sxm", 32768, 2, 8, 1, 8, 1),      # cross-host: 16 + 8 chips
    ("deepseek-v3", "h200", 32768, 1, 2, 1, 2, 4),           # a DP prefill: four requests
])
def test_a_handoff_never_shortens_the_prefill(model: str, chip: str, context: int, n_p: int,
                                              tp_p: int, n_d: int, tp_d: int, dp: int) -> None:
    """The bound's prefill premise: the pair's TTFT (prefill + the unhidden handoff) is never
    below the prefill alone, as simulated (a DP prefill's requests each to their own decode
    group, as capacity pairs them)."""
    req = api.solve_request(model, chip, context, ttft_max="600s")
    cache = EvalCache()
    alone, _ = cache.evaluate(req.eval_config("prefill", req.kv_tiers[0], n_p, tp_p, dp, dp=dp))
    pair, _ = cache.evaluate(req.pair_config(req.kv_tiers[0], n_p, tp_p, n_d, tp_d,
                                             prefill_dp=dp))
    assert alone.latency_s is not None and pair.latency_s is not None
    assert pair.handoff is not None and pair.handoff.bytes_moved > 0
    assert pair.latency_s >= alone.latency_s


@pytest.mark.parametrize(("model", "chip", "context", "cp", "tp", "batches"), [
    ("llama3.1-8b", "h100-sxm", 8192, 1, 1, (1, 2, 7, 32)),
    ("deepseek-v3", "sg2262", 32768, 7, 1, (1, 2, 5, 12)),
    ("qwen3-235b-a22b", "h100-sxm", 32768, 2, 8, (1, 3, 8)),   # MoE over two hosts
])
def test_a_larger_batch_or_context_never_steps_faster(model: str, chip: str, context: int,
                                                      cp: int, tp: int,
                                                      batches: tuple[int, ...]) -> None:
    """The bound's decode premise: step(b, n) >= step(1, shortest) for every b and n >=
    shortest, as simulated."""
    req = api.solve_request(model, chip, context)
    decode = SimulatedDecode(req.eval_config("decode", req.kv_tiers[0], cp, tp), EvalCache())
    for n in (context // 2, context):
        steps = [decode.step_s(b, n) for b in batches]
        assert steps == sorted(steps), (n, steps)
    assert decode.step_s(1, context // 2) <= decode.step_s(1, context)


@pytest.mark.parametrize(("model", "chip", "context", "cp", "tp", "limit_s"), [
    ("llama3.1-8b", "h100-sxm", 8192, 1, 1, 0.012),      # dense: TPOT decides
    ("llama3.1-8b", "h100-sxm", 32768, 1, 1, 1.0),       # memory decides (13 sequences)
    ("deepseek-v3", "sg2262", 32768, 7, 1, 0.060),       # MoE, MLA
])
def test_the_largest_batch_by_bisection_is_the_scans(model: str, chip: str, context: int,
                                                     cp: int, tp: int, limit_s: float) -> None:
    """max_batch doubles and bisects; a scan upward from 1 (what it replaced) stops at the same
    batch, and the rate bound from the batches it simulated is never below the exact most
    sequences per second over every batch up to it."""
    req = api.solve_request(model, chip, context)
    config = req.eval_config("decode", req.kv_tiers[0], cp, tp)
    fast, scan = SimulatedDecode(config, EvalCache()), SimulatedDecode(config, EvalCache())
    got = max_batch(fast, context, limit_s, 64)
    b = 1
    while b < 64 and scan.fits(b + 1, context) and scan.step_s(b + 1, context) <= limit_s:
        b += 1
    assert got == b and 8 <= got < 64
    assert len(fast.evaluated) < len(scan.evaluated)
    exact = max(k / scan.step_s(k, context) for k in range(1, got + 1))
    assert rate_bound(fast, context, got) >= exact


def test_the_rule_offers_each_tps_answer_and_its_multiples() -> None:
    req = api.capacity_request("deepseek-v3", "sg2262", rates="0.5/s", context_mix="128K",
                               ttft_max="60s", decode_tp=1, prefill_tp=1)
    cache = EvalCache()
    best = solve(req.solve, cache).best
    assert best is not None
    pairs = candidate_pairs(req.solve, best, cache)
    assert pairs[0].solved and sum(p.solved for p in pairs) == 1
    prefill = sorted({p.prefill.cp for p in pairs if p.prefill.dp == 1})
    decode = sorted({p.decode.cp for p in pairs if p.decode.dp == 1})
    assert best.prefill.answer is not None and best.decode.answer is not None
    assert prefill == [best.prefill.answer, 2 * best.prefill.answer]
    # The TP's one-sequence answer (--batch auto may have given its chips to DP ranks)
    n_one = best.decode.answer * best.decode.dp
    assert decode == [n_one * k for k in (1, 2, 4)]
    # DP attention (searched by default): 2, 4 and 8 DP ranks of the TP's answer each, and
    # the solve's own pool
    dp = sorted({(p.decode.dp, p.decode.cp) for p in pairs if p.decode.dp > 1})
    solved = {(best.decode.dp, best.decode.answer)} - {(1, n_one)}
    assert dp == sorted({(k, n_one) for k in (2, 4, 8)} | solved)
    # prefill DP: 2, 4 and 8 DP ranks of the TP's Np, and of the fewest CP ranks below it
    # that hold one request per DP rank
    p_dp = sorted({(p.prefill.dp, p.prefill.cp) for p in pairs if p.prefill.dp > 1})
    assert {(k, best.prefill.answer) for k in (2, 4, 8)} <= set(p_dp)
    for k, cp in p_dp:
        assert cp <= best.prefill.answer
        if cp < best.prefill.answer:
            cfg = req.solve.eval_config("prefill", best.kv_tier, cp, 1, k, dp=k)
            assert check_memory(cfg).fits
            if cp > 1:
                below = req.solve.eval_config("prefill", best.kv_tier, cp - 1, 1, k, dp=k)
                assert not check_memory(below).fits
    assert len(pairs) == (len(prefill) + len(p_dp)) * (len(decode) + len(dp))
    # --decode-dp 1 --prefill-dp 1: the CP x TP shapes alone
    alone = replace(req.solve, decode_dp=1, prefill_dp=1)
    best_alone = solve(alone, cache).best
    assert best_alone is not None and best_alone.decode.dp == 1
    one = candidate_pairs(alone, best_alone, cache)
    assert {p.decode.dp for p in one} == {p.prefill.dp for p in one} == {1}
    assert len(one) == len(prefill) * len(decode)


def test_the_pruned_search_chooses_what_simulating_every_pair_chooses() -> None:
    """Every pair simulated against the bound's cuts: the same pools at every rate, every
    bound below what its pair reaches, every cut pair unable to win."""
    req = api.capacity_request("deepseek-v3", "sg2262", rates="0.05/s,0.3/s,0.8/s",
                               context_mix="128K", ttft_max="60s", decode_tp=1, prefill_tp=1,
                               requests=300)
    cache = EvalCache()
    best = solve(req.solve, cache).best
    assert best is not None
    req = replace(req, solve=req.solve.with_pp(best.prefill.pp, best.decode.pp))
    pairs = candidate_pairs(req.solve, best, cache)
    pruned, chosen = _search_pairs(_Pools(req, best.kv_tier, cache), pairs)
    every, reference = _search_pairs(_Pools(req, best.kv_tier, cache), pairs, prune=False)
    assert {r.status for r in every} == {SEARCHED}
    assert any(r.status == CUT for r in pruned)
    assert chosen == reference
    reached = {r.pair: r for r in every}
    for r in pruned:
        for k, bound in enumerate(r.bound_chips):
            got = reached[r.pair].chips[k]
            if got is not None:
                assert bound is not None and bound <= got
            if r.status == CUT:
                winner = chosen[k]
                assert winner is not None and winner.total_chips is not None
                assert bound is None or bound >= winner.total_chips


def test_points_name_their_shapes_and_a_fixed_tp_keeps_to_it() -> None:
    result = api.capacity("deepseek-v3", "sg2262", rates="0.2/s", context_mix="128K",
                          ttft_max="60s", decode_tp=1, prefill_tp=1, requests=300)
    point = result.points[0]
    assert point.prefill_shape is not None and point.decode_shape is not None
    assert point.prefill_shape.tp == point.decode_shape.tp == 1
    assert {s.pair.prefill.tp for s in result.shapes} == {1}
    assert point.total_chips == (point.prefill_instances or 0) * point.prefill_shape.chips \
        + (point.decode_instances or 0) * point.decode_shape.chips
    d = result.to_dict()
    assert d["points"][0]["decode_shape"] == {"cp": point.decode_shape.cp, "tp": 1, "pp": 1,
                                              "dp": point.decode_shape.dp,
                                              "chips": point.decode_shape.chips}
    assert len(d["shapes"]) == len(result.shapes)


def test_a_dp_instance_steps_a_small_batch_as_one_sequence_per_dp_rank() -> None:
    req = api.capacity_request("deepseek-v3", "h200", rates="1/s", context_mix="8K",
                               ttft_max="2s", decode_tp=2)
    cache = EvalCache()
    decode = SimulatedDecode(req.solve.eval_config("decode", "mla-fp8", 1, 2, dp=4), cache)
    assert decode.config(1, 8192).batch == 4 and decode.config(9, 8192).batch == 9
    assert decode.step_s(1, 8192) == decode.step_s(4, 8192) <= decode.step_s(8, 8192)


def test_searching_dp_never_needs_more_chips_than_cp_alone() -> None:
    common = dict(rates="0.05/s,0.5/s", context_mix="128K", ttft_max="60s", requests=300)
    searched = api.capacity("deepseek-v3", "sg2262", **common)
    alone = api.capacity("deepseek-v3", "sg2262", decode_dp=1, prefill_dp=1, **common)
    assert any(s.pair.decode.dp > 1 for s in searched.shapes)
    assert any(s.pair.prefill.dp > 1 for s in searched.shapes)
    assert all(s.pair.decode.dp == s.pair.prefill.dp == 1 for s in alone.shapes)
    for a, b in zip(searched.points, alone.points, strict=True):
        assert b.total_chips is not None
        assert a.total_chips is not None and a.total_chips <= b.total_chips
