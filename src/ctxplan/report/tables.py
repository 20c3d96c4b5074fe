"""Human tables for `ctxplan solve` and `ctxplan sweep` (rich renderables, no printing here).

Numbers are written by the formatters of :mod:`ctxplan.config.units`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from ctxplan.config.units import format_duration, format_gb, format_seconds, format_tokens

if TYPE_CHECKING:
    from ctxplan.solve import Candidate, PhasePlan, SolveResult, TierPlan, TPOption
    from ctxplan.sweep import SweepResult

_lat = format_duration
TTFT_FREE = "TTFT not constrained"
BOUND_BY_TEXT = {"capacity": "capacity wall", "tpot": "TPOT target", "ttft": "TTFT target",
                 "tp": "TP degree", "objective": "tokens per chip"}


def sla_text(r: SolveResult) -> str:
    """'TPOT <= 20.000 ms (per-seq), TTFT <= 60.000 s' or '..., TTFT not constrained'."""
    batch = r.chosen_batch or 1
    tpot = f"TPOT <= {format_seconds(r.sla.tpot_limit_s(batch))} ({r.sla.tps_reading})"
    if r.sla.ttft_max_s is None:
        return f"{tpot}, {TTFT_FREE}"
    return f"{tpot}, TTFT <= {format_seconds(r.sla.ttft_max_s)}"


def _rate(x: float | None) -> str:
    return "-" if x is None else f"{x:,.3g}"


def solve_answer_line(r: SolveResult) -> Text:
    batch = "batch auto" if r.batch_searched else f"batch {r.batch}"
    head = (f"{r.model} on {r.chip} ({r.cluster}), S = {format_tokens(r.context_length)} "
            f"({r.context_length:,} tokens), {batch}: ")
    if r.best is None:
        return Text(head + "INFEASIBLE: " + r.infeasible_reason, style="bold red")
    b = r.best
    p, d = b.prefill, b.decode
    warm = ""
    if r.cached_fraction or r.prefill_ring != "pass-kv":
        warm = (f" (prefill of the {1 - r.cached_fraction:.0%} not cached, "
                f"{p.ring or r.prefill_ring})")
    ttft = _lat(p.latency_s) + warm + (f" ({TTFT_FREE})" if not r.ttft_constrained else "")
    rate = d.tokens_per_s
    text = (f"N* = {b.total_chips} chips = prefill {p.chips} (Np {p.answer} x TP {p.tp}) + "
            f"decode {d.chips} (Nd {d.answer} x TP {d.tp}), KV tier {b.kv_tier}; TTFT {ttft}, "
            f"TPOT {_lat(d.latency_s)} at batch {d.batch}"
            + (" (the largest meeting the SLA)" if r.batch_searched else "")
            + f"; decode {_rate(rate)} tokens/s = "
            f"{_rate(None if rate is None else rate / (d.chips or 1))} per decode chip, "
            f"{_rate(b.tokens_per_s_per_chip)} per chip of the plan; "
            f"bound by: prefill {BOUND_BY_TEXT.get(p.bound_by or '', '-')}, decode "
            f"{BOUND_BY_TEXT.get(d.bound_by or '', '-')}")
    if r.objective != "chips":
        text += f"; objective {r.objective}"
    return Text(head + text, style="bold")


def _pool(p: PhasePlan) -> str:
    if p.answer is None:
        return "cut" if p.cut_reason else "-"
    text = str(p.answer) if p.tp == 1 else f"{p.answer}x{p.tp}"
    return text if p.n_cap is None else f"{text} ({p.n_cap})"


def solve_tiers_table(r: SolveResult) -> Table:
    t = Table(title=f"Per KV tier: {sla_text(r)}; {r.strategy}, '{r.candidate_set}' N, "
              f"<= {r.max_chips} chips/pool",
              caption="N (wall): the answer (N x TP) and the capacity wall at its TP; * the "
              "best tier; ! galloping fell back to a scan; cut: could not beat the best plan")
    t.add_column("KV tier", no_wrap=True)
    cols = ["Np (wall)", "TTFT", "Nd (wall)", "TPOT"]
    if r.batch_searched:
        cols.append("batch")
    cols += ["tok/s/chip", "chips"]
    for col in cols:
        t.add_column(col, no_wrap=True, justify="right")
    for tier in r.tiers:
        p, d = tier.prefill, tier.decode
        chips = "-" if tier.total_chips is None else str(tier.total_chips)
        if p.fallback or d.fallback:
            chips += " !"
        row = [_pool(p), _lat(p.latency_s), _pool(d), _lat(d.latency_s)]
        if r.batch_searched:
            row.append(str(d.batch) if d.feasible else "-")
        row += [_rate(tier.tokens_per_s_per_chip), chips]
        t.add_row(f"{tier.kv_tier} ({tier.c_kv_bytes} B)" + (" *" if tier is r.best else ""),
                  *row, style="bold green" if tier is r.best else None)
    return t


def tp_table(r: SolveResult) -> Table | None:
    """Each TP degree each pool tried, and what became of it (only when TP was searched)."""
    if not any(p.tp_searched for t in r.tiers for p in (t.prefill, t.decode)):
        return None
    t = Table(title="TP degrees per pool (chosen: fewest chips, then lower latency, then "
              "smaller TP; --json has every reason in full)")
    for col in ("tier", "pool", "TP", "status", "N (wall)", "chips", "latency", "note"):
        t.add_column(col, no_wrap=col != "note",
                     justify="right" if col in ("TP", "N (wall)", "chips", "latency") else
                     "left")
    styles = {"chosen": "green", "excluded": "dim", "cut": "dim"}
    for tier in r.tiers:
        for p in (tier.prefill, tier.decode):
            if not p.tp_searched:
                continue
            for o in p.tp_options:
                n = "-" if o.answer is None else str(o.answer)
                if o.n_cap is not None:
                    n += f" ({o.n_cap})"
                t.add_row(tier.kv_tier, p.phase, str(o.tp), o.status, n,
                          "-" if o.chips is None else str(o.chips), _lat(o.latency_s),
                          _tp_note(o), style=styles.get(o.status))
    return t


def _tp_note(o: TPOption) -> str:
    """A few words on a TP option (its full reason is in the JSON)."""
    if o.status == "excluded":
        return o.why
    if o.status == "infeasible":
        return (f"does not fit up to N = {o.bound_n}" if o.n_cap is None
                else f"misses the SLA up to N = {o.bound_n}")
    if o.status == "cut":
        return "cannot beat the best: " + o.why.split(", more than ")[-1].split(
            "cannot beat ")[-1]
    return o.why


def solve_notes(r: SolveResult) -> list[str]:
    """What the tier table cannot say in a cell: why a tier fails or was cut, where galloping
    distrusted itself and scanned."""
    notes = []
    for tier in r.tiers:
        if not tier.feasible:
            notes.append(f"{tier.kv_tier}: {_tier_reason(tier)}")
        for plan in (tier.prefill, tier.decode):
            if plan.fallback:
                notes.append(f"! {tier.kv_tier} {plan.phase}: {plan.fallback_reason}")
    h = r.best.handoff if r.best else None
    if h is not None and h.simulated:
        b = r.best
        assert b is not None
        stepped = (f"; with Np {h.from_pair[0]}, Nd {h.from_pair[1]} it missed the TTFT target, "
                   f"so the {h.stepped} pool was stepped up" if h.stepped else "")
        notes.append(f"KV handoff ({h.mode}): {format_gb(h.bytes_moved)} GB to the decode pool "
                     f"(chips after the prefill pool), {_lat(h.handoff_s)} not hidden behind the "
                     f"prefill; TTFT = {_lat(h.prefill_s)} + {_lat(h.handoff_s)}{stepped}")
    elif h is not None:
        notes.append(f"KV handoff not simulated: {h.reason}")
    return notes


def _tier_reason(tier: TierPlan) -> str:
    parts = [tier.infeasible_reason] if tier.infeasible_reason else []
    parts += [p.cut_reason for p in (tier.prefill, tier.decode) if p.cut_reason]
    return "; ".join(parts)


def _n(n: int | None, tp: int, n_cap: int | None = None) -> str:
    text = "-" if n is None else (str(n) if tp == 1 else f"{n}x{tp}")
    return text if n_cap is None else f"{text} ({n_cap})"


def search_path_table(r: SolveResult) -> Table:
    """Simulated candidates in search order; the memory checks below each wall on one row."""
    t = Table(title=f"Search path: {r.sim_calls} simulations, {r.cache_hits} cache hits")
    t.add_column("phase", no_wrap=True)
    t.add_column("tier", no_wrap=True)
    t.add_column("N x TP", justify="right")
    if r.batch_searched:
        t.add_column("batch", justify="right")
    t.add_column("step", no_wrap=True)
    t.add_column("latency", justify="right", no_wrap=True)
    t.add_column("GB/chip", justify="right", no_wrap=True)
    t.add_column("result")
    cands = list(r.candidates)
    i = 0

    def add(*cells: str, style: str | None) -> None:
        row = list(cells)
        if not r.batch_searched:
            del row[3]
        t.add_row(*row, style=style)

    while i < len(cands):
        c = cands[i]
        if c.step == "memory":
            group = _memory_group(cands, i)
            i += len(group)
            last = group[-1]
            if len(group) > 1 and last.n == c.n:     # a batch wall: one pool, batch grows
                ns, batches = _n(c.n, c.tp), ",".join(str(g.batch) for g in group)
            else:                                    # an N wall at one TP and batch
                ns = ",".join(str(g.n) for g in group) + ("" if c.tp == 1 else f" x{c.tp}")
                batches = str(c.batch)
            add(c.phase, c.kv_tier, ns, batches, "memory", "-",
                format_gb(last.per_chip_bytes), "does not fit", style="dim")
            continue
        if c.step == "bound":
            result, style = "cut by the TTFT bound (and every smaller N)", "dim"
        elif c.cut_by:
            result, style = "does not fit", "dim"
        elif c.step == "wall":
            result, style = "no SLA: wall", "green"
        elif c.meets_sla:
            result, style = "meets SLA", "green"
        else:
            result, style = "misses SLA", "yellow"
        if c.cache_hit:
            result += " (cached)"
        add(c.phase, c.kv_tier, _n(c.n, c.tp), str(c.batch), c.step, _lat(c.latency_s),
            format_gb(c.per_chip_bytes) if c.per_chip_bytes else "-", result, style=style)
        i += 1
    return t


def _memory_group(cands: list[Candidate], i: int) -> list[Candidate]:
    """The run of memory checks from ``i`` of one pool: one phase, tier and TP, and either
    one batch (the N wall) or one N (the batch wall)."""
    c = cands[i]
    group = [c]
    for d in cands[i + 1:]:
        if d.step != "memory" or (d.phase, d.kv_tier, d.tp) != (c.phase, c.kv_tier, c.tp):
            break
        same_batch = all(g.batch == d.batch for g in group)
        same_n = all(g.n == d.n for g in group)
        if not (same_batch or same_n):
            break
        group.append(d)
    return group


def sweep_table(s: SweepResult) -> Table:
    first = s.points[0] if s.points else None
    several = len(s.models) > 1
    who = " vs ".join(s.models) if several else (first.model if first else "")
    title = "N*(S)" if first is None else (
        f"N*(S): {who} on {first.chip} ({first.cluster}), {sla_text(first)}; "
        f"{s.sim_calls} simulations, {s.cache_hits} cache hits")
    t = Table(title=title)
    if several:
        # The model names tell the curves apart: never abbreviated on a narrow terminal.
        t.add_column("model", no_wrap=True, min_width=max(len(m) for m in s.models))
    searched = any(p.batch_searched for p in s.points)
    cols = ["S", "N*", "KV tier", "Np", "TTFT", "Nd", "TPOT"]
    if searched:
        cols.append("batch")
    cols += ["tok/s/chip", "sims", "note"]
    for col in cols:
        t.add_column(col)
    for p in s.points:
        b = p.best
        lead = (p.model,) if several else ()
        if b is None:
            row = [*lead, format_tokens(p.context_length), "-", "-", "-", "-", "-", "-"]
            row += ["-"] if searched else []
            t.add_row(*row, "-", str(p.sim_calls), "infeasible (below)", style="red")
            continue
        row = [*lead, format_tokens(p.context_length), str(b.total_chips), b.kv_tier,
               _n(b.prefill.answer, b.prefill.tp), _lat(b.prefill.latency_s),
               _n(b.decode.answer, b.decode.tp), _lat(b.decode.latency_s)]
        row += [str(b.decode.batch)] if searched else []
        t.add_row(*row, _rate(b.tokens_per_s_per_chip), str(p.sim_calls),
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
