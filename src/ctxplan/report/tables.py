"""Human tables for `ctxplan solve` and `ctxplan sweep` (rich renderables, no printing here).

Numbers are written by the formatters of :mod:`ctxplan.config.units`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from ctxplan.config.units import format_duration, format_gb, format_seconds, format_tokens

if TYPE_CHECKING:
    from ctxplan.solve import SolveResult
    from ctxplan.sweep import SweepResult

_lat = format_duration


def solve_answer_line(r: SolveResult) -> Text:
    head = (f"{r.model} on {r.chip} ({r.cluster}), S = {format_tokens(r.context_length)} "
            f"({r.context_length:,} tokens), batch {r.batch}: ")
    if r.best is None:
        return Text(head + "INFEASIBLE: " + r.infeasible_reason, style="bold red")
    b = r.best
    warm = ""
    if r.cached_fraction or r.prefill_ring != "pass-kv":
        warm = (f" (prefill of the {1 - r.cached_fraction:.0%} not cached, "
                f"{b.prefill.ring or r.prefill_ring})")
    return Text(head + f"N* = {b.total_chips} chips = prefill {b.prefill.chips} (Np "
                f"{b.prefill.answer} x tp {b.prefill.tp}) + decode {b.decode.chips} (Nd "
                f"{b.decode.answer} x tp {b.decode.tp}), KV tier {b.kv_tier}; TTFT "
                f"{_lat(b.prefill.latency_s)}{warm}, TPOT {_lat(b.decode.latency_s)}",
                style="bold")


def solve_tiers_table(r: SolveResult) -> Table:
    limit = r.sla.tpot_limit_s(r.batch)
    ttft = "none" if r.sla.ttft_max_s is None else format_duration(r.sla.ttft_max_s)
    t = Table(title=f"Per KV tier: TPOT <= {format_seconds(limit)} ({r.sla.tps_reading}), TTFT "
              f"<= {ttft}; {r.strategy}, '{r.candidate_set}' N, <= {r.max_chips} chips/pool",
              caption="N (wall): the answer and the capacity wall; * the best tier; "
              "! galloping fell back to a scan")
    t.add_column("KV tier", no_wrap=True)
    for col in ("Np (wall)", "TTFT", "Nd (wall)", "TPOT", "chips"):
        t.add_column(col, no_wrap=True, justify="right")
    for tier in r.tiers:
        p, d = tier.prefill, tier.decode
        chips = "-" if tier.total_chips is None else str(tier.total_chips)
        if p.fallback or d.fallback:
            chips += " !"
        t.add_row(f"{tier.kv_tier} ({tier.c_kv_bytes} B)" + (" *" if tier is r.best else ""),
                  _n(p.answer, p.tp, p.n_cap), _lat(p.latency_s), _n(d.answer, d.tp, d.n_cap),
                  _lat(d.latency_s), chips, style="bold green" if tier is r.best else None)
    return t


def solve_notes(r: SolveResult) -> list[str]:
    """What the tier table cannot say in a cell: why a tier fails, where galloping distrusted
    itself and scanned."""
    notes = []
    for tier in r.tiers:
        if not tier.feasible:
            notes.append(f"{tier.kv_tier}: {tier.infeasible_reason}")
        for plan in (tier.prefill, tier.decode):
            if plan.fallback:
                notes.append(f"! {tier.kv_tier} {plan.phase}: {plan.fallback_reason}")
    return notes


def _n(n: int | None, tp: int, n_cap: int | None = None) -> str:
    text = "-" if n is None else (str(n) if tp == 1 else f"{n}x{tp}")
    return text if n_cap is None else f"{text} ({n_cap})"


def search_path_table(r: SolveResult) -> Table:
    """Simulated candidates in search order; the memory checks below each wall on one row."""
    t = Table(title=f"Search path: {r.sim_calls} simulations, {r.cache_hits} cache hits")
    t.add_column("phase", no_wrap=True)
    t.add_column("tier", no_wrap=True)
    t.add_column("N", justify="right")
    t.add_column("step", no_wrap=True)
    t.add_column("latency", justify="right", no_wrap=True)
    t.add_column("GB/chip", justify="right", no_wrap=True)
    t.add_column("result")
    cands = list(r.candidates)
    i = 0
    while i < len(cands):
        c = cands[i]
        if c.step == "memory":
            j = i
            while (j < len(cands) and cands[j].step == "memory" and cands[j].phase == c.phase
                   and cands[j].kv_tier == c.kv_tier):
                j += 1
            group = cands[i:j]
            t.add_row(c.phase, c.kv_tier, ",".join(str(g.n) for g in group), "memory", "-",
                      format_gb(group[-1].per_chip_bytes), "does not fit", style="dim")
            i = j
            continue
        if c.cut_by:
            result, style = "does not fit", "dim"
        elif c.step == "wall":
            result, style = "no SLA: wall", "green"
        elif c.meets_sla:
            result, style = "meets SLA", "green"
        else:
            result, style = "misses SLA", "yellow"
        if c.cache_hit:
            result += " (cached)"
        t.add_row(c.phase, c.kv_tier, _n(c.n, c.tp), c.step, _lat(c.latency_s),
                  format_gb(c.per_chip_bytes), result, style=style)
        i += 1
    return t


def sweep_table(s: SweepResult) -> Table:
    first = s.points[0] if s.points else None
    several = len(s.models) > 1
    who = " vs ".join(s.models) if several else (first.model if first else "")
    title = "N*(S)" if first is None else (
        f"N*(S): {who} on {first.chip} ({first.cluster}), TPOT <= "
        f"{format_seconds(first.sla.tpot_limit_s(first.batch))}; {s.sim_calls} simulations, "
        f"{s.cache_hits} cache hits")
    t = Table(title=title)
    if several:
        # The model names tell the curves apart: never abbreviated on a narrow terminal.
        t.add_column("model", no_wrap=True, min_width=max(len(m) for m in s.models))
    for col in ("S", "N*", "KV tier", "Np", "TTFT", "Nd", "TPOT", "sims", "note"):
        t.add_column(col)
    for p in s.points:
        b = p.best
        lead = (p.model,) if several else ()
        if b is None:
            t.add_row(*lead, format_tokens(p.context_length), "-", "-", "-", "-", "-", "-",
                      str(p.sim_calls), "infeasible (below)", style="red")
            continue
        t.add_row(*lead, format_tokens(p.context_length), str(b.total_chips), b.kv_tier,
                  _n(b.prefill.answer, b.prefill.tp), _lat(b.prefill.latency_s),
                  _n(b.decode.answer, b.decode.tp), _lat(b.decode.latency_s), str(p.sim_calls),
                  "fallback scan" if p.fallback else "")
    return t


def sweep_notes(s: SweepResult) -> list[str]:
    """Why each infeasible context is infeasible, and where galloping fell back to a scan."""
    notes = []
    several = len(s.models) > 1
    for p in s.points:
        where = f"{p.model} " if several else ""
        for note in solve_notes(p):
            notes.append(f"{where}{format_tokens(p.context_length)}: {note}")
    return notes
