"""What the report shows, built from the JSON of a result: sections of tables and charts.

One path for both sources: a study solved now goes through ``result.to_dict()``, a saved
result through ``json.load``; either way this module reads the same keys (the JSON schemas of
docs/solver.md, docs/serving.md and docs/sensitivity.md) and writes every number with the
formatters of :mod:`ctxplan.config.units`, as the terminal tables do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxplan.config.units import (
    format_bytes,
    format_duration,
    format_gb,
    format_rate,
    format_seconds,
    format_throughput,
    format_tokens,
)
from ctxplan.report.page import charts

Json = Mapping[str, Any]
KINDS = ("solve", "sweep", "capacity", "sensitivity")
BOUND_BY = {"capacity": "capacity wall (memory)", "tpot": "TPOT target",
            "ttft": "TTFT target", "tp": "TP degree", "objective": "tokens per chip"}
CANDIDATE_SETS = {"all": "every N", "group": "whole groups of {g} chips",
                  "pow2": "powers of two"}


@dataclass
class Column:
    name: str
    numeric: bool = False
    wrap: bool = False     # prose (wraps); names and numbers stay on one line


@dataclass
class Row:
    cells: list[str]
    cls: str = ""          # "best", "dim", "bad"


@dataclass
class TableView:
    id: str
    title: str
    columns: list[Column]
    rows: list[Row] = field(default_factory=list)
    caption: str = ""

    def add(self, *cells: object, cls: str = "") -> None:
        self.rows.append(Row([str(c) for c in cells], cls))


@dataclass
class Chart:
    id: str
    title: str
    svg: str
    caption: str = ""


@dataclass
class Section:
    id: str
    title: str
    facts: list[tuple[str, str]] = field(default_factory=list)   # label, value
    notes: list[str] = field(default_factory=list)
    tables: list[TableView] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    parts: list[Section] = field(default_factory=list)           # sub-sections
    collapsed: bool = False       # drawn in a <details> (opened for printing)
    summary: str = ""             # the <details> summary line


@dataclass
class Page:
    title: str
    subtitle: str
    kind: str
    headline: str                  # the answer in one line
    headline_ok: bool
    sections: list[Section]
    source: str
    version: str
    badges: list[tuple[str, str]] = field(default_factory=list)   # (text, "warn" | "ok")


def kind_of(data: Json) -> str:
    """Which command's JSON ``data`` is (solve, sweep, capacity, sensitivity), from its keys."""
    if "points" in data and "contexts" in data and "sim_calls" in data and "prefill_instance" \
            not in data:
        return "sweep"
    if "prefill_instance" in data and "points" in data:
        return "capacity"
    if "figures" in data and "base" in data and "steps" in data:
        return "sensitivity"
    if "tiers" in data and "candidates" in data and "total_chips" in data:
        return "solve"
    raise ValueError("not the --json output of ctxplan solve, sweep, capacity or sensitivity")


# ----------------------------------------------------------------------------- the answer


def sla_text(s: Json) -> str:
    sla = s["sla"]
    tpot = f"TPOT <= {format_seconds(sla['tpot_limit_s'])} ({sla['tps_reading']})"
    ttft = sla.get("ttft_max_s")
    return tpot + (", TTFT not constrained" if ttft is None
                   else f", TTFT <= {format_seconds(ttft)}")


def _pool(p: Json | None, letter: str) -> str:
    if p is None:
        return "-"
    return f"{p['chips']} chips = N{letter} {p['cp']} x TP {p['tp']}"


_rate = format_throughput


def search_text(s: Json) -> str:
    sets = str(CANDIDATE_SETS.get(s["candidate_set"], s["candidate_set"])).format(
        g=s.get("group_size"))
    return (f"{s['strategy']} search over {sets}, up to {s['max_chips']:,} chips per pool; "
            f"prefill TP {s['search']['prefill_tp']}, decode TP {s['search']['decode_tp']}, "
            f"batch {s['search']['batch']}, memory headroom {s['search']['memory_headroom']:g}")


def headline(s: Json) -> str:
    where = (f"{s['model']} on {s['chip']} ({s['cluster']}), S = "
             f"{format_tokens(s['context_length'])}")
    if not s["feasible"]:
        return f"{where}: infeasible"
    return (f"{where}: N* = {s['total_chips']} chips (prefill {s['prefill']['chips']} + decode "
            f"{s['decode']['chips']}), KV tier {s['kv_tier']}")


def answer_facts(s: Json) -> list[tuple[str, str]]:
    """The answer of one solve, line by line (the terminal's answer line, in rows)."""
    facts: list[tuple[str, str]] = [
        ("question", f"{s['model']} on {s['chip']} ({s['cluster']}) at S = "
         f"{format_tokens(s['context_length'])} ({s['context_length']:,} tokens)"),
        ("SLA", sla_text(s))]
    if not s["feasible"]:
        facts.append(("answer", f"INFEASIBLE: {s.get('infeasible_reason') or ''}"))
        facts.append(("search", search_text(s)))
        return facts
    p, d = s["prefill"], s["decode"]
    ttft_note = "" if s["sla"].get("ttft_constrained") else " (TTFT not constrained: the " \
        "prefill pool is its capacity minimum)"
    facts += [
        ("N*", f"{s['total_chips']} chips"),
        ("prefill pool", f"{_pool(p, 'p')}; TTFT {format_duration(p['ttft_s'])}{ttft_note}"),
        ("decode pool", f"{_pool(d, 'd')}; TPOT {format_duration(d['tpot_s'])} at batch "
         f"{d['batch']}"),
        ("KV tier", str(s["kv_tier"])),
        *_cached_prefix(s),
        ("throughput", f"decode {_rate(d.get('tps_per_batch'))} tokens/s; "
         f"{_rate(d.get('tokens_per_s_per_chip'))} per decode chip; "
         f"{_rate(s.get('tokens_per_s_per_chip'))} per chip of the plan"),
        ("bound by", f"prefill: {BOUND_BY.get(p.get('bound_by') or '', '-')}; decode: "
         f"{BOUND_BY.get(d.get('bound_by') or '', '-')}"),
    ]
    h = s.get("handoff")
    if h is not None:
        facts.append(("KV handoff", handoff_text(h)))
    if s.get("objective", "chips") != "chips":
        facts.append(("objective", s["objective"]))
    facts.append(("search", search_text(s)))
    facts.append(("simulations", f"{s['sim_calls']} run, {s['cache_hits']} answered by the "
                  "cache or the result store" + _earlier(s)))
    return facts


def _cached_prefix(s: Json) -> list[tuple[str, str]]:
    """The cached prefix the prefill was sized for, and the ring it ran (docs/solver.md)."""
    fraction = s.get("cached_fraction") or 0.0
    asked = s.get("prefill_ring", "pass-kv")
    if not fraction and asked == "pass-kv":
        return []
    ring = (s.get("prefill") or {}).get("ring") or asked
    chosen = f"{ring} (chosen by --prefill-ring auto)" if asked == "auto" else ring
    return [("cached prefix", f"{fraction:.0%} of S cached: the prefill computes the "
             f"{1 - fraction:.0%} not cached, attending the whole context; ring {chosen}")]


def _earlier(s: Json) -> str:
    n = s.get("earlier_run_hits")
    return f" ({n} from earlier runs)" if n else ""


def handoff_text(h: Json) -> str:
    if not h.get("simulated"):
        return f"{h['mode']}: not simulated: {h.get('reason') or ''}"
    hidden = ("all of it hidden behind the prefill (TTFT = the prefill's)"
              if h["handoff_s"] == 0 else
              f"{format_duration(h['handoff_s'])} not hidden behind the prefill "
              f"(TTFT = {format_duration(h['prefill_s'])} + {format_duration(h['handoff_s'])})")
    text = f"{h['mode']}: {format_bytes(h['bytes_moved'])} to the decode pool, {hidden}"
    if h.get("stepped"):
        text += f"; the {h['stepped']} pool was stepped up to meet the TTFT target"
    return text


# ---------------------------------------------------------------------------- solve tables


def _n_wall(plan: Json, letter: str) -> str:
    a = plan.get("answer")
    wall = plan.get("n_cap")
    wall_text = "no fit" if wall is None else str(wall)
    if a is None:
        return f"- (wall {wall_text})"
    return f"N{letter} {a['cp']} x TP {a['tp']} (wall {wall_text})"


def tiers_table(s: Json, tid: str) -> TableView:
    t = TableView(tid, f"Per KV tier: {sla_text(s)}",
                  [Column("KV tier"), Column("bytes/token/layer", True), Column("prefill"),
                   Column("TTFT", True), Column("decode"), Column("TPOT", True),
                   Column("batch", True), Column("tok/s/chip", True), Column("chips", True),
                   Column("note", wrap=True)],
                  caption="prefill / decode: the pool's answer N x TP and the capacity wall "
                  "(the fewest N that fit in memory) at that TP; the best tier is marked.")
    for tier in s["tiers"]:
        p, d = tier["prefill"], tier["decode"]
        pa, da = p.get("answer") or {}, d.get("answer") or {}
        notes = []
        for plan in (p, d):
            if plan.get("fallback"):
                notes.append(f"galloping fell back to a scan: {plan.get('fallback_reason')}")
        if tier.get("cut_reason"):
            notes.append(f"cut: {tier['cut_reason']}")
        if not tier["feasible"] and tier.get("infeasible_reason"):
            notes.append(tier["infeasible_reason"])
        best = tier["kv_tier"] == s.get("kv_tier")
        t.add(tier["kv_tier"] + (" (best)" if best else ""), tier["c_kv_bytes"],
              _n_wall(p, "p"), format_duration(pa.get("ttft_s")), _n_wall(d, "d"),
              format_duration(da.get("tpot_s")), da.get("batch", "-"),
              _rate(tier.get("tokens_per_s_per_chip")),
              "-" if tier["total_chips"] is None else tier["total_chips"], "; ".join(notes),
              cls="best" if best else ("bad" if not tier["feasible"] else ""))
    return t


def tp_table(s: Json, tid: str) -> TableView | None:
    if not any(t[ph].get("tp_searched") for t in s["tiers"] for ph in ("prefill", "decode")):
        return None
    t = TableView(tid, "TP degrees per pool (chosen: fewest chips, then lower latency, then "
                  "smaller TP)",
                  [Column("KV tier"), Column("pool"), Column("TP", True), Column("status"),
                   Column("N", True), Column("wall", True), Column("chips", True),
                   Column("latency", True), Column("why", wrap=True)])
    for tier in s["tiers"]:
        for phase in ("prefill", "decode"):
            plan = tier[phase]
            if not plan.get("tp_searched"):
                continue
            key = "ttft_s" if phase == "prefill" else "tpot_s"
            for o in plan["tp_options"]:
                t.add(tier["kv_tier"], phase, o["tp"], o["status"],
                      "-" if o["cp"] is None else o["cp"],
                      "-" if o["n_cap"] is None else o["n_cap"],
                      "-" if o["chips"] is None else o["chips"], format_duration(o.get(key)),
                      o["why"], cls="best" if o["status"] == "chosen" else
                      ("dim" if o["status"] in ("cut", "excluded") else ""))
    return t


def _result_word(c: Json) -> tuple[str, str]:
    if c["step"] == "memory" or (c.get("cut_by") and not c["simulated"] and c["step"] != "bound"):
        return "does not fit", "dim"
    if c["step"] == "bound":
        return "cut by the TTFT bound", "dim"
    if c["step"] == "wall":
        return "no SLA: the wall", "ok"
    if c["meets_sla"]:
        return "meets the SLA", "ok"
    return "misses the SLA", "bad"


def search_table(s: Json, tid: str) -> TableView:
    cands = s["candidates"]
    t = TableView(tid, f"Search path: {len(cands)} candidates in search order, "
                  f"{s['sim_calls']} simulations, {s['cache_hits']} cache hits{_earlier(s)}",
                  [Column("#", True), Column("phase"), Column("KV tier"), Column("N", True),
                   Column("TP", True), Column("batch", True), Column("step"),
                   Column("latency", True), Column("memory/chip", True), Column("result"),
                   Column("why", wrap=True)],
                  caption="memory: a capacity-wall check (no simulation); cached: the latency "
                  "came from the cache or the result store.")
    for i, c in enumerate(cands, 1):
        word, cls = _result_word(c)
        if c.get("cache_hit"):
            word += " (cached)"
        lat = c.get("ttft_s") if c["phase"] == "prefill" else c.get("tpot_s")
        mem = c["memory"]["per_chip_bytes"]
        t.add(i, c["phase"], c["kv_tier"], c["n"], c["tp"], c["batch"], c["step"],
              format_duration(lat), f"{format_gb(mem)} GB" if mem else "-", word, c["why"],
              cls=cls)
    return t


def solve_sections(s: Json, key: str) -> list[Section]:
    """The answer, the tiers, the TP options and the search path of one solve."""
    tables = [tiers_table(s, f"tiers-{key}")]
    tps = tp_table(s, f"tp-{key}")
    if tps is not None:
        tables.append(tps)
    search = Section(f"search-{key}", "The search path",
                     notes=[search_text(s)],
                     charts=[Chart(f"chart-search-{key}", "Simulated latency against chips",
                                   charts.search_chart(s, f"chart-search-{key}"),
                                   "Every simulated candidate of the search; hover for its "
                                   "values. Candidates that do not fit in memory have no "
                                   "latency and appear in the table only.")],
                     tables=[search_table(s, f"path-{key}")])
    return [Section(f"answer-{key}", "The answer", facts=answer_facts(s)),
            Section(f"tiers-section-{key}", "Per KV tier", tables=tables), search]


# ---------------------------------------------------------------------------------- sweep


def sweep_table(points: Sequence[Json], tid: str) -> TableView:
    t = TableView(tid, "N*(S): the answer per context length",
                  [Column("S"), Column("N*", True), Column("KV tier"), Column("prefill"),
                   Column("TTFT", True), Column("decode"), Column("TPOT", True),
                   Column("batch", True), Column("tok/s/chip", True), Column("simulations",
                                                                             True)])
    for p in points:
        s = format_tokens(p["context_length"])
        if not p["feasible"]:
            t.add(s, "-", "-", "-", "-", "-", "-", "-", "-", p["sim_calls"], cls="bad")
            continue
        pre, dec = p["prefill"], p["decode"]
        t.add(s, p["total_chips"], p["kv_tier"], f"Np {pre['cp']} x TP {pre['tp']}",
              format_duration(pre["ttft_s"]), f"Nd {dec['cp']} x TP {dec['tp']}",
              format_duration(dec["tpot_s"]), dec["batch"],
              _rate(p.get("tokens_per_s_per_chip")), p["sim_calls"])
    return t


def nstar_section(points: Sequence[Json], key: str) -> Section:
    return Section(f"nstar-{key}", "N*(S)",
                   charts=[Chart(f"chart-nstar-{key}", "Minimum chips per context length",
                                 charts.nstar_chart(points, f"chart-nstar-{key}"),
                                 "Prefill chips (bottom) and decode chips (top) of the answer "
                                 "at each context length; hover a bar for its values.")],
                   tables=[sweep_table(points, f"nstar-table-{key}")])


# ------------------------------------------------------------------------------- capacity


def capacity_sections(cap: Json) -> list[Section]:
    sla = cap["sla"]
    pct = f"p{cap['percentile']:g}"
    ttft = "not constrained" if sla["ttft_max_s"] is None else \
        f"<= {format_duration(sla['ttft_max_s'])}"
    mix = ", ".join(f"{format_tokens(c['context_length'])} ({c['share']:g})"
                    if isinstance(c, Mapping) else str(c) for c in cap["contexts"])
    facts = [("traffic", f"contexts {mix}; {cap['output_tokens']} output tokens per request; "
              f"{cap['requests']} simulated requests (seed {cap['seed']})"),
             ("SLA", f"TTFT {ttft}, TPOT <= {format_seconds(sla['tpot_max_s'])} at {pct}")]
    pi, di = cap.get("prefill_instance"), cap.get("decode_instance")
    if pi is None or di is None:
        facts.append(("answer", f"INFEASIBLE: {cap.get('reason') or ''}"))
    else:
        service = ", ".join(f"{format_duration(x['ttft_s'])} at "
                            f"{format_tokens(x['context_length'])}" for x in pi["service_s"])
        batch = ", ".join(f"{x['batch']} at {format_tokens(x['context_length'])}"
                          for x in di["max_batch"])
        facts += [("prefill instance", f"Np {pi['cp']} x TP {pi['tp']} = {pi['chips']} chips; "
                   f"TTFT {service}"),
                  ("decode instance", f"Nd {di['cp']} x TP {di['tp']} = {di['chips']} chips; "
                   f"batch up to {batch}"),
                  ("KV tier", str(cap.get("kv_tier")))]
    t = TableView("capacity-table", "Pools per arrival rate",
                  [Column("rate", True), Column("xPyD"), Column("chips", True),
                   Column("prefill + decode"), Column(f"TTFT {pct}", True),
                   Column(f"TPOT {pct}", True), Column("util P / D", True),
                   Column("mean batch", True), Column("note", wrap=True)])
    for p in cap["points"]:
        util = "-" if p["prefill_utilisation"] is None else \
            f"{100 * p['prefill_utilisation']:.0f} % / {100 * p['decode_utilisation']:.0f} %"
        t.add(format_rate(p["rate_per_s"]), p["layout"] or "-",
              "-" if p["total_chips"] is None else p["total_chips"],
              "-" if p["total_chips"] is None else
              f"{p['prefill_chips']} + {p['decode_chips']}",
              format_duration(p["ttft_percentile_s"]), format_duration(p["tpot_percentile_s"]),
              util, "-" if p["decode_mean_batch"] is None else f"{p['decode_mean_batch']:.2f}",
              p.get("reason") or "", cls="" if p["feasible"] else "bad")
    return [Section("answer-capacity", "The answer: pools for the traffic", facts=facts,
                    charts=[Chart("chart-capacity", "Chips against the arrival rate",
                                  charts.capacity_chart(cap, "chart-capacity"),
                                  "Prefill (bottom) and decode (top) chips per rate; hover a "
                                  "bar for its values.")],
                    tables=[t],
                    notes=[f"{cap['sim_calls']} simulations, {cap['cache_hits']} cache hits"
                           + _earlier(cap)])]


# ---------------------------------------------------------------------------- sensitivity


def sensitivity_section(sens: Json) -> Section:
    from ctxplan.report.sensitivity import format_figure

    steps = [f"{100 * x:+.0f}%" for x in sens["steps"]]
    base = sens["base"]
    base_chips = base.get("total_chips")
    each = " / ".join(steps)
    cols = [Column("figure"), Column("value", True), Column(f"N* at {each}", True),
            Column(f"TPOT change at {each}", True), Column(f"TTFT change at {each}", True)]
    t = TableView("sensitivity-table", "Each figure moved, one at a time (sorted by effect)",
                  cols, caption="N*: the new answer (infeasible: none meets the SLA); TPOT / "
                  "TTFT: the change of the base plan's latency, in %.")

    def pct(new: float | None, old: float | None) -> str:
        return "n/a" if new is None or not old else f"{100 * (new / old - 1):+.1f}%"

    for row in sens["figures"]:
        moves = row["moves"]
        chips = []
        for m in moves:
            sol = m.get("solve")
            chips.append("n/a" if sol is None else "infeasible" if not sol["feasible"]
                         else str(sol["total_chips"]))
        tpot = [pct(m["base_plan"]["tpot_s"], (base.get("decode") or {}).get("tpot_s"))
                for m in moves]
        ttft = [pct(m["base_plan"]["ttft_s"], (base.get("prefill") or {}).get("ttft_s"))
                for m in moves]
        moved = any(c != str(base_chips) for c in chips)
        t.add(row["figure"], format_figure(row["figure"], row["value"]), " / ".join(chips),
              " / ".join(tpot), " / ".join(ttft), cls="best" if moved else "")
    notes = [f"{row['figure']} {100 * m['step']:+.0f}%: {m['reason']}"
             for row in sens["figures"] for m in row["moves"] if m.get("reason")]
    plan = "infeasible" if not base["feasible"] else (
        f"N* = {base_chips} (prefill {base['prefill']['cp']} x TP {base['prefill']['tp']}, "
        f"decode {base['decode']['cp']} x TP {base['decode']['tp']}, {base['kv_tier']})")
    return Section("sensitivity", "What the answer hinges on",
                   facts=[("base plan", plan), ("steps", ", ".join(steps)),
                          ("simulations", f"{sens['sim_calls']} run, {sens['cache_hits']} "
                           "reused")],
                   charts=[Chart("chart-tornado", "Tornado: each figure moved",
                                 charts.tornado_chart(sens, "chart-tornado"),
                                 "Blue: the figure moved down; orange: up; the larger steps "
                                 "drawn thicker and paler. Hover a bar for its value.")],
                   tables=[t], notes=notes)


# ----------------------------------------------------------------------- the assumptions


def assumptions_section(facts: Json) -> Section:
    """The chip, cluster and model figures with their sources and flags (see
    :mod:`ctxplan.report.page.assumptions`)."""
    parts = []
    items = [("chip", facts.get("chip")), ("cluster", facts.get("cluster"))]
    items += [("model", m) for m in facts.get("models", [])]
    for what, item in items:
        if item is None:
            continue
        tables = []
        for tv in item.get("tables", []):
            t = TableView(tv["id"], tv["title"], [Column(c, n, wrap=c in ("note", "value"))
                                                   for c, n in tv["columns"]])
            for r in tv["rows"]:
                t.add(*r)
            tables.append(t)
        sid = f"assumptions-{what}" + (f"-{item['anchor']}" if item.get("anchor") else "")
        parts.append(Section(sid, f"{what.capitalize()}: {item['name']}",
                             facts=[(str(a), str(b)) for a, b in item.get("facts", [])],
                             notes=list(item.get("notes", [])), tables=tables))
    return Section("assumptions", "Assumptions: chip, cluster and model figures",
                   notes=list(facts.get("notes", [])), parts=parts)


# ----------------------------------------------------------------------------- validation


def validation_section(v: Json) -> Section:
    """The simulator against published measurements on this chip (``ctxplan validate``)."""
    chip = v["chip"]
    if v.get("error"):
        return Section("validation", f"Validation on {chip}", notes=[v["error"]])
    cases = v.get("cases", [])
    if not cases:
        return Section("validation", f"Validation on {chip}", notes=[
            f"No validation row covers chip {chip}: none of the {v.get('total_cases', 0)} "
            "published measurements in validation/ was taken on it, so the latencies above are "
            "unchecked against hardware for this chip."], facts=[("rows", "none")])
    t = TableView("validation-table", f"Published measurements on {chip} against the simulator",
                  [Column("case"), Column("role"), Column("metric"), Column("layout"),
                   Column("S", True), Column("measured", True), Column("simulated", True),
                   Column("error", True), Column("target", True), Column("source", wrap=True)],
                  caption="error = simulated / measured - 1. Calibration rows were used to set "
                  "figures of the presets: their error shows a fit, not evidence.")
    for c in cases:
        err = c["error"]
        t.add(c["name"], c["role"], c["metric"], f"cp{c['cp']} tp{c['tp']} b{c['batch']}",
              format_tokens(c["context_length"]), format_seconds(c["measured"]),
              format_seconds(c["simulated"], missing="not simulated"),
              "-" if err is None else f"{err:+.1%}", f"±{c['tolerance']:.0%}", c["source"],
              cls="" if c["within_tolerance"] else "bad")
    facts = []
    for role, stats in v["by_role"].items():
        if not stats["cases"]:
            facts.append((f"{role} rows", "none on this chip"))
            continue
        worst = stats["worst_abs_error"]
        facts.append((f"{role} rows", f"{stats['cases']} cases, {stats['within_tolerance']} "
                      f"within target; median |error| {stats['median_abs_error']:.1%}, worst "
                      + ("-" if worst is None else f"{worst:.1%} ({stats['worst_case']})")))
    notes = []
    if not v["by_role"].get("prediction", {}).get("cases"):
        notes.append(f"Every row on {chip} is a calibration row (used to set figures): no "
                     "prediction row checks this chip yet.")
    return Section("validation", f"Validation on {chip}", facts=facts, tables=[t],
                   notes=notes)
