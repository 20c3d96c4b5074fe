"""The view of one solve, from its JSON (``SolveResult.to_dict()``, docs/solver.md): the answer,
the table per KV tier, the TP degrees each pool tried and the search path.

The terminal (``ctxplan solve``) and the report page both draw these; a sweep draws each
point's (its points are solves). A field the solve's JSON gains appears on both by one change
here: a fact in :func:`answer`, or a column of one table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxplan.config.units import (
    format_bytes,
    format_duration,
    format_gb,
    format_seconds,
    format_short,
    format_throughput,
    format_tokens,
)
from ctxplan.config.units import format_count as plural
from ctxplan.policy import TOO_LARGE
from ctxplan.report.view.base import BAD, BEST, DIM, OK, WARN, Answer, Column, TableView

Json = Mapping[str, Any]

BOUND_BY = {"capacity": "capacity wall (memory)", "tpot": "TPOT target",
            "ttft": "TTFT target", "tp": "TP degree", "objective": "tokens per chip"}
CANDIDATE_SETS = {"all": "every N", "group": "whole groups of {g} chips",
                  "pow2": "powers of two"}
# How --batch auto ended its search (BatchPlan.bound_by).
BATCH_BOUND = {"tpot": "the largest that meets the TPOT target",
               "capacity": "the largest that fits in memory; the TPOT target would allow more",
               "limit": "the batch bound, 1,048,576"}
TTFT_FREE = "TTFT not constrained"
_rate = format_throughput


# ------------------------------------------------------------------------------- words


def sla_text(s: Json) -> str:
    """'TPOT <= 20.000 ms (per-seq), TTFT not constrained' (the TPOT limit at the answer's
    batch: per-batch readings scale it)."""
    sla = s["sla"]
    tpot = f"TPOT <= {format_seconds(sla['tpot_limit_s'])} ({sla['tps_reading']})"
    ttft = sla.get("ttft_max_s")
    return tpot + (f", {TTFT_FREE}" if ttft is None else f", TTFT <= {format_seconds(ttft)}")


def search_words(s: Json) -> str:
    """'galloping search over every N up to 1,024 chips per pool'."""
    over = str(CANDIDATE_SETS.get(s["candidate_set"], s["candidate_set"])).format(
        g=s.get("group_size"))
    return f"{s['strategy']} search over {over} up to {s['max_chips']:,} chips per pool"


def hits_text(sim_calls: int, cache_hits: int, earlier: int | None) -> str:
    """'3 simulations, 8 cache hits (5 from earlier runs)'."""
    text = f"{plural(sim_calls, 'simulation')}, {plural(cache_hits, 'cache hit')}"
    return text + (f" ({earlier:,} from earlier runs)" if earlier else "")


def system_text(s: Json) -> str:
    """' on sg2262 (sg2262-c2c)', or with the decode pool on its own chip / cluster ',
    prefill on h20-96 (hgx-h20-ib), decode on h20-141 (hgx-h20-141-ib)': what follows the
    model's name."""
    chip, cluster = s["chip"], s["cluster"]
    d_chip, d_cluster = s.get("decode_chip") or chip, s.get("decode_cluster") or cluster
    if (d_chip, d_cluster) == (chip, cluster):
        return f" on {chip} ({cluster})"
    return f", prefill on {chip} ({cluster}), decode on {d_chip} ({d_cluster})"


def question(s: Json) -> str:
    """'deepseek-v3 on sg2262 (sg2262-c2c), S = 1M (1,048,576 tokens)'."""
    n = s["context_length"]
    return f"{s['model']}{system_text(s)}, S = {format_tokens(n)} ({n:,} tokens)"


def headline(s: Json) -> str:
    """The answer in one line (the report's headline, a sweep point's summary)."""
    where = f"{s['model']}{system_text(s)}, S = {format_tokens(s['context_length'])}"
    if not s["feasible"]:
        return f"{where}: infeasible"
    return (f"{where}: N* = {plural(s['total_chips'], 'chip')} (prefill "
            f"{s['prefill']['chips']} + decode {s['decode']['chips']}), KV tier {s['kv_tier']}")


def best_tier(s: Json) -> Json | None:
    return next((t for t in s["tiers"] if t["kv_tier"] == s.get("kv_tier")), None)


def chunk_text(p: Json) -> str:
    """How the prefill plan's prompt enters, when it takes chunks to fit (or was asked to):
    '64 chunks of 16,384 tokens (auto): one pass peaks at ...'; '' for one pass."""
    pc = p.get("prefill_chunk")
    if not pc or pc["chunks"] == 1:
        return ""
    return f"{pc['chunks']:,} chunks of {pc['tokens']:,} tokens ({pc['policy']}): {pc['why']}"


def pool_text(p: Json, letter: str) -> str:
    """'Nd 4 x TP 2 = 8 chips' ('PP 2 x Nd 4 x TP 2 = 16 chips' with pipeline stages, 'DP 4
    x Nd 1 x TP 2 = 8 chips' with DP attention)."""
    pp, dp = p.get("pp", 1), p.get("dp", 1)
    stages = (f"PP {pp} x " if pp > 1 else "") + (f"DP {dp} x " if dp > 1 else "")
    return f"{stages}N{letter} {p['cp']} x TP {p['tp']} = {plural(p['chips'], 'chip')}"


# ------------------------------------------------------------------------------ the answer


def answer(s: Json) -> Answer:
    """The answer first (N*, the two pools with their TTFT and TPOT, the KV tier and why, what
    bound each pool, the SLA: the brief facts), then how it was reached."""
    # An infeasible answer that skipped graphs too large to simulate here covers only what
    # could be simulated: say so where the verdict is read, not only in the search line.
    # Only a phase no tier has a pool for counts (a feasible phase's skips cost nothing).
    missing = {phase for phase in ("prefill", "decode")
               if not s["feasible"] and not any(t[phase]["feasible"] for t in s["tiers"])}
    skipped = any(c["phase"] in missing and c.get("why", "").startswith(TOO_LARGE)
                  for c in s.get("candidates", []))
    verdict = (f"N* = {plural(s['total_chips'], 'chip')}" if s["feasible"] else
               f"INFEASIBLE (no plan of up to {s['max_chips']:,} chips per pool meets the SLA"
               + ("; larger graphs too large to simulate here were skipped, see search)"
                  if skipped else ")"))
    a = Answer(f"{question(s)}: {verdict}", ok=bool(s["feasible"]))
    if not s["feasible"]:
        for phase in ("prefill", "decode"):
            if not any(t[phase]["feasible"] for t in s["tiers"]):
                a.add(f"{phase} pool", phase_miss(s, phase), brief=True)
        a.add("SLA", sla_text(s), brief=True)
        for tier in s["tiers"]:
            a.add(f"why ({tier['kv_tier']})", tier_reason(tier) or "-")
        a.add("search", search_fact(s))
        return a
    p, d = s["prefill"], s["decode"]
    a.add("N*", f"{plural(s['total_chips'], 'chip')} = prefill {p['chips']} + decode "
          f"{d['chips']}", brief=True)
    ttft_note = "" if s["sla"].get("ttft_constrained") else \
        f" ({TTFT_FREE}: the prefill pool is its capacity minimum)"
    a.add("prefill pool", f"{pool_text(p, 'p')}; TTFT {format_duration(p['ttft_s'])}"
          f"{ttft_note}", brief=True)
    a.add("decode pool", f"{pool_text(d, 'd')}; TPOT {format_duration(d['tpot_s'])} at batch "
          f"{d['batch']}{batch_note(s)}", brief=True)
    chunking = chunk_text(p)
    if chunking:
        a.add("prefill chunks", chunking, brief=True)
    a.add("KV tier", tier_choice(s), brief=True)
    a.add("bound by", f"prefill: {BOUND_BY.get(p.get('bound_by') or '', '-')}; decode: "
          f"{BOUND_BY.get(d.get('bound_by') or '', '-')}", brief=True)
    a.add("SLA", sla_text(s), brief=True)
    cached = cached_prefix(s)
    if cached:
        a.add("cached prefix", cached)
    a.add("throughput", f"decode {_rate(d.get('tps_per_batch'))} tokens/s; "
          f"{_rate(d.get('tokens_per_s_per_chip'))} per decode chip; "
          f"{_rate(s.get('tokens_per_s_per_chip'))} per chip of the plan")
    power = power_text(s)
    if power:
        a.add("power", power)
    cost = cost_text(s)
    if cost:
        a.add("cost", cost)
    h = s.get("handoff")
    if h is not None:
        a.add("KV handoff", handoff_text(h))
    if s.get("objective", "chips") != "chips":
        a.add("objective", OBJECTIVES[s["objective"]])
    a.add("search", search_fact(s))
    a.add("simulations", hits_text(s["sim_calls"], s["cache_hits"], s.get("earlier_run_hits")))
    return a


OBJECTIVES = {
    "tokens-per-chip": "tokens-per-chip: the most decode tokens/s per chip of the plan among "
                       "plans meeting the SLAs",
    "cost": "cost: the least cost per million decode tokens among plans meeting the SLAs",
    "power": "power: the fewest joules (at TDP) per decode token among plans meeting the SLAs",
}


def power_text(s: Json) -> str:
    """The plan's power at its chips' TDP and its energy per decode token."""
    if s.get("watts") is None:
        return "unknown: the chip file states no tdp_w" if s.get("feasible") else ""
    text = f"{s['watts'] / 1e3:,.1f} kW at TDP ({_per_pool(s, 'tdp_w', '{:g} W')})"
    if s.get("joules_per_token") is not None:
        text += f"; {s['joules_per_token']:,.3g} J per decode token"
    return text


def _per_pool(s: Json, key: str, form: str) -> str:
    """'20 chips x 400 W', or with a decode pool on its own chip '14 chips x 400 W + 6 chips
    x 500 W' (the prefill's, then the decode's)."""
    decode = s.get(f"decode_{key}")
    if decode is None:
        return f"{plural(s['total_chips'], 'chip')} x {form.format(s[key])}"
    n_d = s["decode"]["chips"]
    return (f"{plural(s['total_chips'] - n_d, 'chip')} x {form.format(s[key])} + "
            f"{plural(n_d, 'chip')} x {form.format(decode)}")


def cost_text(s: Json) -> str:
    """The plan's cost per hour and per million decode tokens, from the price given."""
    if s.get("cost_per_hour") is None:
        return ""
    text = (f"{s['cost_per_hour']:,.2f} per hour "
            f"({_per_pool(s, 'price_per_chip_hour', '{:,.4g} per chip-hour')})")
    if s.get("cost_per_million_tokens") is not None:
        text += f"; {s['cost_per_million_tokens']:,.3g} per million decode tokens"
    return text


def phase_miss(s: Json, phase: str) -> str:
    """Why no tier has a pool for ``phase``, in one line: the fastest point the search
    simulated against the target, or that nothing fits in memory."""
    tried = [c for c in s["candidates"] if c["phase"] == phase and c["simulated"]
             and _latency(c) is not None]
    letter, label = ("p", "TTFT") if phase == "prefill" else ("d", "TPOT")
    if not tried:
        # Nothing simulated: the roofline bound ruled every N out, or nothing fits, or what
        # fits is too large to simulate here. Say which (the bound first: it is the cause
        # wherever it cut a TP degree at the most chips its pool may have).
        mine = [c for c in s["candidates"] if c["phase"] == phase]
        too_large = [c for c in mine if c.get("why", "").startswith(TOO_LARGE)]

        def same(a: Json, b: Json) -> bool:
            return all(a.get(k) == b.get(k) for k in ("kv_tier", "tp", "pp", "dp"))

        # A bound cut below a too-large cut of the same pool shape rules out only what
        # can be simulated here; one at the most chips the pool may have rules out all.
        bound = [c for c in mine if c.get("cut_by") == "TTFT bound"]
        if bound and not any(same(c, t) and t["n"] > c["n"] for c in bound for t in too_large):
            most = max(bound, key=lambda c: (c["n"] * c["tp"], c["tp"]))
            why = most["why"].split(": ", 1)[-1]   # "its compute alone takes ..."
            return (f"no N{letter} of up to {s['max_chips']:,} chips can meet "
                    f"{label} <= {format_seconds(s['sla'].get('ttft_max_s'))}: at N{letter} "
                    f"{most['n']} x TP {most['tp']} ({most['kv_tier']}) {why}")
        if too_large:
            allowed = " and that the roofline bound allows" if phase == "prefill" else ""
            return (f"no N{letter} was simulated: those that fit in memory{allowed} are "
                    f"{TOO_LARGE} (raise --host-memory-budget)")
        return f"no N{letter} of up to {s['max_chips']:,} chips fits in memory"
    best = min(tried, key=lambda c: (_latency(c), c["n"] * c["tp"]))
    limit = s["sla"]["tpot_limit_s"] if phase == "decode" else s["sla"].get("ttft_max_s")
    target = f"{label} <= {format_seconds(limit)}" if limit is not None else label
    return (f"no N{letter} meets {target}: the fastest tried is {format_duration(_latency(best))}"
            f" (N{letter} {best['n']} x TP {best['tp']}, {best['kv_tier']})")


def search_fact(s: Json) -> str:
    o = s["search"]
    text = (f"{search_words(s)}; prefill TP {o['prefill_tp']}, decode TP {o['decode_tp']}, "
            f"batch {o['batch']}, memory headroom {o['memory_headroom']:g}")
    skipped = [c for c in s.get("candidates", []) if c.get("why", "").startswith(TOO_LARGE)]
    if skipped:
        text += (f"; not simulated, {TOO_LARGE} (graphs over the simulator's memory budget, "
                 "--host-memory-budget): "
                 + ", ".join(dict.fromkeys(f"{c['phase']} TP{c['tp']} from N = {c['n']}"
                                           for c in skipped)))
    return text


def batch_note(s: Json) -> str:
    """Under --batch auto, what ended the batch search: the TPOT target, or memory."""
    if s["search"].get("batch") != "auto":
        return ""
    tier = best_tier(s)
    plan = (tier or {}).get("decode", {}).get("batch_search") or {}
    why = BATCH_BOUND.get(plan.get("bound_by", ""))
    return f" (--batch auto: {why})" if why else " (--batch auto)"


def cached_prefix(s: Json) -> str:
    """The cached prefix the prefill was sized for, and the ring it ran (docs/solver.md)."""
    fraction = s.get("cached_fraction") or 0.0
    asked = s.get("prefill_ring", "pass-kv")
    if not fraction and asked == "pass-kv":
        return ""
    ring = (s.get("prefill") or {}).get("ring") or asked
    chosen = f"{ring} (chosen by --prefill-ring auto)" if asked == "auto" else ring
    return (f"{fraction:.0%} of S cached: the prefill computes the {1 - fraction:.0%} not "
            f"cached, attending the whole context; ring {chosen}")


def handoff_text(h: Json) -> str:
    """The KV handoff of the chosen pair of pools (docs/handoff.md)."""
    if not h.get("simulated"):
        return f"{h['mode']}: not simulated: {h.get('reason') or ''}"
    shown = ("all of it hidden behind the prefill (TTFT = the prefill's)" if h["handoff_s"] == 0
             else f"{format_duration(h['handoff_s'])} not hidden behind the prefill (TTFT = "
             f"{format_duration(h['prefill_s'])} + {format_duration(h['handoff_s'])})")
    first = h.get("first_decode_chip")
    where = "" if first is None else f" (from chip {first} on)"
    text = (f"{h['mode']}: {format_bytes(h['bytes_moved'])} to the decode pool{where}, "
            f"{shown}")
    if h.get("stepped"):
        was = h.get("from") or {}
        text += (f"; with Np {was.get('prefill_cp')}, Nd {was.get('decode_cp')} it missed the "
                 f"TTFT target, so the {h['stepped']} pool was stepped up")
    return text


def _tier_rate(t: Json) -> float | None:
    return ((t["decode"].get("answer") or {}).get("tps_per_batch")) if t["feasible"] else None


def _tier_ttft(t: Json) -> float | None:
    return ((t["prefill"].get("answer") or {}).get("ttft_s")) if t["feasible"] else None


def tier_choice(s: Json) -> str:
    """The chosen KV tier and why it won over the others: fewer chips, or, where tiers tie on
    chips (a KV tier changes only the KV cache's bytes, which may not move a pool's N), the
    faster decode, then the faster prefill (TierPlan.rank); the most tokens per chip under
    --objective tokens-per-chip."""
    best = best_tier(s)
    name = s["kv_tier"]
    others = [t for t in s["tiers"] if t["kv_tier"] != name]
    if best is None or not others:
        return str(name)
    if s.get("objective", "chips") != "chips":
        rivals = ", ".join(f"{t['kv_tier']} {_rate(t.get('tokens_per_s_per_chip'))}"
                           for t in others if t["feasible"])
        return (f"{name}: the most decode tokens/s per chip ({_rate(s['tokens_per_s_per_chip'])}"
                + (f"; {rivals}" if rivals else "") + ")")
    chips = s["total_chips"]
    tied = [t for t in others if t["feasible"] and t["total_chips"] == chips]
    if not tied:
        def needs(t: Json) -> str:
            if t["feasible"]:
                return plural(t["total_chips"], "chip")
            return "cut: could not beat it" if t.get("cut_reason") else "infeasible"
        rivals = ", ".join(f"{t['kv_tier']}: {needs(t)}" for t in others)
        return f"{name}: the fewest chips ({rivals})"
    names = ", ".join(t["kv_tier"] for t in tied)
    head = (f"{name}: {names} {'needs' if len(tied) == 1 else 'need'} the same "
            f"{plural(chips, 'chip')} (a KV tier changes only the KV cache's bytes, which "
            "need not move a pool's N)")
    rate, ttft = _tier_rate(best), _tier_ttft(best)
    rival = tied[0]
    if rate != _tier_rate(rival):
        return (f"{head}; {name} decodes faster ({_rate(rate)} against "
                f"{_rate(_tier_rate(rival))} tokens/s)")
    if ttft != _tier_ttft(rival):
        return (f"{head}; {name} prefills faster (TTFT {format_duration(ttft)} against "
                f"{format_duration(_tier_ttft(rival))})")
    return (f"{head}, the same TPOT and TTFT (where attention is bound by its FLOPs, fewer KV "
            "bytes do not shorten it): the first tier listed is kept")


def tier_reason(tier: Json) -> str:
    """Why a tier has no plan, or why its search was cut."""
    parts = [tier.get("infeasible_reason") or "", tier.get("cut_reason") or ""]
    return "; ".join(p for p in parts if p)


# ------------------------------------------------------------------------------ the tables


def _pool(plan: Json) -> str:
    """'4x2 (4)': the pool's N x TP and its capacity wall at that TP; '-' or 'cut' with the
    wall when it has no answer."""
    a = plan.get("answer")
    wall = plan.get("n_cap")
    text = pool_cell(a) if a is not None else "cut" if plan.get("cut_reason") else "-"
    return text if wall is None else f"{text} ({wall})"


def pool_cell(pool: Json) -> str:
    """A pool in a table cell: 'N' (TP 1), 'NxTP', with 'PP2x' / 'DP4x' in front."""
    text = str(pool["cp"]) if pool["tp"] == 1 else f"{pool['cp']}x{pool['tp']}"
    if pool.get("dp", 1) > 1:
        text = f"DP{pool['dp']}x{text}"
    if pool.get("pp", 1) > 1:
        text = f"PP{pool['pp']}x{text}"
    return text


def tiers_table(s: Json, tid: str) -> TableView:
    """One row per KV tier: each pool's answer and wall, its latency, tokens per chip, chips;
    under the table, what a cell cannot say (why a tier fails, was cut or fell back)."""
    searched = s["search"].get("batch") == "auto"
    cols = [Column("KV tier", name_col=True), Column("bytes/token/layer", True, detail=True),
            Column("Np (wall)", True), Column("TTFT", True), Column("Nd (wall)", True),
            Column("TPOT", True)]
    cols += [Column("batch", True)] if searched else []
    cols += [Column("tok/s /chip", True), Column("chips", True)]
    legend = ["N (wall): the answer N x TP and the capacity wall at its TP", "* the best tier"]
    if s.get("fallback"):
        legend.append("! galloping fell back to a scan")
    if any(t.get("cut_reason") for t in s["tiers"]):
        legend.append("cut: could not beat the best plan")
    t = TableView(tid, f"Per KV tier: {sla_text(s)}", cols,
                  caption=f"{search_words(s)}. " + "; ".join(legend) + ".")
    for tier in s["tiers"]:
        p, d = tier["prefill"], tier["decode"]
        pa, da = p.get("answer") or {}, d.get("answer") or {}
        best = tier["kv_tier"] == s.get("kv_tier")
        chips = "-" if tier["total_chips"] is None else str(tier["total_chips"])
        if p.get("fallback") or d.get("fallback"):
            chips += " !"
        row = [tier["kv_tier"] + (" *" if best else ""), tier["c_kv_bytes"], _pool(p),
               format_short(pa.get("ttft_s")), _pool(d), format_short(da.get("tpot_s"))]
        row += [da.get("batch", "-")] if searched else []
        row += [_rate(tier.get("tokens_per_s_per_chip")), chips]
        t.add(*row, cls=BEST if best else ("" if tier["feasible"] else BAD))
    t.notes += tier_notes(s)
    return t


def tier_notes(s: Json) -> list[str]:
    """Why a tier fails or was cut (when another tier answers: an infeasible solve says it in
    its answer), and where galloping distrusted itself and scanned."""
    notes = []
    for tier in s["tiers"]:
        reason = tier_reason(tier)
        if reason and s["feasible"]:
            notes.append(f"{tier['kv_tier']}: {reason}")
        for phase in ("prefill", "decode"):
            plan = tier[phase]
            if plan.get("fallback"):
                notes.append(f"! {tier['kv_tier']} {phase}: {plan.get('fallback_reason')}")
    return notes


def tp_table(s: Json, tid: str) -> TableView | None:
    """Each TP degree each pool tried and what became of it (only when TP was searched)."""
    if not any(t[ph].get("tp_searched") for t in s["tiers"] for ph in ("prefill", "decode")):
        return None
    t = TableView(tid, "TP degrees per pool (chosen: fewest chips, then lower latency, then "
                  "smaller TP)",
                  [Column("KV tier", name_col=True), Column("pool"), Column("TP", True),
                   Column("N (wall)", True), Column("chips", True), Column("latency", True),
                   Column("status", wrap=True), Column("why", wrap=True, detail=True)],
                  caption="status in a few words; every reason in full in --json (and in the "
                  "report page's why column)")
    for tier in s["tiers"]:
        for phase in ("prefill", "decode"):
            plan = tier[phase]
            if not plan.get("tp_searched"):
                continue
            key = "ttft_s" if phase == "prefill" else "tpot_s"
            for o in plan["tp_options"]:
                n = "-" if o["cp"] is None else str(o["cp"])
                if o["n_cap"] is not None:
                    n += f" ({o['n_cap']})"
                note = _tp_note(o)
                tp = o["tp"] if o.get("pp", 1) == 1 else f"{o['tp']} (PP {o['pp']})"
                t.add(tier["kv_tier"], phase, tp, n, o["chips"],
                      format_short(o.get(key)), o["status"] + (f": {note}" if note else ""),
                      o["why"], cls=OK if o["status"] == "chosen" else
                      (DIM if o["status"] in ("cut", "excluded") else ""))
    return t


def _tp_note(o: Json) -> str:
    """A few words on a TP option (its full reason is the why column)."""
    if o["status"] == "excluded":
        return str(o["why"])
    if o["status"] == "infeasible":
        return (f"does not fit up to N = {o['bound_n']}" if o["n_cap"] is None
                else f"misses the SLA up to N = {o['bound_n']}")
    if o["status"] == "cut":
        return "beaten by " + str(o["why"]).split(", more than ")[-1].split("cannot beat ")[-1]
    return str(o["why"])


def _result(c: Json) -> tuple[str, str]:
    """What became of a candidate, and its row class."""
    cut = c.get("cut_by")
    if c["step"] == "memory" or cut == "capacity wall":
        word, cls = "does not fit", DIM
    elif c["step"] == "bound" or cut == "TTFT bound":
        word, cls = "cut by the TTFT bound (and every smaller N)", DIM
    elif cut:
        word, cls = "cut: cannot beat the best plan", DIM
    elif c["step"] == "wall":
        word, cls = "no SLA: wall", OK
    elif c["meets_sla"]:
        word, cls = "meets SLA", OK
    else:
        word, cls = "misses SLA", WARN
    return word + (" (cached)" if c.get("cache_hit") else ""), cls


def _latency(c: Json) -> float | None:
    return c.get("ttft_s") if c["phase"] == "prefill" else c.get("tpot_s")


def search_table(s: Json, tid: str, *, grouped: bool = False) -> TableView:
    """The candidates in search order, simulated or not. ``grouped``: a run of memory checks
    of one pool on one row, its N values (or batches) listed ("1, 2, 4"), as the terminal
    shows them."""
    searched = s["search"].get("batch") == "auto"
    cands: Sequence[Json] = s["candidates"]
    staged = any(c.get("pp", 1) > 1 for c in cands)
    cols = [Column("#", True, detail=True), Column("phase"), Column("KV tier", name_col=True),
            Column("N", True, wrap=grouped), Column("TP", True)]
    cols += [Column("PP", True)] if staged else []
    cols += [Column("batch", True)] if searched else []
    cols += [Column("step"), Column("latency", True), Column("GB/chip", True),
             Column("result", wrap=True), Column("why", wrap=True, detail=True)]
    t = TableView(tid, "Search path: " + hits_text(s["sim_calls"], s["cache_hits"],
                                                   s.get("earlier_run_hits")), cols,
                  caption="memory: capacity-wall checks (no simulation)"
                  + (", their N values on one row" if grouped else "")
                  + "; cached: the latency came from the cache or the result store")

    def add(first: int, last: int, c: Json, ns: str, batches: str, word: str, cls: str,
            why: str) -> None:
        mem = c["memory"]["per_chip_bytes"]
        number = str(first) if first == last else f"{first}-{last}"
        row = [number, c["phase"], c["kv_tier"], ns, c["tp"]]
        row += [c.get("pp", 1)] if staged else []
        row += [batches] if searched else []
        row += [c["step"], format_short(_latency(c)), format_gb(mem) if mem else "-", word, why]
        t.add(*row, cls=cls)

    i = 0
    while i < len(cands):
        c = cands[i]
        group = _memory_group(cands, i) if grouped and c["step"] == "memory" else [c]
        last = group[-1]
        if len(group) > 1 and last["n"] == c["n"]:      # a batch wall: one pool, batch grows
            ns, batches = str(c["n"]), ", ".join(str(g["batch"]) for g in group)
        else:                                           # an N wall at one TP and batch
            ns, batches = ", ".join(str(g["n"]) for g in group), str(c["batch"])
        word, cls = _result(c)
        add(i + 1, i + len(group), last, ns, batches, word, cls,
            c["why"] if len(group) == 1 else "")
        i += len(group)
    return t


def _memory_group(cands: Sequence[Json], i: int) -> list[Json]:
    """The run of memory checks from ``i`` of one pool: one phase, tier and TP, and either
    one batch (the N wall) or one N (the batch wall)."""
    c = cands[i]
    group = [c]
    for d in cands[i + 1:]:
        if d["step"] != "memory" or (d["phase"], d["kv_tier"], d["tp"], d.get("pp", 1)) != (
                c["phase"], c["kv_tier"], c["tp"], c.get("pp", 1)):
            break
        same_batch = all(g["batch"] == d["batch"] for g in group)
        same_n = all(g["n"] == d["n"] for g in group)
        if not (same_batch or same_n):
            break
        group.append(d)
    return group


def tables(s: Json, key: str, *, grouped: bool = False) -> list[TableView]:
    """The tier table, the TP table (when TP was searched) and the search path."""
    out = [tiers_table(s, f"tiers-{key}")]
    tps = tp_table(s, f"tp-{key}")
    if tps is not None:
        out.append(tps)
    out.append(search_table(s, f"path-{key}", grouped=grouped))
    return out


__all__ = ["BOUND_BY", "answer", "headline", "hits_text", "search_table", "search_words",
           "sla_text", "tables", "tier_choice", "tiers_table", "tp_table"]
