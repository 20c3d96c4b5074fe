"""The 1M worked example: simulation budget, pruning by the wall, composition, cache, JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxplan import api
from ctxplan.api.search import solve_request
from ctxplan.solve import EvalCache, SolveResult
from ctxplan.solve.phase import pool_floor_chips

ARGS = ("deepseek-v3", "sg2262", "1M")


@pytest.fixture(scope="module")
def galloping() -> SolveResult:
    # default: galloping, both MLA tiers, TP searched, bound = the whole cluster
    return api.solve(*ARGS)


@pytest.fixture(scope="module")
def scan() -> SolveResult:
    return api.solve(*ARGS, strategy="scan", max_chips=64)


def _walls(plan: Any) -> dict[tuple[int, int], int | None]:
    """The capacity wall of each (PP, TP) the pool tried."""
    return {(o.pp, o.tp): o.n_cap for o in plan.tp_options}


def test_budget_galloping_makes_tens_of_simulations_scan_far_more(
    galloping: SolveResult, scan: SolveResult
) -> None:
    print(f"\n1M deepseek-v3 / sg2262, tiers {[t.kv_tier for t in galloping.tiers]}: "
          f"galloping (bound {galloping.max_chips}) sim_calls = {galloping.sim_calls}; "
          f"scan (bound {scan.max_chips}) sim_calls = {scan.sim_calls}")
    assert [t.kv_tier for t in galloping.tiers] == ["mla-bf16", "mla-fp8"]
    assert galloping.sim_calls <= 60     # issue 13's budget with TP searched, both tiers
    assert scan.sim_calls >= 5 * galloping.sim_calls
    assert galloping.total_chips == scan.total_chips
    assert galloping.best is not None and scan.best is not None
    assert galloping.best.kv_tier == scan.best.kv_tier
    assert galloping.best.decode.answer == scan.best.decode.answer


def test_the_wall_prunes_no_candidate_below_it_is_simulated(
    galloping: SolveResult, scan: SolveResult
) -> None:
    for result in (galloping, scan):
        for tier in result.tiers:
            for plan in (tier.prefill, tier.decode):
                if plan.cut_reason and not plan.tp_options:
                    continue   # a tier cut by the best plan before this pool was searched
                walls = _walls(plan)
                assert plan.n_cap is not None and plan.n_cap == walls[plan.pp, plan.tp]
                assert walls[1, 1] is not None and walls[1, 1] > 1
                for c in plan.candidates:
                    cap = walls[c.pp, c.tp]
                    if cap is None or c.n < cap:
                        assert not c.simulated and c.cut_by == "capacity wall" and not c.fits
                    if c.simulated:
                        assert cap is not None and c.n >= cap and c.fits
                # Memory checks below the wall were made and recorded.
                assert any(c.cut_by for c in plan.candidates)


def test_the_answer_meets_the_sla_and_composes_per_tier(galloping: SolveResult,
                                                        scan: SolveResult) -> None:
    best = galloping.best
    assert best is not None and galloping.feasible
    for tier in galloping.tiers:
        d, p = tier.decode, tier.prefill
        if not tier.feasible:
            # Cut, not solved: the fewest chips its prefill could have (its capacity walls)
            # leave its decode pool less than it needs under the best plan, so its decode
            # search stopped there and nothing of its prefill was simulated.
            assert d.cut_reason and "cannot beat the best plan" in d.cut_reason
            assert p.cut_reason and "cannot beat the best plan" in p.cut_reason
            assert d.chips is None and not any(c.simulated for c in p.candidates)
            req = solve_request(*ARGS).validated()
            kv = next(t for t in req.kv_tiers
                      if req.eval_config("decode", t, 1, 1).kv()[0] == tier.kv_tier)
            floor = pool_floor_chips(req, "prefill", kv)
            assert floor is not None
            cap = (galloping.total_chips or 0) - floor
            assert all(c.n * c.tp * c.pp <= cap for c in d.candidates if c.simulated)
            # ... and the scan, which cuts nothing, finds that tier no better than the best
            other = next(t for t in scan.tiers if t.kv_tier == tier.kv_tier)
            assert other.total_chips is None or other.total_chips >= (galloping.total_chips or 0)
            continue
        assert d.latency_s is not None and d.latency_s <= galloping.sla.tpot_max_s
        assert p.latency_s is not None and p.latency_s > 0   # simulated once for its TTFT
        assert p.answer == p.n_cap                           # no TTFT SLA: the wall
        assert p.bound_by in ("capacity", "tp")
        assert tier.total_chips == (p.answer or 0) * p.tp + (d.answer or 0) * d.tp
    ranked = sorted(galloping.tiers, key=lambda t: t.rank())
    assert best is ranked[0]
    assert galloping.total_chips == min(t.total_chips or 10**9 for t in galloping.tiers)


def test_json_has_the_issue_keys_and_is_deterministic(galloping: SolveResult) -> None:
    d = galloping.to_dict()
    for key in ("context_length", "model", "chip", "feasible", "total_chips", "kv_tier",
                "prefill", "decode", "sla", "sim_calls", "candidates", "infeasible_reason"):
        assert key in d
    assert set(d["prefill"]) >= {"cp", "tp", "chips", "ttft_s"}
    assert set(d["decode"]) >= {"cp", "chips", "tpot_s", "tps_per_seq"}
    assert set(d["sla"]) >= {"tpot_max_s", "ttft_max_s", "tps_reading"}
    assert d["decode"]["tps_per_seq"] == pytest.approx(1 / d["decode"]["tpot_s"])
    for c in d["candidates"]:
        assert set(c) >= {"phase", "kv_tier", "n", "chips", "memory", "meets_sla", "simulated",
                          "cut_by", "why"}
        assert ("ttft_s" in c) == (c["phase"] == "prefill")
    again = api.solve(*ARGS).to_dict()
    assert json.dumps(again, sort_keys=False) == json.dumps(d, sort_keys=False)


def test_a_shared_cache_never_simulates_a_point_twice() -> None:
    cache = EvalCache()
    first = api.solve("deepseek-v3", "sg2262", "128K", cache=cache)
    second = api.solve("deepseek-v3", "sg2262", "128K", cache=cache)
    assert first.sim_calls > 0 and second.sim_calls == 0
    # one stored result per point evaluated; a point may have taken several simulations
    # (prefill_chunk auto: one pass over the memory, then chunks)
    assert second.cache_hits == len(cache.store)
    assert all(c.cache_hit for c in second.candidates if c.simulated)
    assert second.total_chips == first.total_chips
    assert cache.sim_calls == first.sim_calls >= len(cache.store)
    assert cache.sim_calls == sum(r.simulations for r in cache.store.values())


def test_an_impossible_sla_is_infeasible_with_its_reason() -> None:
    r = api.solve("deepseek-v3", "sg2262", "8K", tpot_max="1us", max_chips=64)
    assert not r.feasible and r.best is None and r.total_chips is None
    assert "TPOT <= 1.000 us" in r.infeasible_reason
    assert "the fastest point tried" in r.infeasible_reason
    assert all(not t.feasible for t in r.tiers)
    assert not any(c.meets_sla for c in r.candidates if c.phase == "decode")


def test_per_batch_reading_multiplies_the_tpot_limit_by_the_batch() -> None:
    cache = EvalCache()
    opts = dict(batch=8, tpot_max="1ms", max_chips=8, cache=cache, kv_tiers="kv-bf16")
    seq = api.solve("llama3.1-8b", "h100-sxm", "8K", tps_reading="per-seq", **opts)
    batch = api.solve("llama3.1-8b", "h100-sxm", "8K", tps_reading="per-batch", **opts)
    assert seq.sla.tpot_limit_s(8) == pytest.approx(1e-3)
    assert batch.sla.tpot_limit_s(8) == pytest.approx(8e-3)
    for r, limit in ((seq, 1e-3), (batch, 8e-3)):
        for c in r.candidates:
            if c.phase == "decode" and c.latency_s is not None:
                assert c.meets_sla == (c.latency_s <= limit)
    assert not seq.feasible and batch.feasible   # batch-8 TPOT is a few ms
    d = batch.to_dict()["decode"]
    assert d["tps_per_batch"] == pytest.approx(8 * d["tps_per_seq"])


def test_tensor_parallel_pools_count_chips_as_n_times_tp() -> None:
    """A fixed TP (the flags) is the only degree tried."""
    r = api.solve("llama3.1-8b", "h100-sxm", "8K", prefill_tp=2, decode_tp=4, max_chips=16,
                  kv_tiers="kv-bf16")
    assert r.best is not None
    assert r.best.prefill.chips == 2 * (r.best.prefill.answer or 0)
    assert r.best.decode.chips == 4 * (r.best.decode.answer or 0)
    assert max(c.n for c in r.candidates if c.phase == "decode") <= 16 // 4


@pytest.mark.parametrize(("model", "chip", "context", "opts"), [
    ("llama3.1-70b", "h100-sxm", "1M", {}),
    ("deepseek-v3", "h200", "128K", {"ttft_max": "3s", "tpot_max": "50ms"}),
    ("llama3.1-8b", "h100-sxm", "128K", {"ttft_max": "1s", "max_chips": 32}),
])
def test_tiers_bounded_by_each_other_give_what_each_alone_gives(model, chip, context,
                                                                opts) -> None:
    """The cross-tier bounds (a tier's decode stops at the best total less its prefill's
    walls, its prefill at the best total less its decode) never change the answer: the
    fewest chips over the tiers solved each alone, and the best tier's pools."""
    both = api.solve(model, chip, context, **opts)
    alone = {t.kv_tier: api.solve(model, chip, context, kv_tiers=t.kv_tier, **opts)
             for t in both.tiers}
    totals = [r.total_chips for r in alone.values() if r.total_chips is not None]
    assert both.total_chips == (min(totals) if totals else None)
    if both.best is not None:
        own = alone[both.best.kv_tier].best
        assert own is not None and own.total_chips == both.best.total_chips
        assert (own.prefill.answer, own.prefill.tp, own.decode.answer, own.decode.tp) == \
            (both.best.prefill.answer, both.best.prefill.tp, both.best.decode.answer,
             both.best.decode.tp)
