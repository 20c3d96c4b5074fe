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
from ctxplan.report.view.base import BAD, BEST, DIM, Answer, Column, TableView
from ctxplan.report.view.solve import Json, hits_text, system_text


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
    a = Answer(f"{cap['model']}{system_text(cap)}: pools for the traffic",
               ok=bool(cap["feasible"]))
    a.add("traffic", f"contexts {mix_text(cap)}; {cap['output_tokens']:,} output tokens per "
          f"request; {cap['requests']:,} simulated requests (seed {cap['seed']})", brief=True)
    a.add("SLA", sla_text(cap), brief=True)
    pi, di = cap.get("prefill_instance"), cap.get("decode_instance")
    if pi is None or di is None:
        a.add("answer", f"INFEASIBLE: {cap.get('reason') or ''}", brief=True)
        return a
    used = _shapes_used(cap)
    if used:
        for pool, text in (("prefill", _prefill_text), ("decode", _decode_text)):
            distinct = _by_shape(used, pool)
            a.add(f"{pool} instance", "; ".join(
                f"{rates}: {text(rec)}" if len(distinct) > 1 else text(rec)
                for rec, rates in distinct), brief=True)
    else:   # no rate met (or a JSON from before shapes were searched): the solve's pair
        a.add("prefill instance", _prefill_text({"prefill": pi, **pi}), brief=True)
        a.add("decode instance", _decode_text({"decode": di, **di}), brief=True)
    a.add("KV tier", str(cap.get("kv_tier")), brief=True)
    shapes = cap.get("shapes") or []
    if shapes:
        n_p = len({_key(r["prefill"]) for r in shapes})
        n_d = len({_key(r["decode"]) for r in shapes})
        run = sum(r["status"] == "searched" for r in shapes)
        cut = sum(r["status"] == "cut" for r in shapes)
        a.add("shapes", f"{plural(len(shapes), 'pair')} of {n_p} prefill x {n_d} decode "
              f"shapes: {run} simulated, {cut} cut by their bound; the solve's pair "
              f"{_shape(pi, 'Np')} + {_shape(di, 'Nd')}")
    spend = [_spend(p) for p in cap["points"] if p["feasible"]
             and (p.get("watts") is not None or p.get("cost_per_hour") is not None)]
    if spend:
        a.add("power, cost", "; ".join(spend))
    return a


def _key(shape: Json) -> tuple[int, int, int, int]:
    return (shape["pp"], shape.get("dp", 1), shape["cp"], shape["tp"])


def _shape(shape: Json, n: str) -> str:
    """'Np 7 x TP 1' (with 'PP 2 x ' in front of a pipeline)."""
    pp = f"PP {shape['pp']} x " if shape.get("pp", 1) > 1 else ""
    dp = f"DP {shape['dp']} x " if shape.get("dp", 1) > 1 else ""
    return f"{pp}{dp}{n} {shape['cp']} x TP {shape['tp']}"


def shape_cell(p: Json) -> str:
    """The table's 'P / D' cell: '7x1 / 6x2' (CP x TP; a pipeline's PP first)."""
    def one(s: Json) -> str:
        return (f"{s['pp']}x" if s.get("pp", 1) > 1 else "") + \
            (f"DP{s['dp']}x" if s.get("dp", 1) > 1 else "") + f"{s['cp']}x{s['tp']}"
    if p.get("prefill_shape") is None or p.get("decode_shape") is None:
        return "-"
    return f"{one(p['prefill_shape'])} / {one(p['decode_shape'])}"


def _prefill_text(rec: Json) -> str:
    shape = rec["prefill"]
    service = ", ".join(f"{format_duration(x['ttft_s'])} at {format_tokens(x['context_length'])}"
                        for x in rec["service_s"])
    handoff = f" with its KV handoff ({rec['kv_handoff']})" if rec.get("kv_handoff") else ""
    return f"{_shape(shape, 'Np')} = {plural(shape['chips'], 'chip')}, TTFT {service}{handoff}"


def _decode_text(rec: Json) -> str:
    shape = rec["decode"]
    batch = ", ".join(f"{x['batch']} at {format_tokens(x['context_length'])}"
                      for x in rec["max_batch"])
    return f"{_shape(shape, 'Nd')} = {plural(shape['chips'], 'chip')}, batch up to {batch}"


def _shapes_used(cap: Json) -> list[tuple[Json, str]]:
    """Each feasible rate's pair record (from ``shapes``) with its rate, in rate order."""
    records = {(_key(r["prefill"]), _key(r["decode"])): r for r in cap.get("shapes") or []}
    out = []
    for p in cap["points"]:
        if not p["feasible"] or p.get("prefill_shape") is None:
            continue
        rec = records.get((_key(p["prefill_shape"]), _key(p["decode_shape"])))
        if rec is not None:
            out.append((rec, format_rate(p["rate_per_s"])))
    return out


def _by_shape(used: list[tuple[Json, str]], pool: str) -> list[tuple[Json, str]]:
    """One entry per distinct shape of ``pool``, with the rates it serves ('0.1/s, 0.2/s')."""
    order: list[tuple[int, int, int, int]] = []
    first: dict[tuple[int, int, int, int], Json] = {}
    rates: dict[tuple[int, int, int, int], list[str]] = {}
    for rec, rate in used:
        k = _key(rec[pool])
        if k not in first:
            order.append(k)
            first[k] = rec
        rates.setdefault(k, []).append(rate)
    return [(first[k], ", ".join(rates[k])) for k in order]


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
                  [Column("rate", True), Column("xPyD"), Column("P / D"),
                   Column("chips", True), Column("P + D", True, detail=True),
                   Column(f"TTFT {pct}", True), Column(f"TPOT {pct}", True),
                   Column("util P / D", True), Column("batch", True),
                   Column("note", wrap=True, detail=True)],
                  caption="xPyD: prefill and decode instances; P / D: their shapes, CP ranks x "
                  "TP; chips: total; util: busy fraction of each pool; batch: mean sequences "
                  "per decode step")
    for p in cap["points"]:
        feasible = p["feasible"]
        t.add(format_rate(p["rate_per_s"]), p["layout"] or "-",
              shape_cell(p) if feasible else "-",
              p["total_chips"] if feasible else "-",
              f"{p['prefill_chips']} + {p['decode_chips']}" if feasible else "-",
              format_duration(p["ttft_percentile_s"]), format_seconds(p["tpot_percentile_s"]),
              _util(p) if feasible else "-",
              "-" if p["decode_mean_batch"] is None or not feasible
              else f"{p['decode_mean_batch']:.2f}",
              p.get("reason") or "", cls="" if feasible else BAD)
    t.notes += capacity_notes(cap)
    return t


def shapes_table(cap: Json, tid: str = "capacity-shapes") -> TableView:
    """Every pair of instance shapes tried: simulated or cut, its bound and its chips per
    rate (the page's record of the shape search; ``--json`` has it too)."""
    rates = [format_rate(p["rate_per_s"]) for p in cap["points"]]
    t = TableView(tid, "Shapes tried: every prefill shape with every decode shape",
                  [Column("prefill"), Column("decode"), Column("status"),
                   *[Column(f"{r} bound / chips", True) for r in rates],
                   Column("why", wrap=True)],
                  caption="bound: the fewest chips any pools of the pair can be at the rate "
                  "(docs/serving.md, \"Shapes searched\"); chips: what the request-level "
                  "simulation found; cut: not simulated, its bound beats no pair found")
    chosen = {(_key(p["prefill_shape"]), _key(p["decode_shape"]))
              for p in cap["points"] if p["feasible"] and p.get("prefill_shape")}
    for r in cap.get("shapes") or []:
        cells = [f"{'-' if x['bound_chips'] is None else x['bound_chips']} / "
                 f"{'-' if x['total_chips'] is None else x['total_chips']}" for x in r["rates"]]
        status = r["status"] + (" (the solve's)" if r["solved"] else "")
        cls = BEST if (_key(r["prefill"]), _key(r["decode"])) in chosen else \
            (DIM if r["status"] == "cut" else "")
        t.add(_shape(r["prefill"], "Np"), _shape(r["decode"], "Nd"), status, *cells,
              r.get("why") or "", cls=cls)
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
