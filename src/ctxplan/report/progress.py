"""Live progress on stderr (rich) for sweeps and long solves.

A sweep shows a bar over its points with the simulations run and the results reused so far,
elapsed time and an ETA; a solve (its number of evaluations is not known ahead) shows a spinner
with the same counts. Nothing is shown under ``--json`` or when stderr is not a terminal, and the
display is transient: it disappears before the results are printed, so stdout is the same with
or without it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ctxplan.config.units import format_tokens

if TYPE_CHECKING:
    from ctxplan.solve import EvalCache, SolveResult

OnPoint = Callable[["SolveResult"], None]
_COUNTS = "[dim]{task.fields[sims]} simulated, {task.fields[hits]} reused[/dim]"


def progress_wanted(as_json: bool, stream: object = None) -> bool:
    """Show progress only for a person: not with --json, and only on a terminal."""
    s = sys.stderr if stream is None else stream
    isatty = getattr(s, "isatty", None)
    return not as_json and callable(isatty) and bool(isatty())



def _bar(console: Console | None, *, eta: bool) -> Any:
    """A transient bar on stderr: what runs, done of total, the simulations and results
    reused, the time taken and (``eta``) the time left. rich.progress is imported only when a
    bar is shown: --help and --json never load it."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    left = [TextColumn("ETA"), TimeRemainingColumn()] if eta else []
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TextColumn(_COUNTS), TimeElapsedColumn(), *left,
                    console=console or Console(stderr=True), transient=True)


@contextmanager
def sweep_progress(n_points: int, *, enabled: bool,
                   console: Console | None = None) -> Iterator[OnPoint | None]:
    """An ``on_point`` callback that advances a bar (None when disabled)."""
    if not enabled:
        yield None
        return
    progress = _bar(console, eta=True)
    with progress:
        task = progress.add_task(f"sweep of {n_points} context lengths", total=n_points,
                                 sims=0, hits=0)
        totals = {"sims": 0, "hits": 0}

        def on_point(result: SolveResult) -> None:
            totals["sims"] += result.sim_calls
            totals["hits"] += result.cache_hits
            progress.update(task, advance=1, description=f"solved S = "
                            f"{format_tokens(result.context_length)}", sims=totals["sims"],
                            hits=totals["hits"])

        yield on_point


def progress_of(cache: EvalCache) -> Callable[[str, int, int], None] | None:
    """The solver's progress callback of a cache from :func:`solve_progress` (None if none)."""
    return getattr(cache, "on_step", None)


@contextmanager
def solve_progress(cache: EvalCache, label: str, *, enabled: bool,
                   console: Console | None = None) -> Iterator[EvalCache]:
    """The cache to solve with: ``cache`` itself when disabled, else one over the same store
    that drives a bar over the solve's sub-problems (pools per KV tier and TP degree; pass
    ``progress_of(cache)`` to the solver) with what is being simulated now, the simulations
    run and the results reused."""
    if not enabled:
        yield cache
        return
    progress = _bar(console, eta=False)
    with progress:
        task = progress.add_task(label, total=None, sims=0, hits=0)

        def on_eval(c: EvalCache) -> None:
            progress.update(task, sims=c.sim_calls, hits=c.cache_hits)

        def on_step(text: str, done: int, total: int) -> None:
            progress.update(task, description=f"{label}: {text}", completed=done,
                            total=total or None)

        yield type(cache)(store=cache.store, on_eval=on_eval, on_step=on_step)
