"""The report's charts, drawn from the JSON of a result (``to_dict()``, or a saved ``--json``).

* :func:`nstar_chart`: N*(S), prefill and decode chips stacked per context length;
* :func:`search_chart`: the search path, latency against chips per pool, the SLA as a line;
* :func:`capacity_chart`: chips against the arrival rate (``ctxplan capacity``);
* :func:`tornado_chart`: what the answer hinges on (``ctxplan sensitivity``);
* :func:`pareto_chart`: the decode shapes and their front (``ctxplan pareto``).

Each returns an SVG string (:mod:`ctxplan.report.page.svg`) whose marks carry their values as
tooltips. Colours match the PNG plots of :mod:`ctxplan.report.plot`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ctxplan.config.units import format_count as plural
from ctxplan.config.units import format_duration, format_rate, format_short, format_tokens
from ctxplan.report.page.svg import (
    AXIS,
    Canvas,
    Frame,
    Linear,
    Log2,
    legend,
    nice_ticks,
    pow2_ticks,
    tick_label,
    y_axis,
)
from ctxplan.report.view.capacity import shape_cell

PREFILL = "#4C72B0"
DECODE = "#DD8452"
SLA = "#C44E52"
INFEASIBLE = "#bbbbbb"
TIER_COLOURS = ("#4C72B0", "#2A9D5C", "#8172B3", "#DD8452", "#937860", "#DA8BC3")
LOW = "#4C72B0"     # a figure moved down
HIGH = "#DD8452"    # a figure moved up

Json = Mapping[str, Any]


def _pool_text(pool: Json | None, name: str) -> str:
    if pool is None:
        return "-"
    return f"{pool['chips']} ({name} {pool['cp']} x TP {pool['tp']})"


def _stacked_frame(c: Canvas, frame: Frame, totals: Sequence[int], widest: float
                   ) -> tuple[Frame, Linear, float, float]:
    """The chips axis of a stacked bar chart with one bar per total: (frame, y scale, slot
    width per bar, bar width at most ``widest``)."""
    ticks = nice_ticks(0, max([*totals, 1]) * 1.15)
    y = Linear(0, ticks[-1], frame.bottom, frame.top)
    y_axis(c, frame, ticks, y, "chips")
    slot = frame.width / max(len(totals), 1)
    return frame, y, slot, min(widest, slot * 0.6)


def nstar_chart(points: Sequence[Json], chart_id: str) -> str:
    """Chips per context length: prefill (bottom) and decode (top) stacked, N* above."""
    n = len(points)
    width, height = max(420.0, 110.0 * n + 120), 320.0
    c = Canvas(width, height, "N*(S): prefill and decode chips per context length")
    frame, y, slot, bar = _stacked_frame(c, Frame(64, 30, width - 16, height - 58),
                                         [p["total_chips"] or 0 for p in points], 64.0)
    for i, p in enumerate(points):
        x = frame.left + slot * (i + 0.5)
        s = format_tokens(p["context_length"])
        c.text(x, frame.bottom + 16, f"S = {s}", size=11)
        if not p["feasible"]:
            h = (frame.bottom - frame.top) * 0.25
            c.rect(x - bar / 2, frame.bottom - h, bar, h, colour=INFEASIBLE,
                   tip=f"S = {s}: infeasible: {p.get('infeasible_reason') or ''}")
            c.text(x, frame.bottom - h - 6, "infeasible", size=10, colour=AXIS)
            continue
        pre, dec = p["prefill"], p["decode"]
        head = (f"S = {s}: N* = {plural(p['total_chips'], 'chip')}, KV tier {p['kv_tier']}; "
                f"TTFT {format_duration(pre['ttft_s'])}, TPOT {format_duration(dec['tpot_s'])}"
                f" at batch {dec['batch']}")
        base = 0
        for pool, colour, name in ((pre, PREFILL, "prefill Np"), (dec, DECODE, "decode Nd")):
            y0, y1 = y(base), y(base + pool["chips"])
            c.rect(x - bar / 2, y1, bar, y0 - y1, colour=colour,
                   tip=f"{head}. {name.split()[0]}: {_pool_text(pool, name.split()[1])}")
            base += pool["chips"]
        c.text(x, y(base) - 6, f"N* = {p['total_chips']}", size=11, weight="bold")
        c.text(x, frame.bottom + 30, format_short(pre["ttft_s"]) + " / "
               + format_short(dec["tpot_s"]), size=9, colour=AXIS)
    c.text(frame.left + frame.width / 2, height - 8, "context length S  (below each: TTFT / "
           "TPOT at N*)", size=10, colour=AXIS)
    legend(c, frame.left + 8, 16, ((PREFILL, "prefill chips (Np x TP)"),
                                   (DECODE, "decode chips (Nd x TP)")))
    return c.svg(chart_id)


def _latency(cand: Json) -> float | None:
    return cand.get("ttft_s") if cand["phase"] == "prefill" else cand.get("tpot_s")


def search_chart(solve: Json, chart_id: str) -> str:
    """Two panels, prefill TTFT and decode TPOT against chips (log2), one colour per KV tier:
    every simulated candidate as a dot (hollow: misses the SLA), the SLA as a dashed line, the
    chosen pool ringed."""
    width, height = 760.0, 320.0
    c = Canvas(width, height, "Search path: simulated latency against chips, per pool")
    tiers = [t["kv_tier"] for t in solve["tiers"]]
    colour = {t: TIER_COLOURS[i % len(TIER_COLOURS)] for i, t in enumerate(tiers)}
    best = {ph: solve.get(ph) for ph in ("prefill", "decode")}
    sla = solve["sla"]
    limits = {"prefill": sla.get("ttft_max_s"), "decode": sla.get("tpot_limit_s")}
    panel_w = (width - 40) / 2
    for k, phase in enumerate(("prefill", "decode")):
        frame = Frame(20 + k * panel_w + 58, 34, 20 + (k + 1) * panel_w - 12, height - 64)
        cands = [x for x in solve["candidates"]
                 if x["phase"] == phase and x["simulated"] and _latency(x) is not None]
        label = "TTFT" if phase == "prefill" else "TPOT"
        c.text((frame.left + frame.right) / 2, 20, f"{phase}: {label} against chips",
               size=12, weight="bold")
        if not cands:
            c.text((frame.left + frame.right) / 2, (frame.top + frame.bottom) / 2,
                   "no simulated candidate", size=11, colour=AXIS)
            continue
        lats = [float(_latency(x) or 0.0) for x in cands]
        limit = limits[phase]
        unit, div = _time_unit(max([*lats, limit or 0.0]))
        hi = max([*lats, limit or 0.0]) / div
        ticks = nice_ticks(0, hi * 1.12)
        y = Linear(0, ticks[-1], frame.bottom, frame.top)
        y_axis(c, frame, ticks, y, f"{label} ({unit})")
        chips = [float(x["chips"]) for x in cands]
        xt = pow2_ticks(min(chips), max(chips))
        x = Log2(xt[0], xt[-1], frame.left + 10, frame.right - 10)
        for t in xt:
            c.text(x(t), frame.bottom + 14, tick_label(t), size=10, colour=AXIS)
        c.line(frame.left, frame.bottom, frame.right, frame.bottom)
        c.text((frame.left + frame.right) / 2, frame.bottom + 32, "chips (N x TP)", size=10,
               colour=AXIS)
        if limit is not None:
            c.line(frame.left, y(limit / div), frame.right, y(limit / div), colour=SLA,
                   width=1.4, dash="5 4")
            c.text(frame.right - 2, y(limit / div) - 4, f"SLA {format_short(limit)}", size=10,
                   anchor="end", colour=SLA)
        for tier in tiers:
            mine = sorted((x for x in cands if x["kv_tier"] == tier),
                          key=lambda q: (q["chips"], q["tp"]))
            for tp in sorted({q["tp"] for q in mine}):
                line = [(x(q["chips"]), y(float(_latency(q) or 0.0) / div))
                        for q in mine if q["tp"] == tp]
                c.polyline(line, colour=colour[tier], width=1.2, dash="2 3")
            for q in mine:
                lat = float(_latency(q) or 0.0)
                verdict = "meets the SLA" if q["meets_sla"] else "misses the SLA"
                tip = (f"{phase} {tier}: N {q['n']} x TP {q['tp']} = "
                       f"{plural(q['chips'], 'chip')}, batch {q['batch']}: {label} "
                       f"{format_duration(lat)}, {verdict} "
                       f"(step {q['step']}{', cached' if q['cache_hit'] else ''})")
                c.circle(x(q["chips"]), y(lat / div), 4.5, colour=colour[tier], tip=tip,
                         hollow=not q["meets_sla"])
        chosen = best[phase]
        if chosen is not None and solve.get("kv_tier") is not None:
            lat = chosen.get("ttft_s") if phase == "prefill" else chosen.get("tpot_s")
            if lat is not None:
                c.add(f'<circle cx="{x(chosen["chips"]):.1f}" cy="{y(lat / div):.1f}" r="9" '
                      f'fill="none" stroke="#111" stroke-width="1.5"/>')
    legend(c, 78, height - 6, [(colour[t], f"KV tier {t}") for t in tiers]
           + [(SLA, "SLA"), ("#111", "ringed: the answer; hollow: misses the SLA")])
    return c.svg(chart_id)


def _time_unit(seconds: float) -> tuple[str, float]:
    if seconds >= 120:
        return "min", 60.0
    if seconds >= 1:
        return "s", 1.0
    if seconds >= 1e-3:
        return "ms", 1e-3
    return "us", 1e-6


def capacity_chart(cap: Json, chart_id: str) -> str:
    """Chips against the arrival rate: prefill and decode chips stacked, xPyD above."""
    points = cap["points"]
    n = len(points)
    width, height = max(420.0, 100.0 * n + 120), 300.0
    c = Canvas(width, height, "Chips against the arrival rate")
    frame, y, slot, bar = _stacked_frame(c, Frame(64, 30, width - 16, height - 44),
                                         [p.get("total_chips") or 0 for p in points], 60.0)
    for i, p in enumerate(points):
        x = frame.left + slot * (i + 0.5)
        rate = format_rate(p["rate_per_s"])
        c.text(x, frame.bottom + 16, rate, size=11)
        if not p["feasible"]:
            h = (frame.bottom - frame.top) * 0.25
            c.rect(x - bar / 2, frame.bottom - h, bar, h, colour=INFEASIBLE,
                   tip=f"{rate}: infeasible: {p.get('reason') or ''}")
            continue
        base = 0
        for key, colour, name in (("prefill_chips", PREFILL, "prefill"),
                                  ("decode_chips", DECODE, "decode")):
            chips = p.get(key) or 0
            y0, y1 = y(base), y(base + chips)
            c.rect(x - bar / 2, y1, bar, y0 - y1, colour=colour,
                   tip=f"{rate}: {p.get('layout')}, {plural(p.get('total_chips'), 'chip')}; "
                   f"{name} {plural(chips, 'chip')}; shapes {shape_cell(p)} (CP x TP)")
            base += chips
        c.text(x, y(base) - 6, f"{base} ({p.get('layout')})", size=10, weight="bold")
    c.text(frame.left + frame.width / 2, height - 8, "arrival rate (requests per second)",
           size=10, colour=AXIS)
    legend(c, frame.left + 8, 16, ((PREFILL, "prefill chips"), (DECODE, "decode chips")))
    return c.svg(chart_id)


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def tornado_chart(sens: Json, chart_id: str) -> str:
    """Per figure (largest effect on top): the change of N* in chips and of the base plan's
    TPOT and TTFT in %, one bar per step (down in blue, up in orange)."""
    rows = sens["figures"]
    base = sens["base"]
    row_h = 26.0
    label_w = 250.0
    width = 900.0
    height = 56 + row_h * max(len(rows), 1) + 24
    c = Canvas(width, height, "What the answer hinges on: each figure moved, one at a time")
    panel_w = (width - label_w - 20) / 3
    base_chips = base.get("total_chips")
    base_tpot = (base.get("decode") or {}).get("tpot_s")
    base_ttft = (base.get("prefill") or {}).get("ttft_s")

    def chips(m: Json) -> float | None:
        s = m.get("solve")
        if s is None or base_chips is None or not s["feasible"]:
            return None
        return float(s["total_chips"] - base_chips)

    def rel(new: float | None, old: float | None) -> float | None:
        return None if new is None or not old else 100.0 * (new / old - 1.0)

    panels = (("change of N* (chips)", chips, ""),
              ("base plan TPOT (%)", lambda m: rel(m["base_plan"]["tpot_s"], base_tpot), "%"),
              ("base plan TTFT (%)", lambda m: rel(m["base_plan"]["ttft_s"], base_ttft), "%"))
    for k, (title, value, unit) in enumerate(panels):
        frame = Frame(label_w + k * panel_w + 10, 40, label_w + (k + 1) * panel_w - 6,
                      40 + row_h * max(len(rows), 1))
        values = [v for r in rows for m in r["moves"] if (v := _finite(value(m))) is not None]
        span = max([abs(v) for v in values] + [1.0 if unit == "" else 5.0])
        ticks = nice_ticks(-span, span, 4)
        x = Linear(ticks[0], ticks[-1], frame.left, frame.right)
        for t in ticks:
            c.line(x(t), frame.top, x(t), frame.bottom, colour="#eeeeee")
            c.text(x(t), frame.bottom + 14, tick_label(t), size=9, colour=AXIS)
        c.line(x(0), frame.top - 4, x(0), frame.bottom, colour="#111")
        c.text((frame.left + frame.right) / 2, 28, title, size=11, weight="bold")
        for i, r in enumerate(rows):
            yc = frame.top + row_h * (i + 0.5)
            moves = sorted(r["moves"], key=lambda m: -abs(m["step"]))
            big = max([abs(m["step"]) for m in moves] + [1e-9])
            for m in moves:
                v = _finite(value(m))
                step = f"{100 * m['step']:+.0f}%"
                if v is None:
                    if k == 0 and m.get("solve") is not None and not m["solve"]["feasible"]:
                        c.text(x(0) + 4, yc + 4, f"infeasible at {step}", size=9, anchor="start",
                               colour=SLA)
                    continue
                h = 6 + 10 * abs(m["step"]) / big
                x0, x1 = sorted((x(0), x(v)))
                shown = f"{v:+.0f} chips" if unit == "" else f"{v:+.1f} %"
                c.rect(x0, yc - h / 2, max(x1 - x0, 1.0), h,
                       colour=LOW if m["step"] < 0 else HIGH,
                       tip=f"{r['figure']} {step}: {title.split(' (')[0]} {shown}",
                       extra=f' fill-opacity="{1.0 - 0.5 * abs(m["step"]) / big:.2f}"')
            if k == 0:
                c.text(label_w, yc + 4, r["figure"], size=10, anchor="end")
    legend(c, label_w + 10, height - 6, ((LOW, "figure moved down"),
                                         (HIGH, "figure moved up")))
    return c.svg(chart_id)


def pareto_chart(data: Json, chart_id: str) -> str:
    """Tokens/s per chip against tokens/s per user: every simulated decode shape as a dot
    (hollow: misses the TPOT target), the front (decode pool) and the whole plan's front as
    lines, the TPOT target as a dashed vertical."""
    width, height = 760.0, 360.0
    c = Canvas(width, height, "Decode shapes: tokens/s per chip against tokens/s per user")
    frame = Frame(70, 30, width - 20, height - 48)
    pts = [p for p in data["points"] if p["simulated"]]
    if not pts:
        c.text(width / 2, height / 2, "no simulated shape", size=11, colour=AXIS)
        return c.svg(chart_id)
    limit = data["sla"]["tpot_limit_s"]
    xs = [p["tokens_per_s_per_user"] for p in pts]
    ys = [p["tokens_per_s_per_chip"] for p in pts]
    x_ticks = nice_ticks(0, max([*xs, 1.0 / limit]) * 1.05)
    y_ticks = nice_ticks(0, max(ys) * 1.08)
    x = Linear(0, x_ticks[-1], frame.left, frame.right)
    y = Linear(0, y_ticks[-1], frame.bottom, frame.top)
    y_axis(c, frame, y_ticks, y, "tokens/s per chip")
    c.line(frame.left, frame.bottom, frame.right, frame.bottom)
    for t in x_ticks:
        c.text(x(t), frame.bottom + 14, tick_label(t), size=10, colour=AXIS)
    c.text((frame.left + frame.right) / 2, frame.bottom + 32, "tokens/s per user (1 / TPOT)",
           size=10, colour=AXIS)
    c.line(x(1.0 / limit), frame.top, x(1.0 / limit), frame.bottom, colour=SLA, width=1.4,
           dash="5 4")
    c.text(x(1.0 / limit) + 4, frame.top + 10, f"TPOT {format_short(limit)}", size=10,
           anchor="start", colour=SLA)
    for key, colour in (("plan_front", PREFILL), ("front", DECODE)):
        field = "plan_tokens_per_s_per_chip" if key == "plan_front" else "tokens_per_s_per_chip"
        line = [(x(p["tokens_per_s_per_user"]), y(p[field])) for p in data[key]
                if p[field] is not None]
        c.polyline(line, colour=colour, width=1.8)
    for p in pts:
        on = p["on_front"]
        shape = (f"DP {p['dp']} x " if p.get("dp", 1) > 1 else "") + \
            f"TP {p['tp']} x Nd {p['cp']}" + (f" x PP {p['pp']}" if p["pp"] > 1 else "")
        tip = (f"{p['kv_tier']}, {shape} = {plural(p['chips'], 'chip')}, batch {p['batch']}: "
               f"TPOT {format_duration(p['tpot_s'])}, {p['tokens_per_s_per_user']:.3g} tokens/s "
               f"per user, {p['tokens_per_s_per_chip']:.3g} per chip"
               + ("; on the front" if on else ""))
        c.circle(x(p["tokens_per_s_per_user"]), y(p["tokens_per_s_per_chip"]),
                 4.5 if on else 3.0, colour=DECODE if on else INFEASIBLE, tip=tip,
                 hollow=not p["meets_sla"])
    legend(c, frame.left + 8, 16, ((DECODE, "front (decode pool)"),
                                   (PREFILL, "front (whole plan)"), (INFEASIBLE, "other shapes"),
                                   (SLA, "TPOT target; hollow: misses it")))
    return c.svg(chart_id)
