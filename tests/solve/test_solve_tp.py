"""TP per pool as a search dimension (issue 13): the pruned search over (TP, N) returns what a
full scan over (TP, N) defines, the fixed-TP message names the TP that fits, what binds."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxplan import api
from ctxplan.solve import Candidate, EvalCache, PhasePlan, SolveResult

# (model, chip, context, phase, options): small enough to scan every (TP, N) in seconds. The
# per-pool search is the subject: no pair check with the KV handoff after it
# (tests/solve/test_solve_handoff.py covers that).
# The TP x N search is the subject: no handoff pair check, one decode stage (the depth search
# is tested apart)
_POOL_ONLY = {"kv_handoff": "off", "decode_pp": 1}
MATRIX: list[tuple[str, str, str, str, dict[str, Any]]] = [
    ("llama3.1-8b", "h100-sxm", "32K", "prefill", {"max_chips": 16, **_POOL_ONLY}),
    ("llama3.1-8b", "h100-sxm", "32K", "decode", {"max_chips": 16, **_POOL_ONLY}),
    ("deepseek-v3", "sg2262", "8K", "decode", {"max_chips": 24, **_POOL_ONLY}),
    ("llama3.1-70b", "h100-sxm", "128K", "decode", {"max_chips": 16, **_POOL_ONLY}),
]


def seconds(x: float) -> str:
    return f"{x!r}s"


def _plan(r: SolveResult, phase: str, tier: int = 0) -> PhasePlan:
    return r.tiers[tier].prefill if phase == "prefill" else r.tiers[tier].decode


def definition(cands: tuple[Candidate, ...], limit: float) -> tuple[int, int] | None:
    """The (TP, N) the spec's definition, extended to TP, picks from a full scan: the fewest
    chips among points meeting the limit; ties: lower latency, then smaller TP."""
    passing = [(c.n * c.tp, c.latency_s, c.tp, c.n) for c in cands
               if c.simulated and c.latency_s is not None and c.latency_s <= limit]
    if not passing:
        return None
    _, _, tp, n = min(passing)
    return tp, n


_SCANS: dict[int, tuple[SolveResult, EvalCache]] = {}


def _scan(i: int) -> tuple[SolveResult, EvalCache]:
    """Every (TP, N) of matrix entry i simulated once (a limit nothing meets makes the scan
    simulate every candidate, prefill included), kept for the module."""
    if i not in _SCANS:
        model, chip, context, phase, opts = MATRIX[i]
        cache = EvalCache()
        flag = "ttft_max" if phase == "prefill" else "tpot_max"
        scan = api.solve(model, chip, context, strategy="scan", cache=cache,
                         kv_tiers=_tier(model), **{flag: "1e-12s"}, **opts)
        _SCANS[i] = (scan, cache)
    return _SCANS[i]


def _tier(model: str) -> str:
    return "mla-bf16" if model == "deepseek-v3" else "kv-bf16"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(i=st.integers(0, len(MATRIX) - 1), pick=st.floats(0, 1), mid=st.booleans(),
       strategy=st.sampled_from(["galloping", "linear"]))
def test_searching_tp_agrees_with_a_full_scan_over_tp_and_n(i: int, pick: float, mid: bool,
                                                             strategy: str) -> None:
    model, chip, context, phase, opts = MATRIX[i]
    scan, cache = _scan(i)
    cands = _plan(scan, phase).candidates
    assert len({c.tp for c in cands if c.simulated}) >= 2, "the matrix must try several TPs"
    values = sorted({c.latency_s for c in cands if c.simulated and c.latency_s is not None})
    k = min(int(pick * len(values)), len(values) - 1)
    limit = (values[k] + values[k + 1]) / 2 if mid and k + 1 < len(values) else values[k]
    flag = "ttft_max" if phase == "prefill" else "tpot_max"
    r = api.solve(model, chip, context, strategy=strategy, cache=cache, kv_tiers=_tier(model),
                  **{flag: seconds(limit)}, **opts)
    assert r.sim_calls == 0, "the scan already simulated every (TP, N)"
    plan = _plan(r, phase)
    got = None if plan.answer is None else (plan.tp, plan.answer)
    assert got == definition(cands, limit), (MATRIX[i][:4], limit, plan.tp_options)
    # Every TP degree is on record, with what became of it.
    assert {o.tp for o in plan.tp_options} == {1, 2, 4, 8}
    assert sum(o.status == "chosen" for o in plan.tp_options) == (got is not None)


def test_tp_options_are_ordered_and_pruned_by_the_best_pool() -> None:
    """A TP whose wall alone needs more chips than the best pool is never simulated."""
    r = api.solve("llama3.1-70b", "h100-sxm", "128K", kv_tiers="kv-bf16", max_chips=64,
                  decode_pp=1)
    decode = r.tiers[0].decode
    best = decode.chips
    assert best is not None
    for o in decode.tp_options:
        if o.status == "cut":
            assert not any(c.simulated for c in decode.candidates if c.tp == o.tp
                           and c.n * c.tp > best)
    simulated_tps = {c.tp for c in decode.candidates if c.simulated}
    assert decode.tp in simulated_tps


def test_the_70b_million_token_case_needs_tp_and_fits_in_56_chips() -> None:
    """Issue 13's case: with no TP flag, feasible in at most 56 chips (the user found 56 by
    hand), with TTFT <= 60 s and TPOT <= 50 ms; what binds is named per pool."""
    r = api.solve("llama3.1-70b", "h100-sxm", "1M", ttft_max="60s", tpot_max="50ms")
    assert r.feasible and r.total_chips is not None and r.total_chips <= 56
    assert r.best is not None
    p, d = r.best.prefill, r.best.decode
    assert p.tp > 1 and d.tp > 1
    assert p.latency_s is not None and p.latency_s <= 60
    assert d.latency_s is not None and d.latency_s <= 0.050
    assert p.bound_by == "ttft"
    assert d.bound_by in ("tp", "capacity", "tpot")
    j = r.to_dict()
    assert j["prefill"]["bound_by"] == p.bound_by and j["decode"]["bound_by"] == d.bound_by
    assert j["prefill"]["tp"] == p.tp and j["decode"]["tp"] == d.tp
    # The answer's predecessor at the chosen TP was simulated and missed the TTFT target.
    below = [c for c in p.candidates if c.tp == p.tp and c.n == (p.answer or 0) - 1]
    assert below and below[0].simulated and not below[0].meets_sla


def test_fixed_tp_searches_only_that_degree() -> None:
    r = api.solve("llama3.1-8b", "h100-sxm", "8K", prefill_tp=2, decode_tp=1, max_chips=8,
                  kv_tiers="kv-bf16")
    t = r.tiers[0]
    assert [o.tp for o in t.prefill.tp_options] == [2]
    assert [o.tp for o in t.decode.tp_options] == [1]
    assert not t.prefill.tp_searched
    assert {c.tp for c in r.candidates if c.phase == "prefill"} == {2}


def test_tp_candidates_respect_heads_and_the_innermost_group() -> None:
    """Tiny model with 4 heads, 2 KV heads on a cluster of 4-chip boards: TP 1, 2, 4; TP 4 is
    above the KV heads but a multiple of them, so it stays."""
    from ctxplan.config.hardware_presets import cluster_from_dict
    from ctxplan.config.model_presets import model_from_dict
    from tests.helpers.inputs import TINY_CLUSTER, TINY_MODEL

    model = model_from_dict(TINY_MODEL, "test")
    cluster = cluster_from_dict(TINY_CLUSTER, "test")
    req = api.solve_request(model, "h100-sxm", "4K", cluster=cluster, max_chips=16)
    assert [(c.tp, c.excluded) for c in req.tp_choices("decode")] == [(1, ""), (2, ""), (4, "")]
    odd = model_from_dict({**TINY_MODEL, "num_attention_heads": 6, "num_key_value_heads": 3,
                           "head_dim": 64}, "test")
    req = api.solve_request(odd, "h100-sxm", "4K", cluster=cluster, max_chips=16)
    choices = {c.tp: c.excluded for c in req.tp_choices("decode")}
    assert choices[1] == "" and "divide" in choices[4] and "heads" in choices[4]


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_bound_by_names_what_decided_n(phase: str) -> None:
    """Without a TTFT target the prefill pool is its wall (capacity, or tp for one rank); a
    tight TPOT pushes decode above its wall (tpot)."""
    # 15 ms: the fastest decode below 64 chips is 14.5 ms at 32 (SIM_VERSION 11), so 14.5 ms
    # (this test's SLA before the GEMM refit) left no answer.
    r = api.solve("deepseek-v3", "sg2262", "1M", tpot_max="15ms", kv_tiers="mla-fp8",
                  prefill_tp=1, decode_tp=1)
    plan = _plan(r, phase)
    if phase == "prefill":
        assert plan.bound_by == "capacity" and plan.answer == plan.n_cap
    else:
        assert plan.bound_by == "tpot" and (plan.answer or 0) > (plan.n_cap or 0)


def test_answers_never_increase_when_more_tp_degrees_are_allowed() -> None:
    """Searching TP can only find pools with at most as many chips as any fixed TP."""
    args = ("llama3.1-8b", "h100-sxm", "32K")
    opts: dict[str, Any] = dict(kv_tiers="kv-bf16", max_chips=16, tpot_max="6ms",
                                ttft_max="1s")
    cache = EvalCache()
    auto = api.solve(*args, cache=cache, **opts)
    chips = []
    for tp in (1, 2, 4, 8):
        fixed = api.solve(*args, cache=cache, prefill_tp=tp, decode_tp=tp, **opts)
        if fixed.best is not None:
            chips.append(fixed.best.decode.chips or 0)
    assert auto.best is not None and chips
    assert (auto.best.decode.chips or 0) <= min(chips)
