"""The solver searches the pipeline depth per pool (docs/solver.md, "Pipeline stages per
pool")."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ctxplan import api
from ctxplan.errors import UserInputError
from ctxplan.solve import EvalCache
from ctxplan.solve.phase import solve_pool

SMALL = dict(max_chips=16, kv_tiers="kv-bf16", store=False, kv_handoff="off")
AUTO = dict(prefill_pp="auto", decode_pp="auto")


@pytest.mark.parametrize("kw", [
    dict(ttft_max="600ms", tpot_max="12ms"),
    dict(ttft_max="400ms", tpot_max="30ms", prefill_tp=1),
])
def test_the_search_agrees_with_a_full_scan_over_pp_cp_tp(kw):
    """Galloping with its bounds and the PP ceiling finds the same pools as simulating every
    (PP, CP, TP) candidate."""
    args = ("llama3.1-8b", "h100-sxm", "32K")
    fast = api.solve(*args, **SMALL, **AUTO, **kw)
    full = api.solve(*args, strategy="scan", **SMALL, **AUTO, **kw)
    assert fast.best is not None and full.best is not None
    for phase in ("prefill", "decode"):
        a, b = getattr(fast.best, phase), getattr(full.best, phase)
        assert a.chips == b.chips
        assert {c.pp for c in getattr(full.best, phase).candidates} >= {1, 2}
    assert fast.total_chips == full.total_chips
    assert fast.sim_calls < full.sim_calls


def test_every_candidate_and_option_carries_its_pp_and_the_answer_its_stages():
    r = api.solve("llama3.1-8b", "h100-sxm", "32K", ttft_max="300ms", **SMALL, **AUTO)
    d = r.to_dict()
    assert all("pp" in c for c in d["candidates"])
    assert {c["pp"] for c in d["candidates"]} >= {1, 2}
    for phase in ("prefill", "decode"):
        plan = d["tiers"][0][phase]
        assert plan["pp_searched"] is True
        assert all("pp" in o for o in plan["tp_options"])
        ans = d[phase]
        assert ans["chips"] == ans["pp"] * ans["cp"] * ans["tp"]
        if ans["pp"] > 1:
            assert len(ans["stages"]) == ans["pp"]


def test_a_fixed_pp_is_the_only_depth_searched():
    r = api.solve("llama3.1-8b", "h100-sxm", "32K", ttft_max="300ms", prefill_pp=2,
                  decode_pp=1, **SMALL)
    assert r.best is not None and r.best.prefill.pp == 2 and r.best.decode.pp == 1
    assert {c.pp for c in r.best.prefill.candidates} == {2}
    assert {c.pp for c in r.best.decode.candidates} == {1}


def test_the_decode_depth_is_searched_by_default_the_prefill_depth_when_asked():
    r = api.solve("llama3.1-8b", "h100-sxm", "32K", ttft_max="300ms", **SMALL)
    assert r.best is not None
    assert {c.pp for c in r.best.prefill.candidates} == {1}
    assert r.best.decode.pp_searched and not r.best.prefill.pp_searched
    search = r.to_dict()["search"]
    assert search["prefill_pp"] == 1 and search["decode_pp"] == "auto"


def test_a_decode_pipeline_takes_fewer_chips_where_cp_ranks_each_hold_every_layer():
    """DeepSeek-V3 at 1M on H200: a CP rank holds every layer's attention weights, a stage only
    its own layers', so PP 2 x Nd 3 holds the weights and the KV on 6 chips where CP needs 7
    (docs/solver.md, "Decode auto by default, prefill 1")."""
    req = api.solve_request("deepseek-v3", "h200", "1M", tpot_max="50ms",
                            kv_tiers="mla-fp8").validated()
    tier = req.kv_tiers[0]
    cache = EvalCache()
    auto = solve_pool(req, "decode", tier, cache)
    one = solve_pool(replace(req, decode_pp=1), "decode", tier, cache)
    assert auto.pp_searched and {c.pp for c in auto.candidates} >= {1, 2}
    assert one.chips is not None and auto.chips is not None and auto.chips < one.chips
    assert auto.pp > 1 and auto.latency_s is not None and auto.latency_s <= 0.050


def test_a_pp_deeper_than_the_layers_is_refused_naming_the_field():
    with pytest.raises(UserInputError, match="prefill_pp"):
        api.solve("llama3.1-8b", "h100-sxm", "32K", prefill_pp=64, **SMALL)
