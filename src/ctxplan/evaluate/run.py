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
from ctxplan.sim import EventLimitError, SimulationError


def check_memory(cfg: EvalConfig, lay: Layout | None = None) -> MemoryReport:
    """Per-chip memory of the configuration (of its layout ``lay`` when the caller has it),
    without simulating."""
    lay = lay or cfg.layout()
    return MemoryReport.of(entry.chip_memory(cfg.model, lay), cfg.chip,
                          cfg.policy.memory_headroom)


def evaluate(cfg: EvalConfig, *, trace: bool = False) -> tuple[EvalResult, Trace | None]:
    """Evaluate one configuration. Returns the result and, if asked, the trace data.

    A prefill with ``prefill_ring = "auto"`` simulates both rings and keeps the faster (the
    pass-KV one on a tie, or when the model has no layer that runs either), reporting both
    TTFTs and Meta's heuristic beside them (:class:`RingChoice`)."""
    lay = cfg.layout()
    lay_d = cfg.handoff_layout()
    if cfg.phase == "prefill" and cfg.policy.prefill_ring == "auto":
        return _evaluate_auto(cfg, lay, lay_d, trace)
    result, tr = _evaluate_one(cfg, lay, lay_d, trace)
    if result.phase == "prefill":
        miss, threshold, pick = entry.ring_heuristic(cfg.model, lay)
        result = replace(result, ring=results.RingChoice(
            cfg.policy.prefill_ring, lay.policy.prefill_ring, pick, miss, threshold))
    return result, tr


def _evaluate_auto(cfg: EvalConfig, lay: Layout, lay_d: Layout | None,
                   trace: bool) -> tuple[EvalResult, Trace | None]:
    """Both rings (``lay`` is the pass-KV layout), the faster kept."""
    miss, threshold, pick = entry.ring_heuristic(cfg.model, lay)
    kv, kv_trace = _evaluate_one(cfg.with_policy(prefill_ring="pass-kv"), lay, lay_d, trace)
    ttft_q = None
    chosen, chosen_trace, used = kv, kv_trace, "pass-kv"
    runs = kv.simulations
    if entry.runs_a_ring(cfg.model, lay):
        ring_q = replace(lay.policy, prefill_ring="pass-q")
        q, q_trace = _evaluate_one(cfg.with_policy(prefill_ring="pass-q"),
                                   replace(lay, policy=ring_q), lay_d, trace)
        runs += q.simulations
        ttft_q = q.latency_s
        faster = (q.latency_s is not None
                  and (kv.latency_s is None or q.latency_s < kv.latency_s))
        if faster:
            chosen, chosen_trace, used = q, q_trace, "pass-q"
    else:
        ttft_q = kv.latency_s   # no full-attention layer: the two are the same graph
    ring = results.RingChoice("auto", used, pick, miss, threshold, kv.latency_s, ttft_q)
    return replace(chosen, key=cfg.key(), ring=ring, simulations=runs), chosen_trace


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
    result = EvalResult(
        latency_s=run.latency_ns / 1e9, comm=comm, events=res.events, tasks=b.graph.n_tasks,
        simulated=True, reason="", simulations=1, handoff=handoff,
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
