"""Properties every schedule produced by the kernel must have.

On monotonicity ("more bandwidth never makes anything later"): this is FALSE for greedy list
scheduling in general. Graham (1969, "Bounds on multiprocessing timing anomalies") showed that
shortening a task, adding a machine or removing a precedence edge can lengthen the makespan of
a list schedule, and the kernel is a list scheduler (work-conserving, no reservation): a task
that finishes earlier frees its resource earlier, a lower-priority long task grabs it (nobody
reserves it for the critical task that becomes ready a moment later), and the critical chain
waits. ``test_graham_anomaly_is_real`` pins one such case. What we test instead:

(a) graphs in which every resource's tasks are totally ordered by dependencies (chains, and
    fork-joins with one resource per branch): there is never a choice to make, the schedule is
    the longest-path schedule, and shortening any task cannot delay anything;
(b) scaling every duration and tail by an integer k scales every start and end by exactly k
    (the kernel works in integer ns, so this is exact, ties included);
(c) the pass-KV ring (step j's transfer on a link overlaps step j's compute, step j+1 waits for
    both and for the block from the previous chip): shorter transfers never increase the
    makespan (nor any end time).
"""

from __future__ import annotations

import itertools
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxplan.sim import SimResult, TaskGraph
from tests.sim.graphs import Spec, chain, fork_join, pass_kv_ring, random_spec, specs

FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_invariants(spec: Spec, res: SimResult) -> None:
    n, n_res = spec.n_tasks, spec.n_resources
    # Every task ran, after its deps, for exactly its duration + tail.
    for t in range(n):
        assert res.start_ns[t] >= max((res.end_ns[d] for d in spec.deps[t]), default=0)
        assert res.end_ns[t] == res.start_ns[t] + spec.duration[t] + spec.tail[t]
    assert res.makespan_ns == max(res.end_ns.tolist(), default=0)
    # Lower bounds: the critical path and the busiest resource.
    assert res.makespan_ns >= spec.critical_path()
    for r in range(n_res):
        holders = [t for t in range(n) if r in spec.resources[t]]
        assert res.resource_busy_ns[r] == sum(spec.duration[t] for t in holders)
        assert res.makespan_ns >= res.resource_busy_ns[r]
        # Conservation: the bytes a resource carried are the bytes of the tasks that held it.
        assert res.resource_bytes[r] == sum(spec.nbytes[t] for t in holders)
        assert 0.0 <= res.utilisation(r) <= 1.0
        # Exclusivity: holding intervals on one resource never overlap.
        spans = sorted(
            (res.start_ns[t], res.start_ns[t] + spec.duration[t])
            for t in holders
            if spec.duration[t]
        )
        for (_, e0), (s1, _) in itertools.pairwise(spans):
            assert e0 <= s1


@FAST
@given(specs())
def test_invariants_hypothesis(spec: Spec) -> None:
    check_invariants(spec, spec.run())


def test_invariants_fuzz() -> None:
    rng = random.Random(99)
    for i in range(400):
        spec = random_spec(rng)
        if i % 2:
            spec = spec.relabelled(rng)  # deps pointing to higher ids too
        check_invariants(spec, spec.run())


def test_duplicate_dependency_counts_once() -> None:
    spec = Spec(1)
    a = spec.add(10, (0,))
    spec.add(5, (0,), (a, a, a))
    assert spec.run().start_ns.tolist() == [0, 10]


def test_empty_graph() -> None:
    res = TaskGraph().run()
    got = (res.makespan_ns, res.start_ns.tolist(), res.end_ns.tolist(), res.events)
    assert got == (0, [], [], 0)


def test_utilisation_zero_makespan() -> None:
    spec = Spec(1)
    spec.add(0, (0,))
    res = spec.run()
    assert res.makespan_ns == 0
    assert res.utilisation(0) == 0.0


# -- (b) scaling ----------------------------------------------------------------------------------


@FAST
@given(specs(), st.integers(2, 9))
def test_scaling_all_durations_scales_everything(spec: Spec, k: int) -> None:
    base, scaled = spec.run(), spec.scaled(k).run()
    assert scaled.makespan_ns == k * base.makespan_ns
    assert scaled.start_ns.tolist() == [k * s for s in base.start_ns.tolist()]
    assert scaled.end_ns.tolist() == [k * e for e in base.end_ns.tolist()]


# -- (a) no choice, no anomaly: chains and fork-joins ---------------------------------------------


def longest_path_schedule(spec: Spec) -> list[int]:
    end = [0] * spec.n_tasks
    for t in range(spec.n_tasks):
        end[t] = max((end[d] for d in spec.deps[t]), default=0) + spec.duration[t] + spec.tail[t]
    return end


def shorten_one(spec: Spec, rng: random.Random) -> Spec:
    durations = list(spec.duration)
    t = rng.randrange(spec.n_tasks)
    durations[t] = rng.randint(0, durations[t])
    return spec.with_durations(durations)


def assert_not_later(before: SimResult, after: SimResult) -> None:
    assert after.makespan_ns <= before.makespan_ns
    assert all(a <= b for a, b in zip(after.end_ns, before.end_ns, strict=True))


def test_chain_and_fork_join_are_monotone() -> None:
    rng = random.Random(5)
    for _ in range(200):
        n = rng.randint(1, 30)
        c = chain(
            [rng.randint(0, 1000) for _ in range(n)],
            [rng.randint(0, 50) for _ in range(n)],
            rng.randint(1, 3),
            rng,
        )
        branches = [
            [rng.randint(0, 1000) for _ in range(rng.randint(1, 8))]
            for _ in range(rng.randint(1, 6))
        ]
        fj = fork_join(branches, tail=rng.randint(0, 50))
        for spec in (c, fj):
            res = spec.run()
            assert res.end_ns.tolist() == longest_path_schedule(spec)
            for _ in range(3):
                assert_not_later(res, shorten_one(spec, rng).run())


# -- (c) pass-KV ring: faster links never hurt ---------------------------------------------------


def test_pass_kv_ring_faster_transfers_never_later() -> None:
    rng = random.Random(17)
    for _ in range(60):
        p, s = rng.randint(1, 6), rng.randint(1, 12)
        comp = [[rng.randint(0, 1000) for _ in range(s)] for _ in range(p)]
        xfer = [[rng.randint(0, 1000) for _ in range(s)] for _ in range(p)]
        spec, xfers = pass_kv_ring(comp, xfer, tail=rng.randint(0, 50))
        base = spec.run()
        assert base.end_ns.tolist() == longest_path_schedule(spec)
        for _ in range(4):
            faster = list(spec.duration)
            for t in rng.sample(xfers, rng.randint(1, len(xfers))):
                faster[t] = rng.randint(0, faster[t])
            fast = spec.with_durations(faster).run()
            assert_not_later(base, fast)


def test_pass_kv_single_link_overlap() -> None:
    # P = 1: makespan is the sum over steps of max(compute, transfer + tail): overlap appears
    # without being written down, and each step waits for the slower of the two.
    comp, xfer, tail = [100, 300, 50, 200], [250, 100, 60, 10], 7
    spec, _ = pass_kv_ring([comp], [xfer], tail=tail)
    want = sum(max(c, x + tail) for c, x in zip(comp, xfer, strict=True))
    assert spec.run().makespan_ns == want


def test_graham_anomaly_is_real() -> None:
    # x (no resource, 2 ns) gates c (r0, 10 ns) which gates d (100 ns); a (r0) and b (r0, 10 ns)
    # compete for r0. Shortening a from 2 to 1 lets b grab r0 at t = 1, one ns before c becomes
    # ready: c, and the chain behind it, slip by 9 ns. Correct for a no-reservation scheduler.
    def makespan(a_ns: int) -> int:
        spec = Spec(1)
        x = spec.add(2)
        spec.add(a_ns, (0,))
        c = spec.add(10, (0,), (x,))
        spec.add(10, (0,))
        spec.add(100, (), (c,))
        return spec.run().makespan_ns

    assert makespan(2) == 112
    assert makespan(1) == 121


# -- contention and determinism -------------------------------------------------------------------


def test_two_flows_on_one_link_take_twice_as_long() -> None:
    for d in (1, 7, 1000, 123_456):
        one, two = Spec(1), Spec(1)
        one.add(d, (0,), nbytes=64)
        two.add(d, (0,), nbytes=64)
        two.add(d, (0,), nbytes=64)
        r1, r2 = one.run(), two.run()
        assert r2.makespan_ns == 2 * r1.makespan_ns
        assert r2.resource_busy_ns[0] == 2 * r1.resource_busy_ns[0]
        assert r2.resource_bytes[0] == 2 * r1.resource_bytes[0]
        # With a tail (propagation) the wire time doubles, the latency is paid once.
        one.tail[0] = two.tail[0] = two.tail[1] = 30
        assert two.run().makespan_ns == 2 * d + 30
        assert one.run().makespan_ns == d + 30


@FAST
@given(specs())
def test_deterministic(spec: Spec) -> None:
    g = spec.build()
    a, b, c = g.run(), g.run(), spec.build().run()
    assert a == b == c
