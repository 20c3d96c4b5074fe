"""The host memory budget shared by local worker processes (issue 24, item 1).

One graph is never built over ``--host-memory-budget`` (``run.over_host_budget``, by the
closed-form estimate of mapping/size.py). With several local worker processes (a sweep's
``--workers``) each could build a graph just under the budget at the same time, so the workers
share it: before a graph is built, its estimate is reserved from a counter the workers share,
and a worker whose graph would take the graphs in flight over the budget waits until enough is
released. A graph alone always fits (the estimate is checked against the budget first), so a
worker never waits on an empty counter and the workers never deadlock (no worker holds two
reservations). What is simulated, and every answer, is the same whatever the worker count: the
sharing only orders the builds in time.

In one process (the default, and every call of the API) nothing is shared and nothing waits.
Ray workers run on machines of their own, each with its own memory: not shared there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# The shared counter of bytes reserved by graphs in flight and its condition, set in each
# worker process by ``install`` (None: this process shares nothing).
_SHARED: tuple[Any, Any] | None = None


def shared_state(ctx: Any) -> tuple[Any, Any]:
    """A new shared counter (bytes reserved) and its condition, from a multiprocessing
    context, to hand to the worker processes' initializer."""
    return ctx.Value("q", 0, lock=False), ctx.Condition()


def install(state: tuple[Any, Any] | None) -> None:
    """Make this process reserve its graphs from ``state`` (a worker's initializer)."""
    global _SHARED
    _SHARED = state


@contextmanager
def reserved(need_bytes: int, budget_bytes: int) -> Iterator[None]:
    """Hold ``need_bytes`` of the shared budget while the block runs: wait while the graphs in
    flight and this one would exceed ``budget_bytes`` (unless none is in flight)."""
    if _SHARED is None:
        yield
        return
    used, cond = _SHARED
    with cond:
        while used.value > 0 and used.value + need_bytes > budget_bytes:
            cond.wait()
        used.value += need_bytes
    try:
        yield
    finally:
        with cond:
            used.value -= need_bytes
            cond.notify_all()
