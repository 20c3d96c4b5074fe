"""The pieces a view is made of: an answer (a title and labelled facts) and tables of cells.

They hold text only, every number already written by :mod:`ctxplan.config.units`; how a piece is
drawn is the renderer's business (:mod:`ctxplan.report.terminal` for the terminal at 80
columns, :mod:`ctxplan.report.page` for the HTML page). A column marked ``detail`` is for the
page alone: the terminal leaves it out (what it says is in the notes under the table, or in
``--json``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

# Row classes (the page's CSS classes; the terminal's styles in report.terminal).
BEST, OK, BAD, WARN, DIM = "best", "ok", "bad", "warn", "dim"


@dataclass(frozen=True)
class Column:
    name: str
    numeric: bool = False  # right-aligned; a cell is never wrapped or cut
    wrap: bool = False     # prose: wraps between words, never inside one
    name_col: bool = False  # names (presets, KV tiers, figures): never wrapped or cut
    detail: bool = False   # the page only (the terminal has 80 columns)


@dataclass
class Row:
    cells: list[str]
    cls: str = ""          # BEST, OK, BAD, WARN, DIM or ""


@dataclass
class TableView:
    id: str
    title: str
    columns: list[Column]
    rows: list[Row] = field(default_factory=list)
    caption: str = ""
    notes: list[str] = field(default_factory=list)   # said under the table

    def add(self, *cells: object, cls: str = "") -> None:
        assert len(cells) == len(self.columns), (self.id, cells)
        self.rows.append(Row(["-" if c is None else str(c) for c in cells], cls))

    def column(self, name: str) -> list[str]:
        """The cells of one column, top to bottom."""
        i = [c.name for c in self.columns].index(name)
        return [r.cells[i] for r in self.rows]


@dataclass(frozen=True)
class Fact:
    label: str
    value: str
    brief: bool = False    # part of the answer alone (``--brief``)


@dataclass
class Answer:
    """A result's answer: a title (the question, or the answer in a line) and facts. The
    brief facts come first: they are the answer; the others say how it was reached."""

    title: str
    facts: list[Fact] = field(default_factory=list)
    ok: bool = True        # False: infeasible (drawn as a warning)

    def add(self, label: str, value: str, *, brief: bool = False) -> None:
        self.facts.append(Fact(label, value, brief))

    def pairs(self, *, brief: bool = False) -> list[tuple[str, str]]:
        return [(f.label, f.value) for f in self.facts if f.brief or not brief]


def joined(parts: Iterable[str], sep: str = "; ") -> str:
    return sep.join(p for p in parts if p)
