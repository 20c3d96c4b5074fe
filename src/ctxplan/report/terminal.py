"""Views drawn on the terminal (rich renderables, no printing here): a table at 80 columns, an
answer as a title over aligned facts, the notes under a table.

What never happens, at any width: a number, a name or a word cut or split (a table's numeric,
name and plain columns are as wide as their widest cell, prose wraps between words; an answer's
values wrap between words). Columns marked ``detail`` are the page's only.
"""

from __future__ import annotations

from rich.console import Group, JustifyMethod, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ctxplan.report.layout import compact_table, longest_word, words_column
from ctxplan.report.view.base import BAD, BEST, DIM, OK, WARN, Answer, TableView

STYLES = {BEST: "bold green", OK: "green", BAD: "red", WARN: "yellow", DIM: "dim"}


def table(view: TableView) -> RenderableType:
    """The table of ``view`` without its detail columns, its title above and its caption
    below (its notes: :func:`with_notes`). Title and caption are paragraphs of their own, not
    rich's: rich wraps those to a width that counts the edge padding a compact table does not
    draw, so on a full-width table their last words fell off the line."""
    t = compact_table()
    shown = [i for i, c in enumerate(view.columns) if not c.detail]
    for i in shown:
        c = view.columns[i]
        cells = [r.cells[i] for r in view.rows]
        if c.wrap:   # left-justified: rich measures right-justified wrapping text too wide
            words_column(t, c.name, cells)
            continue
        # Whole cells, each on one line (numbers, names, short words); a header of several
        # words wider than every cell may wrap between them ("tok/s" over "/chip").
        justify: JustifyMethod = "right" if c.numeric else "left"
        widest = max((len(x) for x in cells), default=0)
        if " " in c.name and len(c.name) > widest:
            t.add_column(c.name, justify=justify,
                         min_width=max(widest, longest_word([c.name]) - 1))
        else:
            t.add_column(c.name, justify=justify, no_wrap=True)
    for r in view.rows:
        t.add_row(*(Text(r.cells[i]) for i in shown), style=STYLES.get(r.cls))
    parts: list[RenderableType] = [Text(view.title)] if view.title else []
    parts.append(t)
    if view.caption:
        parts.append(Text(view.caption, style="dim"))
    return Group(*parts)


def text(line: str) -> Text:
    """A line of text as it is (no rich markup: "[1]" and "[7, 16]" are shown)."""
    return Text(line)


def with_notes(view: TableView) -> list[RenderableType]:
    """The table, then each of its notes on its own (wrapped between words)."""
    return [table(view), *(text(n) for n in view.notes)]


def answer(view: Answer, *, brief: bool = False) -> RenderableType:
    """The title, then one line per fact ('label  value', values wrapped between words and
    indented under their start); ``brief``: the brief facts alone."""
    title = Text(view.title, style="bold" if view.ok else "bold red")
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in view.pairs(brief=brief):
        grid.add_row(Text(label), Text(value))
    return Group(title, Padding(grid, (0, 0, 0, 2), expand=False))
