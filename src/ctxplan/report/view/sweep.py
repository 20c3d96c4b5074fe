"""The view of a sweep, from its JSON (``SweepResult.to_dict()``): the N*(S) table, one row per
model and context length, and the notes (why a context is infeasible, where galloping fell
back, where the best KV tier changes from one context to the next and why).

Each point is a solve: its answer and tables are :mod:`ctxplan.report.view.solve`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxplan.config.units import format_short, format_throughput, format_tokens
from ctxplan.report.view.base import BAD, Column, TableView
from ctxplan.report.view.solve import (
    Json,
    handoff_text,
    hits_text,
    pool_cell,
    sla_text,
    system_text,
    tier_choice,
    tier_notes,
)


def models(data: Json) -> list[str]:
    """The models a sweep's JSON holds, in order (one curve each; older files name one)."""
    names = data.get("models") or [p["model"] for p in data["points"]]
    return list(dict.fromkeys(names))


def _n(pool: Json) -> str:
    return pool_cell(pool)


def sweep_title(data: Json) -> str:
    """'N*(S): deepseek-v3 on sg2262 (sg2262-c2c), TPOT <= 20.000 ms (per-seq), TTFT not
    constrained; 42 simulations, 0 cache hits'."""
    points = data["points"]
    if not points:
        return "N*(S)"
    first = points[0]
    who = " vs ".join(models(data))
    return (f"N*(S): {who}{system_text(first)}, {sla_text(first)}; "
            + hits_text(data["sim_calls"], data["cache_hits"], data.get("earlier_run_hits")))


def sweep_table(points: Sequence[Json], tid: str, title: str = "N*(S): the answer per "
                "context length") -> TableView:
    """One row per point: N*, the tier, each pool's N x TP and latency, tokens per chip, the
    simulations it took; a model column when the points hold several models."""
    several = len({p["model"] for p in points}) > 1
    searched = any(p["search"].get("batch") == "auto" for p in points)
    cols = [Column("model", name_col=True)] if several else []
    cols += [Column("S"), Column("N*", True), Column("KV tier", name_col=True),
             Column("Np", True), Column("TTFT", True), Column("Nd", True), Column("TPOT", True)]
    cols += [Column("batch", True)] if searched else []
    cols += [Column("tok/s /chip", True), Column("sims", True)]
    t = TableView(tid, title, cols,
                  caption="Np, Nd: each pool's N x TP; sims: simulations run for the point"
                  + ("; ! galloping fell back to a scan (below)"
                     if any(p.get("fallback") for p in points) else ""))
    for p in points:
        lead = [p["model"]] if several else []
        s = format_tokens(p["context_length"])
        if not p["feasible"]:
            row = [*lead, s, "-", "infeasible", "-", "-", "-", "-"]
            row += ["-"] if searched else []
            t.add(*row, "-", p["sim_calls"], cls=BAD)
            continue
        pre, dec = p["prefill"], p["decode"]
        chips = f"{p['total_chips']} !" if p.get("fallback") else p["total_chips"]
        row = [*lead, s, chips, p["kv_tier"], _n(pre), format_short(pre["ttft_s"]),
               _n(dec), format_short(dec["tpot_s"])]
        row += [dec["batch"]] if searched else []
        t.add(*row, format_throughput(p.get("tokens_per_s_per_chip")), p["sim_calls"])
    return t


def sweep_notes(data: Json) -> list[str]:
    """Per point (named by its context, and its model when there are several): why it is
    infeasible, where galloping fell back, its KV handoff; and where the best KV tier flips
    between consecutive contexts, why the new one won."""
    points = data["points"]
    several = len(models(data)) > 1
    notes = []
    for p in points:
        where = (f"{p['model']} " if several else "") + format_tokens(p["context_length"])
        if not p["feasible"]:
            notes.append(f"{where}: infeasible: {p.get('infeasible_reason') or ''}")
        notes += [f"{where}: {n}" for n in tier_notes(p)]
        if p.get("handoff"):
            notes.append(f"{where}: KV handoff {handoff_text(p['handoff'])}")
    for m in models(data):
        notes += tier_flips([p for p in points if p["model"] == m], m if several else "")
    return notes


def tier_flips(curve: Sequence[Json], model: str = "") -> list[str]:
    """A note at each context where the best KV tier differs from the previous feasible
    context's: the tier with the fewest chips wins at each S, ties go to the faster decode,
    so the winner may flip as S grows."""
    notes = []
    before: Json | None = None
    for p in curve:
        if not p["feasible"]:
            continue
        if before is not None and p["kv_tier"] != before["kv_tier"]:
            where = (f"{model} " if model else "") + format_tokens(p["context_length"])
            notes.append(f"{where}: KV tier {before['kv_tier']} -> {tier_choice(p)}")
        before = p
    return notes
