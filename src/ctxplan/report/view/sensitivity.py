"""The view of a sensitivity study, from its JSON (``SensitivityStudy.to_dict()``,
docs/sensitivity.md): the base plan, and each figure moved one step at a time, sorted by effect
(the study's order)."""

from __future__ import annotations

from ctxplan.config.units import format_count as plural
from ctxplan.config.units import format_duration, format_tokens
from ctxplan.report.view.base import BEST, Column, TableView
from ctxplan.report.view.solve import Json, hits_text, system_text


def format_figure(name: str, value: float | None) -> str:
    """A figure's value in the unit people quote it in."""
    if value is None:
        return "-"
    last = name.rsplit(".", 1)[-1]
    if name.startswith("sla."):
        return format_duration(value)
    if "peak" in name.split("."):
        return f"{value / 1e12:,.1f} TFLOP/s"
    if last in ("bandwidth", "memory_bandwidth"):
        return f"{value / 1e9:,.1f} GB/s"
    if last == "memory_capacity":
        return f"{value / 1e9:,.1f} GB"
    if last in ("op_overhead", "collective_overhead", "latency"):
        return f"{value / 1e3:,.2f} us"
    return f"{value:.4g}"


def step_text(step: float) -> str:
    """0.1 -> '+10%'."""
    return f"{100 * step:+.0f}%"


def change_text(new: float | None, old: float | None) -> str:
    """The change of a latency in %, to the digits that matter: '+12', '-3.4', '0', 'n/a'."""
    if new is None or old is None or old == 0:
        return "n/a"
    x = 100 * (new / old - 1)
    if x == 0:
        return "0"
    return f"{x:+.0f}" if abs(x) >= 9.95 else f"{x:+.1f}"


def plan_text(base: Json) -> str:
    """'N* = 15 chips (8x1 + 7x1, mla-fp8)' or 'infeasible'."""
    if not base["feasible"]:
        return "infeasible"
    p, d = base["prefill"], base["decode"]
    return (f"N* = {plural(base['total_chips'], 'chip')} ({p['cp']}x{p['tp']} + "
            f"{d['cp']}x{d['tp']}, {base['kv_tier']})")


def _chips(move: Json) -> str:
    sol = move.get("solve")
    if sol is None:
        return "n/a"
    return "inf." if not sol["feasible"] else str(sol["total_chips"])


def sensitivity_table(sens: Json, tid: str = "sensitivity-table") -> TableView:
    """One row per figure: its value, then per step the new N* and the change of the base
    plan's TPOT and TTFT (in %); a row whose N* moves is marked."""
    base = sens["base"]
    steps = " ".join(step_text(x) for x in sens["steps"])
    tpot0 = (base.get("decode") or {}).get("tpot_s")
    ttft0 = (base.get("prefill") or {}).get("ttft_s")
    t = TableView(tid, f"What the answer hinges on: {sens['model']}{system_text(sens)}, "
                  f"S = {format_tokens(sens['context_length'])}; base "
                  f"{plan_text(base)}, TTFT {format_duration(ttft0)}, TPOT "
                  f"{format_duration(tpot0)}",
                  # a cell per step, in a row that wraps between steps
                  [Column("figure", name_col=True), Column("value", True),
                   Column("N*", True, wrap=True), Column("TPOT %", True, wrap=True),
                   Column("TTFT %", True, wrap=True)],
                  caption=f"each figure moved by {steps}, one at a time, sorted by effect; N*: "
                  "the new answer (inf.: infeasible); TPOT / TTFT: change of the base plan's, "
                  "in %; " + hits_text(sens["sim_calls"], sens["cache_hits"],
                                        sens.get("earlier_run_hits")))
    for row in sens["figures"]:
        moves = row["moves"]
        chips = [_chips(m) for m in moves]
        moved = any(m.get("solve") is not None and m["solve"]["total_chips"]
                    != base["total_chips"] for m in moves)
        t.add(row["figure"], format_figure(row["figure"], row["value"]), " ".join(chips),
              " ".join(change_text(m["base_plan"]["tpot_s"], tpot0) for m in moves),
              " ".join(change_text(m["base_plan"]["ttft_s"], ttft0) for m in moves),
              cls=BEST if moved else "")
    t.notes += [f"{row['figure']} {step_text(m['step'])}: {m['reason']}"
                for row in sens["figures"] for m in row["moves"] if m.get("reason")]
    return t
