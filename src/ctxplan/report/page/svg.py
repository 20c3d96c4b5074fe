"""Small SVG charts written by hand: stacked bars, scatter-with-lines and horizontal bars.

Why our own SVG rather than a charting library (docs/report.md, "Libraries"): the report must be
one self-contained file that works offline and prints well, and ctxplan's output is byte-for-byte
deterministic. An SVG string meets all three at a few kilobytes a chart; matplotlib's SVG is
tens to hundreds of kilobytes of glyph paths with no hover, and a JavaScript library would be
vendored into every report (tens of kilobytes at best) and draw only once a script runs.

Every mark carries its value twice: a ``<title>`` child (the browser's own tooltip, no script)
and a ``data-tip`` attribute that the report's small script shows as a styled tooltip. Numbers
are written with a fixed number of decimals, so the same data gives the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif"
AXIS = "#555"
GRID = "#e4e4e4"
TEXT = "#222"


def _f(x: float) -> str:
    """A coordinate: one decimal, no '-0.0'."""
    text = f"{x:.1f}"
    return "0.0" if text == "-0.0" else text


def _attr(text: str) -> str:
    return escape(text, quote=True)


@dataclass
class Canvas:
    """An SVG drawing of ``width`` x ``height`` user units (it scales to its box)."""

    width: float
    height: float
    label: str                      # aria-label: what the chart shows, in words
    parts: list[str] = field(default_factory=list)

    def add(self, element: str) -> None:
        self.parts.append(element)

    def text(self, x: float, y: float, text: str, *, size: float = 11, anchor: str = "middle",
             weight: str = "normal", colour: str = TEXT, rotate: bool = False,
             cls: str = "") -> None:
        transform = f' transform="rotate(-90 {_f(x)} {_f(y)})"' if rotate else ""
        klass = f' class="{cls}"' if cls else ""
        self.add(f'<text x="{_f(x)}" y="{_f(y)}" font-size="{size:g}" text-anchor="{anchor}" '
                 f'font-weight="{weight}" fill="{colour}"{transform}{klass}>'
                 f"{escape(text)}</text>")

    def line(self, x1: float, y1: float, x2: float, y2: float, *, colour: str = AXIS,
             width: float = 1.0, dash: str = "") -> None:
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(f'<line x1="{_f(x1)}" y1="{_f(y1)}" x2="{_f(x2)}" y2="{_f(y2)}" '
                 f'stroke="{colour}" stroke-width="{width:g}"{d}/>')

    def rect(self, x: float, y: float, w: float, h: float, *, colour: str, tip: str = "",
             cls: str = "mark", extra: str = "") -> None:
        self.add(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(max(w, 0.0))}" '
                 f'height="{_f(max(h, 0.0))}" fill="{colour}"{_tip_attrs(tip, cls)}{extra}>'
                 f"{_title(tip)}</rect>")

    def circle(self, x: float, y: float, r: float, *, colour: str, tip: str = "",
               hollow: bool = False, cls: str = "mark") -> None:
        paint = (f'fill="#fff" stroke="{colour}" stroke-width="2"' if hollow
                 else f'fill="{colour}" stroke="#fff" stroke-width="1"')
        self.add(f'<circle cx="{_f(x)}" cy="{_f(y)}" r="{r:g}" {paint}{_tip_attrs(tip, cls)}>'
                 f"{_title(tip)}</circle>")

    def polyline(self, points: Sequence[tuple[float, float]], *, colour: str,
                 width: float = 1.6, dash: str = "") -> None:
        if len(points) < 2:
            return
        d = f' stroke-dasharray="{dash}"' if dash else ""
        coords = " ".join(f"{_f(x)},{_f(y)}" for x, y in points)
        self.add(f'<polyline points="{coords}" fill="none" stroke="{colour}" '
                 f'stroke-width="{width:g}"{d}/>')

    def svg(self, chart_id: str) -> str:
        body = "".join(self.parts)
        return (f'<svg id="{_attr(chart_id)}" class="chart" role="img" '
                f'aria-label="{_attr(self.label)}" width="{_f(self.width)}" '
                f'height="{_f(self.height)}" viewBox="0 0 {_f(self.width)} '
                f'{_f(self.height)}" xmlns="http://www.w3.org/2000/svg" '
                f'font-family="{_attr(FONT)}">{body}</svg>')


def _tip_attrs(tip: str, cls: str) -> str:
    out = f' class="{cls}"' if cls else ""
    return out + (f' data-tip="{_attr(tip)}"' if tip else "")


def _title(tip: str) -> str:
    return f"<title>{escape(tip)}</title>" if tip else ""


# ------------------------------------------------------------------------------- scales


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (steps of 1, 2, 2.5 or 5 x 10^k)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks = []
    value = first
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def tick_label(value: float) -> str:
    """12, 2.5, 0.25, 1,024: as short as the value allows."""
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:.3g}"


def pow2_ticks(lo: float, hi: float) -> list[float]:
    """Powers of two from below ``lo`` to above ``hi`` (chip counts)."""
    a = 2 ** math.floor(math.log2(max(lo, 1.0)))
    b = 2 ** math.ceil(math.log2(max(hi, 1.0)))
    out = []
    v = a
    while v <= b:
        out.append(float(v))
        v *= 2
    if len(out) == 1:
        out.append(out[0] * 2)
    return out


@dataclass(frozen=True)
class Linear:
    """Value -> pixel on a linear axis."""

    lo: float
    hi: float
    p0: float
    p1: float

    def __call__(self, v: float) -> float:
        return self.p0 + (v - self.lo) / (self.hi - self.lo) * (self.p1 - self.p0)


@dataclass(frozen=True)
class Log2:
    """Value -> pixel on a log2 axis (values > 0)."""

    lo: float
    hi: float
    p0: float
    p1: float

    def __call__(self, v: float) -> float:
        a, b = math.log2(self.lo), math.log2(self.hi)
        return self.p0 + (math.log2(v) - a) / (b - a) * (self.p1 - self.p0)


# ------------------------------------------------------------------------------- frames


@dataclass(frozen=True)
class Frame:
    """The plotting area of a panel within the canvas."""

    left: float
    top: float
    right: float
    bottom: float

    @property
    def width(self) -> float:
        return self.right - self.left

    @property
    def height(self) -> float:
        return self.bottom - self.top


def y_axis(c: Canvas, frame: Frame, ticks: Sequence[float], scale: Linear, label: str,
           fmt: object = tick_label) -> None:
    """Gridlines, tick labels and the axis title on the left of ``frame``."""
    for t in ticks:
        y = scale(t)
        c.line(frame.left, y, frame.right, y, colour=GRID)
        c.text(frame.left - 6, y + 4, fmt(t), size=10, anchor="end", colour=AXIS)  # type: ignore[operator]
    c.line(frame.left, frame.top, frame.left, frame.bottom)
    c.text(frame.left - 44, (frame.top + frame.bottom) / 2, label, size=11, rotate=True,
           colour=AXIS)


def legend(c: Canvas, x: float, y: float, items: Sequence[tuple[str, str]]) -> None:
    """Coloured squares and names in a row starting at (x, y)."""
    for colour, name in items:
        c.rect(x, y - 9, 10, 10, colour=colour, cls="")
        c.text(x + 14, y, name, size=10, anchor="start")
        x += 14 + 6.2 * len(name) + 16
