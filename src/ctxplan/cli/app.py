"""The typer application and what every command shares: the console and JSON output."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import typer
import typer.core
from rich.console import Console

if TYPE_CHECKING:
    from ctxplan import api


class _FlagHelp:
    """--help is a flag: shown without a value placeholder (typer would print <bool>)."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.metavar = ""
        return option


class Command(_FlagHelp, typer.core.TyperCommand):
    pass


class Group(_FlagHelp, typer.core.TyperGroup):
    pass


app = typer.Typer(
    cls=Group,
    name="ctxplan",
    help="Minimum-chip deployment plans for long-context LLM inference, measured by an "
    "event-driven simulator.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

console = Console(highlight=False)


def emit_json(data: Any, wall_s: float | None = None) -> None:
    """Print JSON deterministically (same input, same bytes); ``wall_s`` adds the timings."""
    if wall_s is not None:
        data = {**data, "timings": {"wall_s": wall_s}}
    sys.stdout.write(json.dumps(data, indent=2, allow_nan=False) + "\n")


def show(renderables: Iterable[Any], on: Console | None = None) -> None:
    """Print each renderable (a table, an answer, a note) on its own lines."""
    for r in renderables:
        (on or console).print(r)


def print_warnings(lines: Iterable[str]) -> None:
    """Each of a result's warnings (``result.warnings``, ctxplan.run_warnings) on stderr as one
    'warning: ...' line, never on stdout: tables and --json stay as they are."""
    for line in lines:
        sys.stderr.write(f"warning: {line}\n")


def timing_line(seconds: float) -> str:
    return f"wall time: {seconds:,.3f} s"


def lazy_module(name: str) -> ModuleType:
    """``name`` as a module whose code runs on its first attribute access (importlib's
    LazyLoader), so ``ctxplan --help``, ``presets`` and argument errors never load the API,
    numpy or the compiled simulator. A module already imported is returned as it is."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


if not TYPE_CHECKING:
    # The API every command calls, loaded on its first use: --help stays fast.
    api = lazy_module("ctxplan.api")
