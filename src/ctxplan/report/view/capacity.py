"""The view of a capacity study, from its JSON (``CapacityResult.to_dict()``, docs/serving.md):
the instance shapes and the traffic, the pools per arrival rate, and the notes."""

from __future__ import annotations

from collections.abc import Mapping

from ctxplan.config.units import format_count as plural
from ctxplan.config.units import (
    format_duration,
    format_rate,
    format_seconds,
    format_tokens,
)
from ctxplan.report.view.base import BAD, Answer, Column, TableView
from ctxplan.report.view.solve import Json, hits_text


def _pct_name(cap: Json) -> str:
    return f"p{cap['percentile']:g}"


def sla_text(cap: Json) -> str:
    """'TTFT <= 60.000 s, TPOT <= 20.000 ms at p90'."""
    sla = cap["sla"]
    ttft = ("TTFT not constrained" if sla["ttft_max_s"] is None
            else f"TTFT <= {format_seconds(sla['ttft_max_s'])}")
    return f"{ttft}, TPOT <= {format_seconds(sla['tpot_max_s'])} at {_pct_name(cap)}"


def mix_text(cap: Json) -> str:
    """'128K' or '128K (0.7), 1M (0.3)'."""
    items = cap["contexts"]
    if len(items) == 1 and isinstance(items[0], Mapping):
        return format_tokens(items[0]["context_length"])
    return ", ".join(f"{format_tokens(c['context_length'])} ({c['share']:g})"
                     if isinstance(c, Mapping) else str(c) for c in items)


def answer(cap: Json) -> Answer:
    """The traffic and the SLA, then the instance shapes (the solve at the mix's longest
    context) every rate's pools are made of."""
    a = Answer(f"{cap['model']} on {cap['chip']} ({cap['cluster']}): pools for the traffic",
               ok=bool(cap["feasible"]))
    a.add("traffic", f"contexts {mix_text(cap)}; {cap['output_tokens']:,} output tokens per "
          f"request; {cap['requests']:,} simulated requests (seed {cap['seed']})", brief=True)
    a.add("SLA", sla_text(cap), brief=True)
    pi, di = cap.get("prefill_instance"), cap.get("decode_instance")
    if pi is None or di is None:
        a.add("answer", f"INFEASIBLE: {cap.get('reason') or ''}", brief=True)
        return a
    service = ", ".join(f"{format_duration(x['ttft_s'])} at {format_tokens(x['context_length'])}"
                        for x in pi["service_s"])
    handoff = f" (with its KV handoff, {pi['kv_handoff']})" if pi.get("kv_handoff") else ""
    batch = ", ".join(f"{x['batch']} at {format_tokens(x['context_length'])}"
                      for x in di["max_batch"])
    a.add("prefill instance", f"Np {pi['cp']} x TP {pi['tp']} = {plural(pi['chips'], 'chip')}; "
          f"TTFT {service}{handoff}", brief=True)
    a.add("decode instance", f"Nd {di['cp']} x TP {di['tp']} = {plural(di['chips'], 'chip')}; "
          f"batch up to {batch}", brief=True)
    a.add("KV tier", str(cap.get("kv_tier")), brief=True)
    spend = [_spend(p) for p in cap["points"] if p["feasible"]
             and (p.get("watts") is not None or p.get("cost_per_hour") is not None)]
    if spend:
        a.add("power, cost", "; ".join(spend))
    return a


def _spend(p: Json) -> str:
    """'0.2/s: 21.0 kW at TDP, 105 J per output token, 105.00 per hour, 146 per million'."""
    text = f"{format_rate(p['rate_per_s'])}: " + (
        "power unknown (no tdp_w)" if p.get("watts") is None else
        f"{p['watts'] / 1e3:,.1f} kW at TDP, {p['joules_per_token']:,.3g} J per output token")
    if p.get("cost_per_hour") is not None:
        text += (f", {p['cost_per_hour']:,.2f} per hour, {p['cost_per_million_tokens']:,.3g} "
                 "per million output tokens")
    return text


def _util(p: Json) -> str:
    if p["prefill_utilisation"] is None:
        return "-"
    return (f"{100 * p['prefill_utilisation']:.0f} % / "
            f"{100 * (p['decode_utilisation'] or 0):.0f} %")


def capacity_table(cap: Json, tid: str = "capacity-table") -> TableView:
    """One row per arrival rate: xPyD, chips (prefill + decode), the percentiles, how busy
    each pool is, the mean decode batch."""
    pct = _pct_name(cap)
    t = TableView(tid, f"Pools per arrival rate: {cap['requests']:,} requests (seed "
                  f"{cap['seed']}), " + hits_text(cap["sim_calls"], cap["cache_hits"],
                                                  cap.get("earlier_run_hits")),
                  [Column("rate", True), Column("xPyD"), Column("chips", True),
                   Column("P + D", True), Column(f"TTFT {pct}", True),
                   Column(f"TPOT {pct}", True), Column("util P / D", True),
                   Column("batch", True), Column("note", wrap=True, detail=True)],
                  caption="xPyD: prefill and decode instances; chips: total, P + D: prefill + "
                  "decode; util: busy fraction of each pool; batch: mean sequences per decode "
                  "step")
    for p in cap["points"]:
        feasible = p["feasible"]
        t.add(format_rate(p["rate_per_s"]), p["layout"] or "-",
              p["total_chips"] if feasible else "-",
              f"{p['prefill_chips']} + {p['decode_chips']}" if feasible else "-",
              format_duration(p["ttft_percentile_s"]), format_seconds(p["tpot_percentile_s"]),
              _util(p) if feasible else "-",
              "-" if p["decode_mean_batch"] is None or not feasible
              else f"{p['decode_mean_batch']:.2f}",
              p.get("reason") or "", cls="" if feasible else BAD)
    t.notes += capacity_notes(cap)
    return t


def capacity_notes(cap: Json) -> list[str]:
    notes = []
    if cap["sla"]["ttft_max_s"] is None:
        notes.append("TTFT not constrained: the prefill pool is the fewest instances that keep "
                     "up with the arrivals (queues stay bounded); give --ttft-max for a target")
    for p in cap["points"]:
        rate = format_rate(p["rate_per_s"])
        if p.get("reason"):
            notes.append(f"{rate}: {p['reason']}")
        elif p.get("decode_raised_by_rate_per_s") is not None:
            notes.append(f"{rate}: {p['decode_min_at_rate']} decode instances meet TPOT at this "
                         f"rate; {p['decode_instances']} meet it at every lower rate given "
                         f"({format_rate(p['decode_raised_by_rate_per_s'])} needed more): "
                         "pools are sized for the peak")
    return notes
