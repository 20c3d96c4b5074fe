"""What the commands that run a study share: its file, the result store's cache, and printing a
result (its warnings on stderr; JSON, or the screen with the files written, the wall time and
the store line)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import RenderableType

from ctxplan.cli.app import api, console, emit_json, print_warnings, show, timing_line
from ctxplan.cli.options import Invocation
from ctxplan.report.progress import progress_wanted, solve_progress
from ctxplan.report.store import store_use_line

if TYPE_CHECKING:
    from ctxplan.api import EvalCache, Study


class Result(Protocol):
    @property
    def warnings(self) -> tuple[str, ...]: ...

    def to_dict(self) -> dict[str, Any]: ...


def study_of(inv: Invocation) -> Study:
    """The study of ``--config`` (or of the flags alone), with the typed flags and ``--set``
    over it."""
    return api.load_study(inv["config"], sets=inv["set_"] or (), flags=inv.typed_flags())


def store_cache(inv: Invocation) -> EvalCache:
    """The evaluation cache over the result store ``--store`` / ``--no-store`` choose."""
    return api.eval_cache(api.store_choice(inv["store"], inv["no_store"]))


def solving(inv: Invocation, label: str) -> AbstractContextManager[EvalCache]:
    """The store's cache, with a progress bar on stderr for a person at a terminal (not under
    ``--json``): ``with solving(inv, "solving") as cache: ...``."""
    return solve_progress(store_cache(inv), label,
                          enabled=progress_wanted(inv.values.get("as_json", False)))


def wall_time(inv: Invocation, started: float) -> float | None:
    """Seconds since ``started`` under ``--timings`` (never otherwise: output stays
    byte-for-byte reproducible)."""
    return time.perf_counter() - started if inv["timings"] else None


def print_result(inv: Invocation, result: Result,
                 screen: Callable[[Mapping[str, Any]], Iterable[RenderableType]], *,
                 wall: float | None, cache: object,
                 files: Iterable[tuple[str, str | None]] = ()) -> None:
    """The result's warnings on stderr, then its JSON (``--json``), or its screen, the files
    written (``("plot", path)``), the wall time and the store line."""
    print_warnings(result.warnings)
    if inv["as_json"]:
        emit_json(result.to_dict(), wall)
        return
    show(screen(result.to_dict()))
    for what, path in files:
        if path is not None:
            console.print(f"{what}: {path}")
    if wall is not None:
        console.print(timing_line(wall))
    print_store_line(cache, False)


def print_store_line(cache: object, as_json: bool) -> None:
    """The result store's path and whether its hits came from earlier runs (not in JSON)."""
    line = None if as_json else store_use_line(cache)
    if line is not None:
        console.print(line, soft_wrap=True)   # a path stays whole
