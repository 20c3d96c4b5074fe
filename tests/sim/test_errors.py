"""How the kernel refuses bad graphs: cycles, missing dependencies, runaways, bad inputs."""

from __future__ import annotations

import re

import pytest

from ctxplan.sim import SimulationError, TaskGraph


def graph_with_cycle() -> tuple[TaskGraph, set[str]]:
    g = TaskGraph()
    r = g.add_resource("link")
    g.add_task("root", 5, (r,))
    a = g.add_task("a", 1, (r,), (0,))
    b = g.add_task("b", 1, (), (a,))
    c = g.add_task("c", 1, (r,), (b,))
    g.add_task("downstream", 1, (), (c,))  # not on the cycle, stuck behind it
    g.add_dep(a, c)  # a -> b -> c -> a
    return g, {"a", "b", "c"}


def test_cycle_names_a_task_on_it() -> None:
    g, cycle = graph_with_cycle()
    with pytest.raises(SimulationError, match="cycle") as info:
        g.run()
    named = set(re.findall(r"'([^']+)'", str(info.value)))
    assert named & cycle, str(info.value)
    assert named <= cycle, f"names tasks that are not on the cycle: {info.value}"


def test_cycle_found_from_a_task_outside_it() -> None:
    # The first unfinished task (id 0) only depends on the cycle; the diagnosis must still walk
    # into the cycle rather than blame task 0.
    g = TaskGraph()
    g.add_task("outside", 1, (), (2,))
    g.add_task("x", 1, (), (2,))
    g.add_task("y", 1, (), (1,))
    with pytest.raises(SimulationError) as info:
        g.run()
    msg = str(info.value)
    assert "cycle" in msg and "'outside'" not in msg, msg
    assert "'x'" in msg or "'y'" in msg, msg


def test_self_dependency_is_a_cycle() -> None:
    g = TaskGraph()
    g.add_task("ok", 1)
    t = g.add_task("selfish", 1)
    g.add_dep(t, t)
    with pytest.raises(SimulationError, match="'selfish'"):
        g.run()


@pytest.mark.parametrize("missing", [7, 2, -1])
def test_dependency_on_a_nonexistent_task(missing: int) -> None:
    g = TaskGraph()
    g.add_task("first", 1)
    g.add_task("orphan", 1, (), (0, missing))
    with pytest.raises(SimulationError, match=r"'orphan'.*does not exist"):
        g.run()


def chain(n: int) -> TaskGraph:
    g = TaskGraph()
    r = g.add_resource("r")
    for i in range(n):
        g.add_task(f"t{i}", 3, (r,), (i - 1,) if i else ())
    return g


def test_event_limit_stops_a_runaway() -> None:
    with pytest.raises(SimulationError, match=r"event limit 10\b"):
        chain(1000).run(event_limit=10)


def test_event_limit_is_a_cap_on_events_processed() -> None:
    g = chain(50)
    n_events = g.run().events
    assert n_events == 50  # one release+complete event per task without a tail
    assert g.run(event_limit=n_events).events == n_events  # exactly at the cap: fine
    with pytest.raises(SimulationError, match=f"event limit {n_events - 1}"):
        g.run(event_limit=n_events - 1)
    with pytest.raises(SimulationError, match="event limit 0"):
        g.run(event_limit=0)  # 0 means no events, not "unlimited"
    assert TaskGraph().run(event_limit=0).events == 0


@pytest.mark.parametrize(("duration", "tail"), [(-1, 0), (0, -1), (-5, -5)])
def test_negative_duration_or_tail(duration: int, tail: int) -> None:
    g = TaskGraph()
    with pytest.raises(ValueError, match="'bad'"):
        g.add_task("bad", duration, tail_ns=tail)
    assert g.n_tasks == 0  # nothing half-added


@pytest.mark.parametrize("res", [(1,), (-1,), (0, 5)])
def test_unknown_resource(res: tuple[int, ...]) -> None:
    g = TaskGraph()
    g.add_resource("only")
    with pytest.raises(ValueError, match="unknown resource"):
        g.add_task("bad", 1, res)
    assert g.n_tasks == 0


def test_resource_listed_twice() -> None:
    g = TaskGraph()
    r = g.add_resource("r")
    with pytest.raises(ValueError, match="twice"):
        g.add_task("bad", 1, (r, r))
