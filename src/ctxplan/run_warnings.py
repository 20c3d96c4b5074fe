"""The warnings of a run: what the user should know about an answer that is still given.

A user mistake stops a run (:class:`ctxplan.errors.UserInputError`, exit 2); a warning does not:
the run goes on and its result says it. The channel, shared by every kind of warning:

* the checks that find one live at the edge (:mod:`ctxplan.config.edge_warnings`: a context
  beyond the model's trained length, FP4 weights on a chip without FP4) and return lines made by
  :func:`warning_line`, one per warning, naming the field and the value as an error does;
* a :class:`RunWarnings` collects them for one run, in order, each once;
* results carry them as ``warnings``, a tuple of lines (``EvalResult``, ``SolveResult``; a sweep
  lists its points' together), and ``to_dict`` writes them as ``"warnings": [...]``;
* the command line prints each on stderr as ``warning: <line>``, never on stdout, so ``--json``
  stays parseable (:func:`ctxplan.cli.app.print_warnings`).

To add a warning: a check in config/edge_warnings.py returning ``warning_line(...)``, called
where the run's warnings are gathered (``edge_warnings.point_warnings``), or ``add`` it to the
run's collector there. This module imports nothing from ctxplan, so any layer may use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator


def warning_line(field: str, value: object, problem: str, consequence: str) -> str:
    """One warning as one line: '<field> = <value>: <problem>; <consequence>' (the value as
    given when it is text, else as Python shows it)."""
    shown = value if isinstance(value, str) else repr(value)
    text = f"{field} = {shown}: {problem}; {consequence}"
    return " ".join(text.split())   # one line, whatever the parts held


class RunWarnings:
    """The warnings of one run, in the order first raised, each once."""

    def __init__(self, lines: Iterable[str] = ()) -> None:
        self._lines: dict[str, None] = {}
        self.extend(lines)

    def add(self, line: str) -> None:
        self._lines.setdefault(line)

    def extend(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.add(line)

    def __iter__(self) -> Iterator[str]:
        return iter(self._lines)

    def __len__(self) -> int:
        return len(self._lines)

    @property
    def lines(self) -> tuple[str, ...]:
        """What a result carries as ``warnings``."""
        return tuple(self._lines)


def merged(*groups: Iterable[str]) -> tuple[str, ...]:
    """Several runs' warnings as one tuple, in order, each once (a sweep's, of its points)."""
    return RunWarnings(line for group in groups for line in group).lines
