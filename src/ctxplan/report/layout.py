"""How terminal output fits 80 columns: compact tables whose name columns never shrink, and
sentences that wrap between phrases, never inside one.

Rich shrinks a table that is wider than the terminal by wrapping or cutting its cells ("h100-gt5…").
:func:`compact_table` spends two characters between columns instead of three and draws no
side borders; :func:`add_name_column` gives a column of names (presets, KV tiers, figures) the
width of its longest name, so other columns give way instead. :class:`Phrases` packs a long
sentence into lines at phrase boundaries ("N* = 176 chips" stays on one line).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text


def compact_table(title: str | None = None, caption: str | None = None, **kwargs: object
                  ) -> Table:
    """A table with a rule under its header, no side borders and one space of padding."""
    return Table(title=title, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False,
                 collapse_padding=True, show_edge=False, title_justify="left",
                 caption_justify="left", **kwargs)  # type: ignore[arg-type]


def longest_word(cells: Iterable[str]) -> int:
    """The width a column needs so that no word of its cells is cut: the longest word, plus
    the one space of padding rich counts in a column's minimum width."""
    return 1 + max((len(w) for c in cells for w in str(c).split()), default=1)


def add_name_column(table: Table, header: str, names: Sequence[str], **kwargs: object) -> None:
    """A column of names: as wide as its longest name (and never cut), its header may wrap."""
    table.add_column(header, no_wrap=True, min_width=max(longest_word(names), 1),
                     **kwargs)  # type: ignore[arg-type]


def words_column(table: Table, header: str, cells: Sequence[str], **kwargs: object) -> None:
    """A column of text that may wrap between words, never inside one (dtype or tier names)."""
    table.add_column(header, min_width=longest_word(cells), overflow="fold",
                     **kwargs)  # type: ignore[arg-type]


@dataclass
class Phrases:
    """A sentence of phrases, wrapped between phrases to the console's width; continuation
    lines are indented. A phrase wider than the console stays whole on its line."""

    phrases: Sequence[str]
    style: str | None = None
    indent: int = 2

    def lines(self, width: int) -> list[str]:
        out: list[str] = []
        line = ""
        for phrase in self.phrases:
            if not line:
                line = phrase
            elif len(line) + 1 + len(phrase) <= width:
                line += " " + phrase
            else:
                out.append(line)
                line = " " * self.indent + phrase
        if line:
            out.append(line)
        return out

    @property
    def plain(self) -> str:
        return " ".join(self.phrases)

    def __str__(self) -> str:
        return self.plain

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines(options.max_width):
            # A phrase wider than the console (a long path) is left whole for the terminal to
            # wrap, as a path must not be split at its spaces or cut.
            yield Text(line, style=self.style or "", no_wrap=True, overflow="ignore")
