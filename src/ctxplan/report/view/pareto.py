"""The view of a Pareto search, from its JSON (``ParetoResult.to_dict()``, docs/solver.md, "The
Pareto front"): what was searched, then the front, fastest user last."""

from __future__ import annotations

from ctxplan.config.units import format_count as plural
from ctxplan.config.units import format_duration, format_seconds, format_tokens
from ctxplan.report.view.base import BEST, OK, Answer, Column, TableView
from ctxplan.report.view.solve import Json, hits_text, system_text


def answer(data: Json) -> Answer:
    """The question, the points searched and on the front, the prefill pools and the rule."""
    points = data["points"]
    simulated = [p for p in points if p["simulated"]]
    a = Answer(f"{data['model']}{system_text(data)}, S = "
               f"{format_tokens(data['context_length'])}: decode tokens/s per chip against "
               "tokens/s per user", ok=bool(data["front"]))
    a.add("front", f"{plural(len(data['front']), 'shape')} not beaten on both, of "
          f"{plural(len(simulated), 'simulated shape')}", brief=True)
    for p in data["prefill"]:
        pool = (f"Np {p['cp']} x TP {p['tp']} = {plural(p['chips'], 'chip')}; TTFT "
                f"{format_duration(p['ttft_s'])}" if p["feasible"]
                else f"none: {p['infeasible_reason'] or 'cut'}")
        a.add(f"prefill ({p['kv_tier']})", pool, brief=True)
    ttft = data["sla"].get("ttft_max_s")
    a.add("SLA", f"TPOT <= {format_seconds(data['sla']['tpot_limit_s'])} marks the shapes "
          "that meet it (the front is over all); prefill "
          + (f"sized for TTFT <= {format_seconds(ttft)}" if ttft is not None
             else "at its capacity minimum (no TTFT target)"), brief=True)
    rule = data["rule"]
    a.add("searched", "per KV tier and TP: Nd at the capacity wall x "
          + ", ".join(str(k) for k in rule["nd_multiples_of_wall"])
          + f"; batch 1, {rule['batch_step']}, {rule['batch_step'] ** 2}, ... and the "
          f"largest that fits; up to {data['max_chips']:,} chips"
          + ("; DP " + ", ".join(map(str, rule["dp"])) + " x Nd at the wall of one sequence "
             "per DP rank, batch DP, 4 DP, ..." if rule.get("dp") else ""))
    skipped = len(points) - len(simulated)
    if skipped:
        beaten = sum(1 for p in points if (p["why"] or "").startswith("dominated"))
        why = (f"; {beaten:,} of them beaten on both figures by a simulated shape, as "
               "their TPOT floor shows" if beaten else "")
        a.add("not simulated", f"{plural(skipped, 'shape')}{why} (--json: why)")
    a.add("simulations", hits_text(data["sim_calls"], data["cache_hits"],
                                   data.get("earlier_run_hits")))
    return a


def _rate(x: float | None) -> str:
    return "-" if x is None else f"{x:,.3g}" if x < 100 else f"{x:,.0f}"


def front_table(data: Json) -> TableView:
    """The front's shapes, slowest user first; the plan's tokens/s per chip beside."""
    view = TableView("pareto", "Pareto front (decode pool)",
                     [Column("tier", name_col=True), Column("[DP x] TP x Nd", True),
                      Column("chips", True), Column("batch", True), Column("TPOT", True),
                      Column("tok/s/user", True), Column("tok/s/chip", True),
                      Column("plan tok/s/chip", True)])
    for p in data["front"]:
        shape = f"{p['tp']} x {p['cp']}"
        if p["pp"] > 1:
            shape = f"PP{p['pp']} x {shape}"
        if p.get("dp", 1) > 1:
            shape = f"DP{p['dp']} x {shape}"
        view.add(p["kv_tier"], shape, p["chips"], p["batch"], format_duration(p["tpot_s"]),
                 _rate(p["tokens_per_s_per_user"]), _rate(p["tokens_per_s_per_chip"]),
                 _rate(p["plan_tokens_per_s_per_chip"]),
                 cls=OK if p["meets_sla"] else "")
    if data["front"]:
        best = max(data["front"], key=lambda p: p["tokens_per_s_per_chip"])
        view.rows[data["front"].index(best)].cls = BEST
    view.notes.append("ok rows meet the TPOT target; plan tok/s/chip counts the prefill pool's "
                      "chips too (its own front: --json, plan_front)")
    return view
