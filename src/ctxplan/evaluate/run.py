"""Single-point evaluation: one fully specified configuration -> TTFT or TPOT, memory, bytes.

The solver treats this as a black box. A configuration whose memory does not fit is reported as
such and never simulated (the capacity wall costs no simulation). The layouts are built once
per evaluation (:meth:`EvalConfig.layout`, :meth:`EvalConfig.handoff_layout`) and carried to
everything that needs them.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ctxplan.errors import CtxplanError, UserInputError
from ctxplan.evaluate import results
from ctxplan.evaluate.breakdown import critical_breakdown
from ctxplan.evaluate.config import EvalConfig
from ctxplan.evaluate.results import EvalResult, MemoryReport, Trace
from ctxplan.evaluate.simulate import busy_and_bytes, paused_gc, simulate
from ctxplan.mapping import entry
from ctxplan.mapping.entry import Layout
from ctxplan.policy import MOE_PARALLEL
from ctxplan.sim import EventLimitError, SimulationError
from ctxplan.sim.notice import compile_notice


def check_memory(cfg: EvalConfig, lay: Layout | None = None) -> MemoryReport:
    """Per-chip memory of the configuration (of its layout ``lay`` when the caller has it),
    without simulating."""
    lay = lay or cfg.layout()
    return MemoryReport.of(entry.chip_memory(cfg.model, lay), cfg.chip,
                          cfg.policy.memory_headroom)


def evaluate(cfg: EvalConfig, *, trace: bool = False) -> tuple[EvalResult, Trace | None]:
    """Evaluate one configuration. Returns the result and, if asked, the trace data.

    ``prefill_ring = "auto"`` simulates pass-KV and each other ring some layer of the model
    runs (pass-Q for full attention, the all-gather for DeepSeek-V4's CSA and HCA), and
    ``moe_parallel = "auto"`` (a MoE model) both ways of running the MoE; every combination is
    simulated and the fastest kept (the first on a tie: pass-KV, EP; and when the model has no
    layer a ring applies to), reporting each figure and, for a prefill, Meta's heuristic
    beside them (:class:`RingChoice`, :class:`MoeChoice`)."""
    lay = cfg.layout()
    lay_d = cfg.handoff_layout()
    prefill = cfg.phase == "prefill"
    asked = cfg.policy
    rings = [lay.policy.prefill_ring]
    if prefill and asked.prefill_ring == "auto":
        rings = ["pass-kv", *(r for r in entry.rings_that_apply(cfg.model, lay)
                              if r != "pass-kv")]
    moes = [lay.policy.moe_parallel]
    if asked.moe_parallel == "auto" and cfg.model.moe is not None:
        moes = list(MOE_PARALLEL)
    runs: dict[tuple[str, str], tuple[EvalResult, Trace | None]] = {}
    with compile_notice():   # a cold numba cache: one pair of lines on stderr for them all
        for moe in moes:
            for ring in rings:
                one = cfg.with_policy(moe_parallel=moe,
                                      prefill_ring=ring if prefill else asked.prefill_ring)
                policy = replace(lay.policy, moe_parallel=moe, prefill_ring=ring)
                runs[ring, moe] = _evaluate_one(one, replace(lay, policy=policy), lay_d,
                                                trace)
    (ring, moe), (chosen, chosen_trace) = min(runs.items(), key=lambda kv: _rank(kv[1][0]))
    simulations = sum(r.simulations for r, _ in runs.values())
    choice = None
    if prefill:
        miss, threshold, pick = entry.ring_heuristic(cfg.model, lay)
        ttfts: dict[str, float | None] = {}
        if asked.prefill_ring == "auto":
            # a ring no layer runs is the pass-KV graph: its figure
            ttfts = {r: runs.get((r, moe), runs["pass-kv", moe])[0].latency_s
                     for r in ("pass-kv", "pass-q")}
            if "all-gather" in rings:
                ttfts["all-gather"] = runs["all-gather", moe][0].latency_s
        choice = results.RingChoice(asked.prefill_ring, ring, pick, miss, threshold,
                                    ttfts.get("pass-kv"), ttfts.get("pass-q"),
                                    ttfts.get("all-gather"))
    moe_choice = None
    if cfg.model.moe is not None and asked.moe_parallel != "ep":
        both = {m: runs[ring, m][0].latency_s for m in moes} if len(moes) > 1 else {}
        moe_choice = results.MoeChoice(asked.moe_parallel, moe, both.get("ep"), both.get("tp"))
    return replace(chosen, key=cfg.key(), ring=choice, moe=moe_choice,
                   simulations=simulations), chosen_trace


def _rank(result: EvalResult) -> tuple[bool, float]:
    """Faster first; a point that does not fit (no latency) after every one that does."""
    return (result.latency_s is None, result.latency_s or 0.0)


def _evaluate_one(cfg: EvalConfig, lay: Layout, lay_d: Layout | None,
                  trace: bool) -> tuple[EvalResult, Trace | None]:
    tier_name, c_kv = cfg.kv()
    mem = check_memory(cfg, lay)
    base = dict(
        phase=cfg.phase, model=cfg.model.name, chip=cfg.chip.name, cluster=cfg.cluster.name,
        context_length=cfg.context_length, batch=cfg.batch, kv_tier=tier_name, c_kv_bytes=c_kv,
        cp=cfg.cp, tp=cfg.tp, chips=lay.n_chips, mla_mode=lay.mla_mode, memory=mem,
        key=cfg.key(), cached=lay.cached,
    )
    if not mem.fits:
        reason = (f"does not fit: {mem.per_chip_bytes / 1e9:.1f} GB per chip "
                  f"(weights {mem.weights_bytes / 1e9:.1f}, KV {mem.kv_bytes / 1e9:.1f}, "
                  f"activations {mem.activation_bytes / 1e9:.1f}, reserve "
                  f"{mem.reserved_bytes / 1e9:.1f}) > {mem.usable_text()}")
        return EvalResult(latency_s=None, comm=None, events=0, tasks=0, simulated=False,
                          reason=reason, **base), None  # type: ignore[arg-type]

    try:
        with paused_gc():
            run = simulate(cfg, lay, lay_d)
    except SimulationError as exc:
        raise _simulation_failed(cfg, exc) from None
    b, res = run.builder, run.result
    kinds = entry.cp_kinds(lay)
    by_kind = tuple(entry.kind_comms(cfg.model, lay))
    analytic = sum(k.analytic_bytes for k in by_kind)
    # Prefill: counted in the graph (layers of different kinds differ); decode: the most of
    # any kind's layer.
    per_layer = (b.most_per_layer(kinds) if lay.is_prefill
                 else max(k.sends_per_layer for k in by_kind))
    ring_steps = max(k.ring_steps_per_layer for k in by_kind)
    pattern = "+".join(dict.fromkeys(k.pattern for k in by_kind))
    busy, cp_bytes, resource_busy = busy_and_bytes(run, lay, kinds)
    comm = results.CommReport(pattern, ring_steps, per_layer, analytic, cp_bytes, by_kind)
    span = run.latency_ns or 1
    is_compute = np.array([r == entry.COMPUTE for r in b.resource_role], bool)
    compute_util = resource_busy[is_compute].max(initial=0) / span
    link_busy = resource_busy[~is_compute]
    link_util = link_busy.max(initial=0) / span
    handoff = None
    if lay_d is not None:
        transfers, with_costs = entry.handoff_kinds()
        moving = b.mask_of(transfers)
        handing = b.mask_of(with_costs)
        prefill_end = int(res.end_ns[~handing].max())
        handoff = results.HandoffReport(
            mode=lay.policy.kv_handoff, decode_cp=lay_d.cp, decode_tp=lay_d.tp,
            first_decode_chip=lay.n_chips, bytes_moved=int(b.graph.nbytes[moving].sum()),
            decode_kv_bytes=entry.decode_pool_kv_bytes(cfg.model, lay_d),
            sends=int(moving.sum()), prefill_s=prefill_end / 1e9,
            handoff_s=(run.latency_ns - prefill_end) / 1e9)
    yield_ = entry.tokens_per_step(cfg.model, lay)
    result = EvalResult(
        latency_s=run.latency_ns / 1e9 / yield_, comm=comm, events=res.events,
        tasks=b.graph.n_tasks, simulated=True, reason="", simulations=1, handoff=handoff,
        tokens_per_step=yield_,
        busy_s_by_kind=busy,
        max_compute_utilisation=round(float(compute_util), 6),
        max_link_utilisation=round(float(link_util), 6),
        layers_simulated=run.layers_simulated,
        breakdown=critical_breakdown(b, res, run.layers_simulated),
        **base,  # type: ignore[arg-type]
    )
    return result, (Trace(b, res) if trace else None)


def _simulation_failed(cfg: EvalConfig, exc: SimulationError) -> CtxplanError:
    """A stopped simulation as one line for the user: the event limit (raise it), or a graph
    that cannot run (a cycle or a task that can never start: a bug, named in the message)."""
    what = f"{cfg.phase} cp {cfg.cp} x tp {cfg.tp}, S = {cfg.context_length:,}"
    if isinstance(exc, EventLimitError):
        return UserInputError(
            "event_limit", exc.limit,
            f"raise it (--event-limit, or event_limit in a study / point file) above "
            f"{exc.limit:,}, or simulate a smaller configuration",
            f"simulation of {what} stopped after {exc.limit:,} events with {exc.done:,} of "
            f"{exc.total:,} tasks done")
    return CtxplanError(f"simulation of {what} failed: {exc}. This is a bug in ctxplan's op "
                        "graph; please report it with the command that triggered it")
