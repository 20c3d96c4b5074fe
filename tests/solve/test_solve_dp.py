"""The solve searches DP attention for a decode pool serving several sequences (issue 25 item 1):
``--decode-dp auto`` (the default) tries 1, 2, 4 and 8 DP ranks within the batch; a number fixes
it; one sequence is always DP 1."""

from __future__ import annotations

import pytest

from ctxplan import api
from ctxplan.errors import UserInputError

COMMON = dict(tpot_max="50ms", decode_tp=8, prefill_tp=8, kv_tiers="mla-fp8")


def _decode(r):
    return r.best.decode


def test_a_batch_searches_dp_and_never_needs_more_chips_than_dp_1():
    auto = api.solve("deepseek-v3", "h200", "8K", batch=8, **COMMON)
    one = api.solve("deepseek-v3", "h200", "8K", batch=8, decode_dp=1, **COMMON)
    d_auto, d_one = _decode(auto), _decode(one)
    assert d_auto.dp_searched and not d_one.dp_searched
    assert {c.dp for c in d_auto.candidates} == {1, 2, 4, 8}
    assert {c.dp for c in d_one.candidates} == {1}
    assert d_auto.chips <= d_one.chips
    for c in d_auto.candidates:
        assert c.chips == c.dp * c.n * c.tp * c.pp


def test_a_fixed_dp_is_the_pool_it_answers_with():
    r = api.solve("deepseek-v3", "h200", "8K", batch=8, decode_dp=4, **COMMON)
    d = _decode(r)
    assert d.dp == 4 and d.chips == 4 * d.answer * d.tp
    assert {c.dp for c in d.candidates} == {4}
    out = r.to_dict()
    assert out["decode"]["dp"] == 4 and out["decode"]["chips"] == d.chips
    # the TPOT is the simulated step of that DP pool
    point = api.evaluate("deepseek-v3", "h200", "8K", "decode", d.answer, tp=8, dp=4, batch=8,
                         kv_tier="mla-fp8")
    assert point.tpot_s == d.latency_s


def test_one_sequence_is_dp_1_and_a_dp_above_the_batch_is_refused():
    r = api.solve("deepseek-v3", "h200", "8K", **COMMON)
    assert _decode(r).dp == 1 and not _decode(r).dp_searched
    with pytest.raises(UserInputError) as err:
        api.solve_request("deepseek-v3", "h200", "8K", batch=2, decode_dp=4, **COMMON)
    assert err.value.field == "decode_dp"


def test_the_tokens_per_chip_objective_weighs_dp_rungs_filled_per_dp_rank():
    common = dict(batch="auto", objective="tokens-per-chip", tpot_max="50ms",
                  kv_tiers="mla-fp8", decode_tp=2, prefill_tp=8, max_chips=32)
    auto = api.solve("deepseek-v3", "h200", "8K", **common)
    one = api.solve("deepseek-v3", "h200", "8K", decode_dp=1, **common)
    d_auto = _decode(auto)
    ladder = [c for c in d_auto.candidates if c.step == "ladder"]
    assert {c.dp for c in ladder} >= {1, 2, 4}
    for c in ladder:
        if c.dp > 1:
            assert c.batch == c.dp   # one sequence per DP rank before the fill
    # every DP batch probed is whole sequences per DP rank
    assert all(c.batch % c.dp == 0 for c in d_auto.candidates if c.step == "batch")
    # the objective over more layouts is never worse
    assert auto.best.tokens_per_s_per_chip >= one.best.tokens_per_s_per_chip
    assert d_auto.batch % d_auto.dp == 0 and d_auto.chips <= 32


def test_batch_auto_gives_the_same_chips_to_dp_ranks_when_they_serve_more():
    """--batch auto under the chips objective: the pool chosen at one sequence (N x TP) is
    also tried as DP ranks of the same chips (each DP degree dividing N); the answer has the
    same chips as with --decode-dp 1, at least its batch, and at that batch no higher TPOT."""
    kw = dict(batch="auto", tpot_max="50ms", kv_tiers="mla-fp8")
    auto = _decode(api.solve("deepseek-v3", "h200", "32K", **kw))
    one = _decode(api.solve("deepseek-v3", "h200", "32K", decode_dp=1, **kw))
    assert one.dp == 1 and {c.dp for c in one.candidates} == {1}
    assert auto.chips == one.chips
    assert auto.dp > 1 and auto.chips == auto.dp * auto.answer * auto.tp   # DP 3 x Nd 1 x TP 2
    assert (auto.batch, -auto.latency_s) >= (one.batch, -one.latency_s)
    assert auto.dp_searched
    # every DP degree dividing N was tried on the same chips, and filled in whole sequences
    # per DP rank
    n_one = one.answer
    tried = {c.dp for c in auto.candidates if c.dp > 1}
    assert tried == {k for k in range(2, 9) if n_one % k == 0}
    for c in auto.candidates:
        if c.dp > 1:
            assert c.dp * c.n * c.tp == one.chips and c.batch % c.dp == 0
