"""The host memory budget shared by worker processes (evaluate/budget.py): graphs in flight
never hold more than the budget together, a graph alone always runs, and one process shares
nothing."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Iterator

import pytest

from ctxplan.evaluate import budget

BUDGET = 1000


@pytest.fixture()
def shared() -> Iterator[None]:
    budget.install(budget.shared_state(multiprocessing.get_context("spawn")))
    yield
    budget.install(None)


def _hold_while(need: int, inside: threading.Event, leave: threading.Event,
                log: list[str], name: str) -> None:
    with budget.reserved(need, BUDGET):
        log.append(f"{name} in")
        inside.set()
        leave.wait(10)
        log.append(f"{name} out")


def test_a_graph_that_would_exceed_the_budget_waits_for_the_one_in_flight(shared) -> None:
    log: list[str] = []
    first_in, second_in, release = threading.Event(), threading.Event(), threading.Event()
    a = threading.Thread(target=_hold_while, args=(600, first_in, release, log, "a"))
    a.start()
    assert first_in.wait(10)
    go = threading.Event()
    go.set()                         # b leaves at once when it gets in
    b = threading.Thread(target=_hold_while, args=(600, second_in, go, log, "b"))
    b.start()
    assert not second_in.wait(0.3)   # 600 + 600 > 1000: b waits while a holds
    release.set()
    a.join(10)
    b.join(20)
    assert log == ["a in", "a out", "b in", "b out"]


def test_graphs_that_fit_together_run_together(shared) -> None:
    log: list[str] = []
    first_in, second_in, release = threading.Event(), threading.Event(), threading.Event()
    a = threading.Thread(target=_hold_while, args=(400, first_in, release, log, "a"))
    a.start()
    assert first_in.wait(10)
    b = threading.Thread(target=_hold_while, args=(400, second_in, release, log, "b"))
    b.start()
    assert second_in.wait(10)        # 400 + 400 <= 1000: both in flight
    release.set()
    a.join(10)
    b.join(10)
    assert log[:2] == ["a in", "b in"]


def test_a_graph_alone_always_runs(shared) -> None:
    with budget.reserved(5 * BUDGET, BUDGET):   # nothing in flight: never waits
        pass
    with budget.reserved(BUDGET, BUDGET), budget.reserved(0, BUDGET):
        pass


def test_one_process_shares_nothing() -> None:
    budget.install(None)
    with budget.reserved(5 * BUDGET, BUDGET), budget.reserved(5 * BUDGET, BUDGET):
        pass   # no counter: nothing waits


def _shares_the_budget(_: int) -> bool:
    return budget._SHARED is not None


def test_the_sweeps_worker_processes_share_one_budget() -> None:
    from ctxplan.sweep.executor import ProcessExecutor

    assert all(ProcessExecutor(2).map(_shares_the_budget, [1, 2, 3]))
    assert not _shares_the_budget(0)   # this process, as every API call: nothing shared
