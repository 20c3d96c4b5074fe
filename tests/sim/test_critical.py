"""The critical path walked back through a simulated schedule (ctxplan.sim.critical).

Invariants on random graphs (hypothesis): the charges add up to the makespan, each task on the
path is charged from its start to the moment the next task on the path started, and each step
of the walk is a real binding constraint (a dependency that completed, or a resource released,
exactly then). Hand-built cases pin which task gets the time: a data wait, a resource wait,
a latency tail, a delay task that holds nothing.
"""

from __future__ import annotations

from hypothesis import given

from ctxplan.sim import TaskGraph
from ctxplan.sim.critical import critical_path
from tests.sim.graphs import Spec, specs
from tests.sim.test_properties import FAST


@FAST
@given(specs())
def test_charges_tile_the_makespan_along_real_constraints(spec: Spec) -> None:
    g = spec.build()
    res = g.run()
    tasks, charge = critical_path(g, res)
    if spec.n_tasks == 0:
        assert len(tasks) == 0
        return
    start, end = res.start_ns, res.end_ns
    release = end - res.tail_ns
    assert int(charge.sum()) == res.makespan_ns
    assert (charge >= 0).all()
    assert end[tasks[0]] == res.makespan_ns and start[tasks[-1]] == 0
    until = res.makespan_ns
    for i, t in enumerate(tasks.tolist()):
        assert charge[i] == until - start[t]
        if i + 1 == len(tasks):
            break
        p = int(tasks[i + 1])
        if p in spec.deps[t]:
            # Waited for data: the predecessor completed as t started.
            assert end[p] == start[t]
            until = end[p]
        else:
            # Waited for a resource: p held one of t's and released it as t started, and t's
            # data was there earlier.
            assert set(spec.resources[p]) & set(spec.resources[t])
            assert release[p] == start[t]
            assert all(end[d] < start[t] for d in spec.deps[t])
            until = release[p]


def test_a_data_wait_a_resource_wait_and_a_tail() -> None:
    """a (compute, 10 ns) -> s (link, 5 ns + 7 ns latency) -> c (compute, 3 ns); b (compute,
    20 ns, no deps) grabs the compute engine first, so a waits for it."""
    g = TaskGraph()
    cpu, link = g.add_resource("cpu"), g.add_resource("link")
    b = g.add_task("b", 20, (cpu,))
    a = g.add_task("a", 10, (cpu,))
    s = g.add_task("s", 5, (link,), (a,), tail_ns=7)
    c = g.add_task("c", 3, (cpu,), (s,))
    res = g.run()
    tasks, charge = critical_path(g, res)
    assert res.makespan_ns == 20 + 10 + 12 + 3
    assert tasks.tolist() == [c, s, a, b]
    assert charge.tolist() == [3, 12, 10, 20]   # the tail is the transfer's


def test_a_delay_task_holding_nothing_is_charged_its_duration() -> None:
    """An operation's fixed cost (no resource) between two computes is on the path."""
    g = TaskGraph()
    cpu = g.add_resource("cpu")
    a = g.add_task("a", 4, (cpu,))
    op = g.add_task("op", 9, (), (a,))
    other = g.add_task("other", 6, (cpu,), (a,))   # runs during op: not binding
    c = g.add_task("c", 2, (cpu,), (op, other))
    res = g.run()
    tasks, charge = critical_path(g, res)
    assert tasks.tolist() == [c, op, a]
    assert charge.tolist() == [2, 9, 4]
