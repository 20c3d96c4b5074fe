"""Human tables for `ctxplan solve` and `ctxplan sweep` (rich renderables, no printing here).

Numbers are written by the formatters of :mod:`ctxplan.config.units`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from ctxplan.config.units import (
    format_bytes,
    format_duration,
    format_gb,
    format_seconds,
    format_short,
    format_throughput,
    format_tokens,
)
from ctxplan.report.layout import (
    Phrases,
    add_name_column,
    compact_table,
    longest_word,
    words_column,
)

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


_rate = format_throughput


def solve_answer_line(r: SolveResult) -> Phrases:
    """The answer in one sentence, wrapped between its phrases (never "N* =" / "13 chips")."""
    batch = "batch auto" if r.batch_searched else f"batch {r.batch}"
    head = [f"{r.model} on {r.chip} ({r.cluster}),",
            f"S = {format_tokens(r.context_length)} ({r.context_length:,} tokens),", f"{batch}:"]
    if r.best is None:
        return Phrases([*head, "INFEASIBLE:", r.infeasible_reason], style="bold red")
    b = r.best
    p, d = b.prefill, b.decode
    ttft = [f"TTFT {_lat(p.latency_s)}"]
    if r.cached_fraction or r.policy.prefill_ring != "pass-kv":
        ttft.append(f"(prefill of the {1 - r.cached_fraction:.0%} not cached,")
        ttft.append(f"{p.ring or r.policy.prefill_ring})")
    if not r.ttft_constrained:
        ttft.append(f"({TTFT_FREE})")
    ttft[-1] += ","
    rate = d.tokens_per_s
    phrases = [*head, f"N* = {b.total_chips} chips", f"= prefill {p.chips} (Np {p.answer} x TP "
               f"{p.tp})", f"+ decode {d.chips} (Nd {d.answer} x TP {d.tp}),",
               f"KV tier {b.kv_tier};", *ttft, f"TPOT {_lat(d.latency_s)} at batch {d.batch}"
               + (";" if not r.batch_searched else ""),
               *(["(the largest meeting the SLA);"] if r.batch_searched else []),
               f"decode {_rate(rate)} tokens/s",
               f"= {_rate(None if rate is None else rate / (d.chips or 1))} per decode chip,",
               f"{_rate(b.tokens_per_s_per_chip)} per chip of the plan;",
               f"bound by: prefill {BOUND_BY_TEXT.get(p.bound_by or '', '-')},",
               f"decode {BOUND_BY_TEXT.get(d.bound_by or '', '-')}"]
    if r.objective != "chips":
        phrases[-1] += ";"
        phrases.append(f"objective {r.objective}")
    return Phrases(phrases, style="bold")


def _pool(p: PhasePlan) -> str:
    if p.answer is None:
        return "cut" if p.cut_reason else "-"
    text = str(p.answer) if p.tp == 1 else f"{p.answer}x{p.tp}"
    return text if p.n_cap is None else f"{text} ({p.n_cap})"


CANDIDATE_WORDS = {"all": "every N", "group": "whole groups of {g} chips",
                   "pow2": "powers of two"}


def search_words(r: SolveResult) -> str:
    """'galloping search over every N up to 1,024 chips per pool'."""
    over = CANDIDATE_WORDS.get(r.candidate_set, r.candidate_set).format(g=r.group_size)
    return f"{r.strategy} search over {over} up to {r.max_chips:,} chips per pool"


def solve_tiers_table(r: SolveResult) -> Table:
    legend = ["N (wall): the answer N x TP and the capacity wall at its TP", "* the best tier"]
    if r.fallback:
        legend.append("! galloping fell back to a scan")
    if any(t.cut for t in r.tiers):
        legend.append("cut: could not beat the best plan")
    t = compact_table(title=f"Per KV tier: {sla_text(r)}",
                      caption=f"{search_words(r)}. " + "; ".join(legend) + ".")
    add_name_column(t, "KV tier", [f"{x.kv_tier} *" for x in r.tiers])
    cols = ["Np (wall)", "TTFT", "Nd (wall)", "TPOT"]
    if r.batch_searched:
        cols.append("batch")
    cols += ["tok/s /chip", "chips"]
    for col in cols:
        t.add_column(col, justify="right")
    for tier in r.tiers:
        p, d = tier.prefill, tier.decode
        chips = "-" if tier.total_chips is None else str(tier.total_chips)
        if p.fallback or d.fallback:
            chips += " !"
        row = [_pool(p), format_short(p.latency_s), _pool(d), format_short(d.latency_s)]
        if r.batch_searched:
            row.append(str(d.batch) if d.feasible else "-")
        row += [_rate(tier.tokens_per_s_per_chip), chips]
        t.add_row(tier.kv_tier + (" *" if tier is r.best else ""),
                  *row, style="bold green" if tier is r.best else None)
    return t


def tp_table(r: SolveResult) -> Table | None:
    """Each TP degree each pool tried, and what became of it (only when TP was searched)."""
    if not any(p.tp_searched for t in r.tiers for p in (t.prefill, t.decode)):
        return None
    t = compact_table(title="TP degrees per pool (chosen: fewest chips, then lower latency, "
                      "then smaller TP; --json has every reason in full)")
    add_name_column(t, "KV tier", [x.kv_tier for x in r.tiers])
    t.add_column("pool", no_wrap=True)
    for col in ("TP", "N (wall)", "chips", "latency"):
        t.add_column(col, no_wrap=True, justify="right")
    t.add_column("status", ratio=1)
    styles = {"chosen": "green", "excluded": "dim", "cut": "dim"}
    for tier in r.tiers:
        for p in (tier.prefill, tier.decode):
            if not p.tp_searched:
                continue
            for o in p.tp_options:
                n = "-" if o.answer is None else str(o.answer)
                if o.n_cap is not None:
                    n += f" ({o.n_cap})"
                note = _tp_note(o)
                t.add_row(tier.kv_tier, p.phase, str(o.tp), n,
                          "-" if o.chips is None else str(o.chips), format_short(o.latency_s),
                          o.status + (f": {note}" if note else ""), style=styles.get(o.status))
    return t


def _tp_note(o: TPOption) -> str:
    """A few words on a TP option (its full reason is in the JSON)."""
    if o.status == "excluded":
        return o.why
    if o.status == "infeasible":
        return (f"does not fit up to N = {o.bound_n}" if o.n_cap is None
                else f"misses the SLA up to N = {o.bound_n}")
    if o.status == "cut":
        return "beaten by " + o.why.split(", more than ")[-1].split("cannot beat ")[-1]
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
        shown = ("all of it hidden behind the prefill (TTFT = the prefill's)" if h.handoff_s == 0
                 else f"{_lat(h.handoff_s)} not hidden behind the prefill; TTFT = "
                 f"{_lat(h.prefill_s)} + {_lat(h.handoff_s)}")
        notes.append(f"KV handoff ({h.mode}): {format_bytes(h.bytes_moved)} to the decode pool "
                     f"(chips after the prefill pool), {shown}{stepped}")
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


def hits_text(sim_calls: int, cache_hits: int, earlier: int) -> str:
    """'3 simulations, 8 cache hits (5 from earlier runs)'."""
    text = f"{sim_calls} simulations, {cache_hits} cache hits"
    return text + (f" ({earlier} from earlier runs)" if earlier else "")


def search_path_table(r: SolveResult) -> Table:
    """Simulated candidates in search order; the memory checks below each wall on one row.
    N and TP have a column each: a row of memory checks lists its N values ("1, 2, 4")."""
    t = compact_table(title="Search path: " + hits_text(r.sim_calls, r.cache_hits,
                                                         r.earlier_run_hits),
                      caption="memory: capacity-wall checks (no simulation), their N values "
                      "on one row")
    t.add_column("phase", no_wrap=True)
    add_name_column(t, "KV tier", [x.kv_tier for x in r.tiers])
    t.add_column("N", justify="right")
    t.add_column("TP", justify="right", no_wrap=True)
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
            del row[4]
        t.add_row(*row, style=style)

    while i < len(cands):
        c = cands[i]
        if c.step == "memory":
            group = _memory_group(cands, i)
            i += len(group)
            last = group[-1]
            if len(group) > 1 and last.n == c.n:     # a batch wall: one pool, batch grows
                ns, batches = str(c.n), ", ".join(str(g.batch) for g in group)
            else:                                    # an N wall at one TP and batch
                ns, batches = ", ".join(str(g.n) for g in group), str(c.batch)
            add(c.phase, c.kv_tier, ns, str(c.tp), batches, "memory", "-",
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
        add(c.phase, c.kv_tier, str(c.n), str(c.tp), str(c.batch), c.step,
            format_short(c.latency_s),
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
        + hits_text(s.sim_calls, s.cache_hits, s.earlier_run_hits))
    t = compact_table(title=title)
    if several:
        # The model names tell the curves apart: never abbreviated on a narrow terminal.
        add_name_column(t, "model", list(s.models))
    searched = any(p.batch_searched for p in s.points)
    t.add_column("S", no_wrap=True)
    t.add_column("N*", justify="right", no_wrap=True)
    add_name_column(t, "KV tier", [p.best.kv_tier for p in s.points if p.best] or ["-"])
    cols = ["Np", "TTFT", "Nd", "TPOT"]
    if searched:
        cols.append("batch")
    for col in cols:
        t.add_column(col, justify="right", no_wrap=True)
    # Numbers are never cut: the rate column is as wide as its widest value (its header wraps),
    # and the note column is there only when a point has a note.
    rates = [_rate(p.best.tokens_per_s_per_chip) for p in s.points if p.best]
    t.add_column("tok/s /chip", justify="right", min_width=longest_word([*rates, "tok/s"]))
    t.add_column("sims", justify="right", no_wrap=True)
    noted = any(p.best is None or p.fallback for p in s.points)
    if noted:
        words_column(t, "note", ["infeasible", "fallback"])
    for p in s.points:
        b = p.best
        lead = (p.model,) if several else ()
        if b is None:
            row = [*lead, format_tokens(p.context_length), "-", "-", "-", "-", "-", "-"]
            row += ["-"] if searched else []
            t.add_row(*row, "-", str(p.sim_calls), "infeasible (below)", style="red")
            continue
        row = [*lead, format_tokens(p.context_length), str(b.total_chips), b.kv_tier,
               _n(b.prefill.answer, b.prefill.tp), format_short(b.prefill.latency_s),
               _n(b.decode.answer, b.decode.tp), format_short(b.decode.latency_s)]
        row += [str(b.decode.batch)] if searched else []
        row += [_rate(b.tokens_per_s_per_chip), str(p.sim_calls)]
        t.add_row(*row, *(["fallback scan" if p.fallback else ""] if noted else []))
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
