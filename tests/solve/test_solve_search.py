"""The search core against synthetic latency curves (no simulator): fast and exhaustive."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxplan.solve.search import STRATEGIES, search


def first_pass(cands: list[int], curve: dict[int, float | None], limit: float) -> int | None:
    """The definition the solver aims at: min { N : latency(N) <= limit }."""
    for n in cands:
        lat = curve[n]
        if lat is not None and lat <= limit:
            return n
    return None


class Counting:
    """A fake evaluator that counts calls per N."""

    def __init__(self, curve: dict[int, float | None]) -> None:
        self.curve = curve
        self.calls: dict[int, int] = {}

    def __call__(self, n: int) -> float | None:
        self.calls[n] = self.calls.get(n, 0) + 1
        return self.curve[n]


def _decreasing(draw_values: list[float]) -> list[float]:
    out, acc = [], 0.0
    for v in reversed(draw_values):
        acc += v
        out.append(acc)
    return list(reversed(out))


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(st.floats(0, 10), min_size=1, max_size=200),
    start=st.integers(1, 50),
    limit=st.floats(0, 500),
)
def test_monotone_curves_all_strategies_agree_with_the_definition(
    steps: list[float], start: int, limit: float
) -> None:
    cands = list(range(start, start + len(steps)))
    curve: dict[int, float | None] = dict(zip(cands, _decreasing(steps), strict=True))
    want = first_pass(cands, curve, limit)
    for strategy in STRATEGIES:
        ev = Counting(curve)
        out = search(cands, ev, limit, strategy)
        assert out.answer == want, strategy
        assert all(c == 1 for c in ev.calls.values()), "a point was evaluated twice"
        assert not out.fallback
    # Galloping is O(log N): gallop + binary + 2 verification probes.
    ev = Counting(curve)
    search(cands, ev, limit, "galloping")
    assert len(ev.calls) <= 2 * math.ceil(math.log2(len(cands) + 1)) + 3


def test_linear_stops_at_the_first_pass_and_scan_evaluates_everything() -> None:
    cands = list(range(4, 40))
    curve: dict[int, float | None] = {n: 100.0 / n for n in cands}
    ev = Counting(curve)
    out = search(cands, ev, 5.0, "linear")
    assert out.answer == 20 and sorted(ev.calls) == list(range(4, 21))
    ev = Counting(curve)
    out = search(cands, ev, 5.0, "scan")
    assert out.answer == 20 and sorted(ev.calls) == cands


def test_galloping_probes_geometrically_then_bisects_then_verifies() -> None:
    cands = list(range(1, 101))
    curve: dict[int, float | None] = {n: 1000.0 / n for n in cands}
    out = search(cands, Counting(curve), 1000.0 / 37, "galloping")
    assert out.answer == 37
    steps = [(p.n, p.step) for p in out.probes]
    assert steps[:7] == [(1, "gallop"), (2, "gallop"), (4, "gallop"), (8, "gallop"),
                         (16, "gallop"), (32, "gallop"), (64, "gallop")]
    labels = [s for _, s in steps[7:]]
    assert labels == sorted(labels) and set(labels) == {"binary", "verify"}  # binary, then verify
    assert {36, 38, 39} <= {n for n, _ in steps}   # the neighbours of 37 were looked at


def test_a_dip_below_the_gallop_probes_is_detected_and_the_scan_answer_returned() -> None:
    # Falls, dips under the limit at 5-6 (between gallop probes 4 and 8), rises, falls again
    # and passes for good from 30. Probes 4 -> 8 show the rise, so galloping distrusts itself.
    cands = list(range(1, 65))
    curve: dict[int, float | None] = {}
    for n in cands:
        if n <= 4:
            curve[n] = 30.0 - 2 * n
        elif n <= 6:
            curve[n] = 19.0
        elif n < 30:
            curve[n] = 25.0 - 0.1 * n
        else:
            curve[n] = 15.0
    limit = 20.0
    scan = search(cands, Counting(curve), limit, "scan")
    assert scan.answer == 5
    ev = Counting(curve)
    out = search(cands, ev, limit, "galloping")
    assert out.fallback and "rises" in out.fallback_reason
    assert out.answer == scan.answer == 5
    assert out.scanned == (1, 5)
    assert all(c == 1 for c in ev.calls.values())


def test_a_failing_neighbour_above_the_answer_triggers_the_fallback() -> None:
    # Monotone except one slow point just above where binary search lands: the answer itself is
    # right, but the local check must notice and rescan from the wall.
    cands = list(range(1, 42))   # probes 1, 2, 4, ..., 32, then 24, 20, 22, 23: never 25
    curve: dict[int, float | None] = {n: 100.0 - n for n in cands}
    curve[25] = 200.0   # a spike (e.g. a layout that straddles a board)
    out = search(cands, Counting(curve), 76.0, "galloping")
    assert out.answer == 24 == first_pass(cands, curve, 76.0)
    assert out.fallback and "N=25 above the answer" in out.fallback_reason


def test_a_pass_window_jumped_by_the_gallop_is_found_around_the_minimum() -> None:
    # U-shaped: only N in [11, 15] meets the limit; gallop probes 1, 2, 4, 8, 16, 32, 64 all
    # fail, but their latencies rise after 16, so the bracket [8, 32] around the fastest probe
    # (16) is scanned.
    cands = list(range(1, 65))
    curve: dict[int, float | None] = {n: 10.0 + (n - 13) ** 2 for n in cands}
    limit = 14.0
    out = search(cands, Counting(curve), limit, "galloping")
    assert out.fallback
    assert out.answer == 11 == first_pass(cands, curve, limit)
    assert out.scanned == (8, 32)


def test_monotone_infeasible_is_reported_without_fallback_or_scan() -> None:
    cands = list(range(1, 1025))
    curve: dict[int, float | None] = {n: 10.0 + 1.0 / n for n in cands}
    ev = Counting(curve)
    out = search(cands, ev, 1.0, "galloping")
    assert out.answer is None and not out.fallback
    assert len(ev.calls) <= 12                      # 1, 2, 4, ..., 512, 1024
    best = out.best()
    assert best is not None and best.n == 1024


def test_points_that_do_not_fit_count_as_failures() -> None:
    cands = list(range(1, 20))
    curve: dict[int, float | None] = {n: (None if n < 6 else 10.0 / n) for n in cands}
    for strategy in STRATEGIES:
        assert search(cands, Counting(curve), 1.0, strategy).answer == 10


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.floats(0, 100)), min_size=1, max_size=80),
       limit=st.floats(0, 100))
def test_any_curve_galloping_is_locally_checked_or_equals_the_scan(
    values: list[float | None], limit: float
) -> None:
    """On arbitrary curves galloping never answers silently wrong near its answer: either it
    fell back (then it is the first pass of what it scanned, and the scan's answer when it
    scanned from the wall), or the candidate below fails and the ones above pass. It never
    answers with a point that misses the limit."""
    cands = list(range(1, len(values) + 1))
    curve = dict(zip(cands, values, strict=True))
    want = first_pass(cands, curve, limit)
    out = search(cands, Counting(curve), limit, "galloping")
    if out.answer is None:
        return
    lat = curve[out.answer]
    assert lat is not None and lat <= limit
    assert want is not None and want <= out.answer
    if out.fallback:
        # A fallback answer is the first pass of the interval it scanned; when that interval
        # starts at the wall (non-monotone below a pass) it is the full scan's answer. When
        # every galloping probe failed it scans only around the fastest probe (exact for
        # unimodal curves), and its reason says so.
        assert out.scanned is not None
        lo, _ = out.scanned
        assert out.answer == first_pass([n for n in cands if n >= lo], curve, limit)
        if lo == cands[0]:
            assert out.answer == want
        else:
            assert "unimodal" in out.fallback_reason
    else:
        i = cands.index(out.answer)
        if i > 0:
            below = curve[cands[i - 1]]
            assert below is None or below > limit
        for j in range(i + 1, min(i + 2, len(cands) - 1) + 1):
            above = curve[cands[j]]
            assert above is not None and above <= limit


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="strategy"):
        search([1, 2], lambda n: 1.0, 1.0, "bisect")
    with pytest.raises(ValueError, match="increasing"):
        search([2, 1], lambda n: 1.0, 1.0)
    assert search([], lambda n: 1.0, 1.0).answer is None


# ------------------------------------------------------------ the guided search (TTFT targets)


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(st.floats(0, 10), min_size=1, max_size=300),
    start=st.integers(1, 50),
    limit=st.floats(0, 800),
    tightness=st.floats(0, 1),
    hint=st.one_of(st.none(), st.integers(1, 400)),
)
def test_guided_search_is_exact_on_monotone_curves_with_any_valid_bound(
    steps: list[float], start: int, limit: float, tightness: float, hint: int | None
) -> None:
    """Whatever the bound (from 0 to the curve itself) and the hint, the answer is the
    definition's, each point is simulated once, and the answer's predecessor (when it is a
    candidate) is simulated and fails; nothing else the bound rules out is simulated."""
    cands = list(range(start, start + len(steps)))
    values = _decreasing(steps)
    curve: dict[int, float | None] = dict(zip(cands, values, strict=True))
    bound = {n: tightness * v for n, v in zip(cands, values, strict=True)}
    want = first_pass(cands, curve, limit)
    for strategy in ("galloping", "linear"):
        ev = Counting(curve)
        out = search(cands, ev, limit, strategy, lower_bound=bound.__getitem__, hint=hint)
        assert out.answer == want, strategy
        assert all(c == 1 for c in ev.calls.values())
        before = cands[cands.index(want) - 1] if want is not None and want != cands[0] else None
        assert not any(bound[n] > limit for n in ev.calls if n != before), \
            "a ruled-out N was simulated"
        if out.bound_cut is not None:
            n, value = out.bound_cut
            assert value == bound[n] > limit and all(bound[m] > limit for m in cands if m <= n)
        if want is not None and want != cands[0]:
            below = cands[cands.index(want) - 1]
            assert below in ev.calls and ev.curve[below] is not None
            assert (curve[below] or 0) > limit


def test_guided_search_needs_few_probes_on_an_inverse_curve() -> None:
    """TTFT ~ a / N + b (DeepSeek-V3 1M prefill on SG2262 is about 7900 / N + 6.2 s):
    from the roofline bound, four probes; from a hint at the answer, two."""
    cands = list(range(8, 1025))
    curve: dict[int, float | None] = {n: 7862.0 / n + 6.42 for n in cands}
    bound = {n: 0.8 * 7862.0 / n for n in cands}
    ev = Counting(curve)
    out = search(cands, ev, 60.0, lower_bound=bound.__getitem__)
    assert out.answer == 147 and len(ev.calls) <= 4 and {146, 147} <= set(ev.calls)
    assert out.bound_cut is not None and out.bound_cut[0] < min(ev.calls)
    ev = Counting(curve)
    out = search(cands, ev, 60.0, lower_bound=bound.__getitem__, hint=147)
    assert out.answer == 147 and sorted(ev.calls) == [146, 147]
    ev = Counting(curve)
    galloping = search(cands, ev, 60.0)          # no bound: the old galloping from the wall
    assert galloping.answer == 147 and len(ev.calls) >= 3 * 4


def test_guided_search_falls_back_when_the_probes_show_a_rise() -> None:
    """A curve that turns (the ring leaving a host): a rise among the failing probes below the
    answer sends the guided search to a scan from the bound's first candidate, which finds the
    pass window the probes jumped over."""
    cands = list(range(1, 41))
    curve: dict[int, float | None] = {n: 100.0 / n for n in cands}
    curve[12] = 30.0                      # a bump: 12 is slower than 11
    curve[9] = 7.9                        # a narrow window: 9 passes, 10 and 11 do not
    limit = 8.0                           # elsewhere the first pass is N = 13 (7.69)
    bound = {n: 0.5 * 100.0 / n for n in cands}
    ev = Counting(curve)
    out = search(cands, ev, limit, lower_bound=bound.__getitem__, hint=11)
    assert 11 in ev.calls and 12 in ev.calls   # the probes that show the rise
    assert out.fallback and "rises" in out.fallback_reason
    assert out.answer == first_pass(cands, curve, limit) == 9
    lo = next(n for n in cands if bound[n] <= limit)
    assert out.scanned is not None and out.scanned[0] == lo
