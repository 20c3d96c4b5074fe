"""How a sweep maps a function over its points: in this process, in local worker processes, or
on a Ray cluster, behind one interface, ``map(fn, items)`` yielding results in item order.

``fn`` and the items must pickle for the process and Ray executors (the sweep's unit of work,
``contexts.SolvePoint``, does: its result store travels as a path). Besides ``map``, each
executor here answers ``shares_filesystem()``: whether its workers see this machine's files
(then they read and write the SQLite result store themselves as they go; otherwise the sweep
ships them the stored results they need and writes what they return). An executor without that
method is taken to share the filesystem.

* serial: ``SerialExecutor``, this process (shares in-memory caches between points);
* process: ``ProcessExecutor``, ``workers`` spawned local processes (default min(2, cpus)),
  the CLI's default for sweeps;
* ray: ``RayExecutor``, one Ray task per item on a local instance or the cluster at
  ``address`` (the ``ctxplan[ray]`` extra, imported only when used).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Protocol, TypeVar

from ctxplan.errors import CtxplanError, UserInputError
from ctxplan.evaluate import budget

T = TypeVar("T")
R = TypeVar("R")

BACKENDS = ("serial", "process", "ray")
RAY_INSTALL = "pip install 'ctxplan[ray]'"


class Executor(Protocol):
    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """``fn`` applied to every item; results yielded in the order of ``items``."""
        ...


def default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def check_workers(workers: int | None) -> int:
    if workers is None:
        return default_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UserInputError("workers", workers, "give a whole number of worker processes >= 1")
    return workers


class SerialExecutor:
    """One point after another, in this process (shares in-memory caches between points)."""

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        for item in items:
            yield fn(item)

    def shares_filesystem(self) -> bool:
        return True


class ProcessExecutor:
    """Local worker processes (``spawn``ed: no fork of a process that may run threads, such as
    the progress bar's). With one worker, or at most one item, it runs in this process: starting
    a worker costs about a second of imports, more than a small point takes."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = check_workers(workers)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        todo = list(items)
        if self.workers == 1 or len(todo) <= 1:
            yield from SerialExecutor().map(fn, todo)
            return
        ctx = multiprocessing.get_context("spawn")
        # The workers share the host memory budget (evaluate/budget.py): one counter of the
        # bytes their graphs in flight hold.
        with ProcessPoolExecutor(max_workers=min(self.workers, len(todo)), mp_context=ctx,
                                 initializer=budget.install,
                                 initargs=(budget.shared_state(ctx),)) as pool:
            futures = [pool.submit(fn, item) for item in todo]
            try:
                for f in futures:
                    yield f.result()
            finally:
                for f in futures:
                    f.cancel()

    def shares_filesystem(self) -> bool:
        return True


def import_ray() -> Any:
    """The ray module, or a one-line UserInputError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UserInputError("backend", "ray", f"install the extra: {RAY_INSTALL}",
                             "ray is not installed") from None
    return ray


def _run_task(fn: Callable[[Any], Any], item: Any) -> Any:
    return fn(item)


class RayExecutor:
    """Ray tasks, one per item. Uses the Ray instance this process is connected to; if none, it
    connects to ``address`` (e.g. ``ray://head:10001`` or ``auto``) or starts a local instance
    with ``workers`` CPUs (default: all). Workers must be able to import ctxplan (same
    environment, or a Ray runtime_env that installs it)."""

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        self.address = address
        self.workers = None if workers is None else check_workers(workers)

    def _ray(self) -> Any:
        ray = import_ray()
        if not ray.is_initialized():
            opts: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False,
                                        logging_level=logging.ERROR, configure_logging=True)
            try:
                if self.address:
                    ray.init(address=self.address, **opts)
                else:
                    ray.init(num_cpus=self.workers, **opts)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise UserInputError("address", self.address, "give the address of a running "
                                     "Ray cluster (ray://HOST:10001 or auto), or leave it out "
                                     "for a local instance",
                                     f"cannot start or reach Ray ({exc})") from None
        return ray

    def shares_filesystem(self) -> bool:
        """True when every node of the cluster is this machine (a local instance)."""
        ray = self._ray()
        here = ray.util.get_node_ip_address()
        return all(n.get("NodeManagerAddress") == here for n in ray.nodes() if n.get("Alive"))

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        todo = list(items)
        if not todo:
            return
        ray = self._ray()
        task = ray.remote(num_cpus=1)(_run_task)
        fn_ref = ray.put(fn)
        refs = [task.remote(fn_ref, item) for item in todo]
        done = 0
        try:
            for ref in refs:
                try:
                    yield ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, CtxplanError):
                        raise cause from None  # a user mistake: one line, not a Ray traceback
                    raise
                done += 1
        finally:
            for ref in refs[done:]:  # stopped early: do not leave tasks running
                with contextlib.suppress(Exception):
                    ray.cancel(ref)


def make_executor(backend: str | None = None, *, workers: int | None = None,
                  address: str | None = None) -> Executor:
    """The executor for a backend name: serial, process (default) or ray."""
    name = (backend or "process").strip().lower()
    if name not in BACKENDS:
        raise UserInputError("backend", backend, f"use one of {', '.join(BACKENDS)}")
    if address is not None and name != "ray":
        raise UserInputError("address", address, "--address is for --backend ray; drop it or "
                             "add --backend ray")
    if name == "serial":
        check_workers(workers)
        return SerialExecutor()
    if name == "process":
        return ProcessExecutor(workers)
    import_ray()  # fail now, before any work, if the extra is missing
    return RayExecutor(address=address, workers=workers)
