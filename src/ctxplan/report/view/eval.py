"""The view of one evaluation, from its JSON (``EvalResult.to_dict()``): what was simulated and
what it measured, and the critical path per layer by op kind."""

from __future__ import annotations

from ctxplan.config.units import format_bytes, format_gb, format_seconds
from ctxplan.config.units import format_count as plural
from ctxplan.report.view.base import Answer, Column, TableView
from ctxplan.report.view.solve import Json


def _usable(mem: Json) -> str:
    """'128.0 GB', or '115.6 GB usable of 128.0' under --memory-headroom."""
    cap, headroom = mem["capacity_bytes"], mem.get("memory_headroom", 1.0)
    if headroom == 1.0:
        return f"{format_gb(cap)} GB"
    reserved = mem["reserved_bytes"]
    usable = reserved + int(headroom * (cap - reserved))
    return f"{format_gb(usable)} GB usable of {format_gb(cap)}"


def _activations(mem: Json) -> str:
    """The transient part of the memory: simulated peak, or none counted (the wall's bound)."""
    if mem.get("activation_source") == "simulated":
        return (f"transient buffers {format_gb(mem['activation_bytes'])} at the peak "
                f"(simulated; their own peak {format_gb(mem['transient_peak_bytes'])})")
    return "transient buffers not counted (the capacity wall's lower bound)"


def _runs(items: list[str]) -> list[tuple[str, int]]:
    """Consecutive equal items as (item, count)."""
    out: list[tuple[str, int]] = []
    for x in items:
        if out and out[-1][0] == x:
            out[-1] = (x, out[-1][1] + 1)
        else:
            out.append((x, 1))
    return out


def answer(r: Json, *, trace: str | None = None, wall_s: float | None = None) -> Answer:
    """The layout, the latency (or why it was not simulated), the memory of the fullest chip,
    the CP bytes simulated against the closed form, the simulation's size, the KV handoff."""
    phase = r["phase"]
    a = Answer(f"{r['model']} on {r['chip']} ({r['cluster']}), {phase}, S = "
               f"{r['context_length']:,}", ok=bool(r["simulated"]))
    pp, dp = r.get("pp", 1), r.get("dp", 1)
    a.add("layout", (f"pp {pp} x " if pp > 1 else "") + (f"dp {dp} x " if dp > 1 else "")
          + f"cp {r['cp']} x tp {r['tp']} = "
          f"{plural(r['chips'], 'chip')}, batch {r['batch']}"
          + (f", MLA {r['mla_mode']}" if r.get("mla_mode") else ""), brief=True)
    if pp > 1:
        a.add("stages", ", ".join(f"{first}-{last}" for first, last in r["stages"])
              + " (layers of each stage)")
    a.add("KV tier", f"{r['kv_tier']} ({r['c_kv_bytes']} B per token per layer)", brief=True)
    label = "TTFT" if phase == "prefill" else "TPOT"
    if r.get("handoff"):
        label += " (with handoff)"
    latency = r["ttft_s" if phase == "prefill" else "tpot_s"]
    a.add(label, format_seconds(latency) if r["simulated"] else f"not simulated: {r['reason']}",
          brief=True)
    mem = r["memory"]
    a.add("memory per chip", f"{format_gb(mem['per_chip_bytes'])} / {_usable(mem)} "
          f"({'fits' if mem['fits'] else 'DOES NOT FIT'}): weights "
          f"{format_gb(mem['weights_bytes'])}, KV {format_gb(mem['kv_bytes'])}, "
          f"{_activations(mem)}, reserve {format_gb(mem['reserved_bytes'])}",
          brief=True)
    pc = r.get("prefill_chunk")
    if pc:
        passes = ("one pass" if pc["chunks"] == 1
                  else f"{pc['chunks']:,} chunks of {pc['tokens']:,} tokens")
        a.add("prefill chunks", f"{passes} ({pc['policy']}): {pc['why']}", brief=True)
    if r.get("cached"):
        a.add("cached prefix", f"{r['cached']:,} tokens cached, "
              f"{r['context_length'] - r['cached']:,} new")
    g = r.get("ring")
    if g:
        gathered = ("" if g.get("ttft_all_gather_s") is None
                    else f", all-gather {format_seconds(g['ttft_all_gather_s'])}")
        both = (f"; auto simulated pass-kv {format_seconds(g['ttft_pass_kv_s'])}, pass-q "
                f"{format_seconds(g['ttft_pass_q_s'])}{gathered}"
                if g["asked"] == "auto" and not g.get("chunks") else
                "; auto: each chunk's by Meta's rule at its own miss rate"
                if g["asked"] == "auto" else "")
        a.add("prefill ring", f"{g['used']}{both}; Meta's heuristic: {g['heuristic']} (miss "
              f"rate {g['miss_rate']:.1%}, pass-q up to {g['threshold']:.1%})")
        if g.get("chunks"):
            runs = _runs(g["chunks"])
            a.add("  per chunk", ", ".join(f"{name} x {n}" for name, n in runs))
    mc = r.get("moe")
    if mc:
        both = (f"; auto simulated ep {format_seconds(mc['latency_ep_s'])}, tp "
                f"{format_seconds(mc['latency_tp_s'])}" if mc["asked"] == "auto" else "")
        a.add("MoE", f"{mc['used']}{both}")
    c = r.get("comm")
    if c:
        a.add("CP comm", f"{c['pattern']}: {c['sends_per_layer']} sends per layer, "
              f"{format_bytes(c['simulated_bytes'])} simulated = "
              f"{format_bytes(c['analytic_bytes'])} analytic")
        p = r.get("pp_comm")
        if p:
            batches = (f" ({p['micro_batches']} micro-batches)" if p["micro_batches"] > 1
                       else "")
            a.add("PP comm", f"{p['handovers']:,} handovers between stages{batches}: "
                  f"{format_bytes(p['simulated_bytes'])} simulated = "
                  f"{format_bytes(p['analytic_bytes'])} analytic")
        kinds = c.get("kinds") or []
        if len(kinds) > 1:
            for k in kinds:
                a.add(f"  {k['layer_type']}", f"{plural(k['layers'], 'layer')}, {k['pattern']}: "
                      f"{plural(k['ring_steps_per_layer'], 'step')}, {k['sends_per_layer']} "
                      f"sends per layer, {format_bytes(k['analytic_bytes'])}")
        util = r["utilisation"]
        a.add("simulation", f"{plural(r['layers_simulated'], 'layer')} simulated, "
              f"{r['tasks']:,} tasks, {r['events']:,} events; busiest compute "
              f"{util['max_compute']:.0%}, busiest link {util['max_link']:.0%}")
    h = r.get("handoff")
    if h:
        dp, pp = h.get("decode_dp", 1), h.get("decode_pp", 1)
        last = h["first_decode_chip"] + pp * dp * h["decode_cp"] * h["decode_tp"] - 1
        pool = ((f"PP {pp} x " if pp > 1 else "") + (f"DP {dp} x " if dp > 1 else "")
                + f"cp {h['decode_cp']} x tp {h['decode_tp']}")
        where = ""
        if h.get("decode_cluster") and h["decode_cluster"] != r.get("cluster"):
            where = f" of {h['decode_chip']} on {h['decode_cluster']}"
        elif h.get("decode_chip") and h["decode_chip"] != r.get("chip"):
            where = f" of {h['decode_chip']}"
        a.add("KV handoff", f"{h['mode']} to a decode pool of {pool} (chips "
              f"{h['first_decode_chip']}..{last}{where}): "
              f"{format_bytes(h['bytes_moved'])} in {h['sends']:,} transfers (= the decode "
              f"pool's KV, {format_bytes(h['decode_kv_bytes'])}); "
              f"{format_seconds(h['handoff_s'])} not hidden behind the prefill's "
              f"{format_seconds(h['prefill_s'])}")
    if trace and r["simulated"]:
        a.add("trace", f"{trace} (open in https://ui.perfetto.dev)")
    if wall_s is not None:
        a.add("wall time", f"{wall_s:,.3f} s")
    return a


def breakdown_table(r: Json) -> TableView | None:
    """Per layer, the time each op kind was the binding constraint on the critical path (mean
    over the simulated layers; docs/validation.md, "The breakdown"), largest first, with the
    part that was the fixed cost of communication operations. None when not simulated."""
    bd = r.get("breakdown")
    if not bd:
        return None
    per = bd["per_layer_s"]
    op_cost = bd["op_cost_per_layer_s"]
    layer_s = sum(per.values())
    t = TableView("breakdown", f"critical path per layer (mean of {plural(bd['layers'], 'layer')}"
                  f": {format_seconds(layer_s)}; all layers and the rest: "
                  f"{format_seconds(bd['critical_path_s'])})",
                  [Column("op kind", name_col=True), Column("per layer", True),
                   Column("of which op cost", True), Column("share", True)])
    for kind, secs in sorted(per.items(), key=lambda kv: (-kv[1], kv[0])):
        cost = op_cost.get(kind)
        t.add(kind, format_seconds(secs), format_seconds(cost) if cost else "",
              f"{secs / layer_s:.1%}" if layer_s else "-")
    for kind, secs in sorted(bd["outside_layers_s"].items()):
        t.add(f"{kind} (once)", format_seconds(secs), "", "")
    return t
