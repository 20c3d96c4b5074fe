"""Command-line options, derived from the one declaration of each option.

The options the API and the files share are declared in :mod:`ctxplan.config.options`; the few
that only the command line has (``--json``, ``--config``, ``--set``, ``--store`` ...) are declared
below, the same way. :func:`command` turns a command's list of options into a typer command: each
becomes a typer option with its flag, type, default, unit (as the metavar) and help, and the
command body receives an :class:`Invocation` holding the values.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from ctxplan.cli.app import Command
from ctxplan.config.options import Declared, Opt, declared, file_options, subjects
from ctxplan.errors import UserInputError

# Options of the command line alone (not of the API or of files), declared once.
CLI_ONLY: dict[str, Declared] = {d.name: d for d in (
    Declared("as_json", bool, Opt(False, "Machine-readable output.", flag="--json")),
    Declared("config", str | None, Opt(
        None, "Study file (solve, sweep) or point file (eval): YAML holding every option; flags "
        "given on the command line override it. See docs/study-files.md.", unit="FILE")),
    Declared("set_", list[str] | None, Opt(
        None, "Override one field, path=value (repeatable), e.g. --set sla.tpot_max=30ms, "
        "--set chip.memory_gb=96. Applied after the file and the flags.", flag="--set",
        unit="PATH=VALUE")),
    Declared("timings", bool, Opt(
        False, "Report wall-clock time (never included otherwise, so output is byte-for-byte "
        "reproducible).")),
    Declared("store", str | None, Opt(
        None, "SQLite result store to reuse and record every evaluation in (default: "
        "$CTXPLAN_STORE, else ~/.cache/ctxplan/results.sqlite).", unit="FILE")),
    Declared("no_store", bool, Opt(False, "Neither read nor write the result store.")),
    Declared("trace", str | None, Opt(
        None, "Write a Perfetto / Chrome trace JSON here (every layer is simulated).",
        unit="FILE")),
    Declared("plot", str | None, Opt(
        None, "Draw the command's picture into this PNG (or .svg, .pdf): N*(S) for sweep, "
        "chips against the rate for capacity, the tornado for sensitivity, the front for "
        "pareto.", unit="FILE")),
    Declared("out", str | None, Opt(None, "Write the results to FILE.csv or FILE.json.",
                                    unit="FILE")),
    Declared("brief", bool, Opt(
        False, "Print the answer alone (N*, the two pools with their TTFT and TPOT, the KV "
        "tier, what binds, the SLA), without the tables of the search.")),
)}


def typer_parameter(d: Declared, *, name: str | None = None, flags: tuple[str, ...] = (),
                    hidden: bool = False) -> inspect.Parameter:
    """The typer option of one declared option (``name`` / ``flags``: a hidden parameter
    standing for another spelling of it)."""
    tp: Any = d.cli_type()
    default = d.cli_default
    names = flags or (d.flag, *d.opt.aliases)
    if tp is bool:
        info = typer.Option(*names, help=d.opt.help, metavar="", hidden=hidden)   # no <bool>
    else:
        info = typer.Option(*names, help=d.opt.help, metavar=d.opt.unit or None, hidden=hidden)
        if default is None:
            tp = tp | None
    return inspect.Parameter(name or d.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[tp, info])


def _spelling(name: str, i: int) -> str:
    """The parameter name of the i-th hidden spelling of option ``name``."""
    return f"{name}__spelling{i}"


def _given(ctx: typer.Context, values: dict[str, Any], options: Mapping[str, Declared]
           ) -> frozenset[str]:
    """The options typed on the command line, each under its own name: a hidden spelling's
    value moves to its option (typed twice, in two spellings, it is refused)."""
    def typed(name: str) -> bool:
        source = ctx.get_parameter_source(name)
        return source is not None and source.name == "COMMANDLINE"

    given = {n for n in options if typed(n)}
    for n, d in options.items():
        for i, flag in enumerate(d.opt.hidden_flags):
            alias = _spelling(n, i)
            value = values.pop(alias, None)
            if not typed(alias):
                continue
            if n in given:
                raise UserInputError(d.flag, value, f"give {d.flag} once ({flag} is another "
                                     "spelling of it)", "given twice")
            values[n] = value
            given.add(n)
    return frozenset(given)


@dataclass(frozen=True)
class Invocation:
    """One run of a command: the values of its options and how each was given."""

    ctx: typer.Context
    values: Mapping[str, Any]
    file_kind: str | None            # "study" / "point": the file --config loads
    file_paths: Mapping[str, str]    # option -> file field its flag overrides
    given: frozenset[str] = frozenset()   # the options typed on the command line
    hidden: frozenset[str] = frozenset()  # options the command accepts without showing them

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def of(self, group: type) -> dict[str, Any]:
        """The values of an option group (a TypedDict of ctxplan.config.options); a hidden
        option (``command(hidden=...)``) only when it was typed."""
        return {name: self.values[name] for name in declared(group)
                if name in self.values and (name not in self.hidden or name in self.given)}

    def typed(self, name: str) -> bool:
        """Whether option ``name`` was typed on the command line (in any of its spellings)."""
        return name in self.given

    def typed_flags(self) -> dict[str, Any]:
        """{file field: value} for the options typed on the command line (defaults left out:
        they must not override a study / point file)."""
        return {path: self.values[name] for name, path in self.file_paths.items()
                if name in self.given}

    def from_file(self) -> bool:
        """Whether the configuration comes from a file (--config) or --set overrides."""
        return self.values.get("config") is not None or bool(self.values.get("set_"))


def command(app: typer.Typer, name: str, *, subject: tuple[str, ...] = (),
            groups: tuple[type, ...] = (), cli: tuple[str, ...] = (),
            local: tuple[Declared, ...] = (), file_kind: str | None = None,
            file_paths: Mapping[str, str] | None = None, hidden: tuple[str, ...] = (),
            ) -> Callable[[Callable[[Invocation], None]], Callable[..., None]]:
    """Register ``body`` as command ``name`` with these options: the ``subject`` options (model,
    chip, ...), every option of ``groups``, the command-line-only options ``cli``, and the
    options of this command alone, ``local``. ``file_paths`` overrides an option's file field
    (solve's --context fills ``contexts``). ``hidden``: options of the groups the command
    accepts but does not list in --help, for it takes one value of them only (capacity's
    --batch auto): typed, they reach the API, which refuses another value naming the fix."""
    options: dict[str, Declared] = dict(subjects(*subject))
    for group in groups:
        options.update(declared(group))
    options.update({n: CLI_ONLY[n] for n in cli})
    options.update({d.name: d for d in local})
    in_file = file_options(file_kind) if file_kind else {}
    paths = {n: (file_paths or {}).get(n, d.file_path) for n, d in options.items()
             if n in in_file or n in (file_paths or {})}

    def register(body: Callable[[Invocation], None]) -> Callable[..., None]:
        def run(ctx: typer.Context, **values: Any) -> None:
            given = _given(ctx, values, options)
            body(Invocation(ctx, values, file_kind, paths, given, frozenset(hidden)))

        params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    annotation=typer.Context)]
        params += [typer_parameter(d, hidden=n in hidden) for n, d in options.items()]
        params += [typer_parameter(d, name=_spelling(n, i), flags=(flag,), hidden=True)
                   for n, d in options.items() for i, flag in enumerate(d.opt.hidden_flags)]
        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        run.__doc__ = body.__doc__
        run.__name__ = body.__name__
        app.command(name, cls=Command)(run)
        return run

    return register


def require(inv: Invocation, *names: str) -> None:
    """Without --config, these options are required."""
    for name in names:
        if inv[name] is None:
            flag = SUBJECT_FLAGS.get(name, "--" + name.replace("_", "-"))
            raise UserInputError(flag, None, f"give {flag}, or a file with --config FILE",
                                 "required option missing")


SUBJECT_FLAGS = {n: d.flag for n, d in subjects("model", "chip", "context", "contexts",
                                                  "phase", "cp").items()}
