"""The kernel against independent SimPy oracles, on random task graphs.

Exact agreement (makespan, and start and end of every task) with the round-based oracle on
graphs full of ties, zero durations, multi-resource tasks and tails. The textbook SimPy model
(processes + PriorityResource) agrees exactly whenever no tie can reorder a grant, which is
checked on tie-free graphs; its agreement rate on graphs with ties is measured too.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings

from ctxplan.sim import SimResult
from tests.sim.graphs import (
    Spec,
    pass_kv_ring,
    random_spec,
    random_tiefree_single_resource_spec,
    specs,
)
from tests.sim.oracle import OracleResult, simulate, simulate_idiomatic


def assert_same(spec: Spec, got: SimResult, want: OracleResult) -> None:
    """The compiled kernel's schedule equals the oracle's, and the reference kernel's equals the
    compiled one's in everything it measured (events and per-resource figures included)."""
    assert spec.run("reference").same_schedule(got)
    for t in range(spec.n_tasks):
        assert (got.start_ns[t], got.end_ns[t]) == (want.start_ns[t], want.end_ns[t]), (
            f"task {t} differs: kernel start/end {got.start_ns[t]}/{got.end_ns[t]}, "
            f"oracle {want.start_ns[t]}/{want.end_ns[t]}\nspec = {spec!r}"
        )
    assert got.makespan_ns == want.makespan_ns


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs())
def test_kernel_matches_oracle_hypothesis(spec: Spec) -> None:
    assert_same(spec, spec.run(), simulate(**spec.oracle_args()))


def test_kernel_matches_oracle_fuzz() -> None:
    rng = random.Random(20240601)
    for _ in range(1500):
        spec = random_spec(rng)
        assert_same(spec, spec.run(), simulate(**spec.oracle_args()))


def test_kernel_matches_oracle_with_shuffled_ids() -> None:
    # Priority (id) order unrelated to dependency order; deps point both ways.
    rng = random.Random(424242)
    for _ in range(500):
        spec = random_spec(rng).relabelled(rng)
        assert_same(spec, spec.run(), simulate(**spec.oracle_args()))


def test_kernel_matches_oracle_few_resources_many_tasks() -> None:
    # Heavy contention: 1-2 resources, up to 3 resources per task is capped by n_resources.
    rng = random.Random(7)
    for _ in range(60):
        spec = random_spec(rng, max_tasks=300, max_resources=2)
        assert_same(spec, spec.run(), simulate(**spec.oracle_args()))


def test_kernel_matches_oracle_on_ring() -> None:
    rng = random.Random(3)
    for p in (1, 2, 5):
        comp = [[rng.choice((0, 40, 100, rng.randint(0, 200))) for _ in range(6)] for _ in range(p)]
        xfer = [[rng.choice((0, 40, 100, rng.randint(0, 200))) for _ in range(6)] for _ in range(p)]
        spec, _ = pass_kv_ring(comp, xfer, tail=rng.randint(0, 20))
        assert_same(spec, spec.run(), simulate(**spec.oracle_args()))


def test_oracle_sanity() -> None:
    # Hand-checked: two equal transfers on one link, then one after both on another resource.
    spec = Spec(2)
    spec.add(10, (0,), tail=5)
    spec.add(10, (0,), tail=5)
    spec.add(0, (0, 1), (0, 1))
    res = simulate(**spec.oracle_args())
    assert res.start_ns == [0, 10, 25]
    assert res.end_ns == [15, 25, 25]


# -- the textbook SimPy model -------------------------------------------------------------------


def has_tie(spec: Spec, res: SimResult) -> bool:
    """True if some resource sees two "events" at one instant t > 0: a task becoming ready for it
    and another becoming ready for it, or a task becoming ready the instant it is released.

    Those are the only moments where SimPy's grant-on-release (the queue head gets the resource
    before a lower-id task that becomes ready at the same t requests it) can differ from the
    kernel's rounds. At t = 0 the processes start in id order, so ties there are harmless.
    """
    for r in range(spec.n_resources):
        seen: set[int] = set()
        for t in range(spec.n_tasks):
            if r not in spec.resources[t]:
                continue
            ready = max((res.end_ns[d] for d in spec.deps[t]), default=0)
            release = res.start_ns[t] + spec.duration[t]
            for instant in (ready, release):
                if instant and instant in seen:
                    return True
                seen.add(instant)
    return False


def test_idiomatic_simpy_agrees_without_ties() -> None:
    rng = random.Random(11)
    checked = agreed = tie_free = 0
    for _ in range(400):
        spec = random_tiefree_single_resource_spec(rng)
        got = spec.run()
        want = simulate_idiomatic(**spec.oracle_args())
        same = (got.start_ns.tolist(), got.end_ns.tolist()) == (want.start_ns, want.end_ns)
        checked += 1
        agreed += same
        if not has_tie(spec, got):
            tie_free += 1
            assert_same(spec, got, want)
    assert tie_free >= 100, f"only {tie_free} tie-free graphs: the generator needs tuning"
    # With ties the textbook model may differ; it still agrees on most graphs.
    print(f"idiomatic SimPy: {agreed}/{checked} graphs identical, {tie_free} tie-free (all equal)")
    assert agreed >= tie_free


def test_idiomatic_simpy_differs_on_a_tie() -> None:
    # Task 2 waits for r0 from t = 0; task 1 becomes ready at t = 10, the instant task 0 releases
    # r0. The kernel's round lets the lower id (1) win; SimPy grants r0 to the queued task 2.
    spec = Spec(1)
    spec.add(10, (0,))
    spec.add(5, (0,), (0,))
    spec.add(5, (0,))
    assert spec.run().start_ns.tolist() == [0, 10, 15]
    assert simulate(**spec.oracle_args()).start_ns == [0, 10, 15]
    assert simulate_idiomatic(**spec.oracle_args()).start_ns == [0, 15, 10]
