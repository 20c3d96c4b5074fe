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
from ctxplan.evaluate import budget, results
from ctxplan.evaluate.breakdown import critical_breakdown
from ctxplan.evaluate.config import EvalConfig
from ctxplan.evaluate.results import EvalResult, MemoryReport, Trace
from ctxplan.evaluate.simulate import Run, busy_and_bytes, paused_gc, simulate
from ctxplan.mapping import entry
from ctxplan.mapping.entry import Layout
from ctxplan.policy import MOE_PARALLEL, TOO_LARGE
from ctxplan.sim import EventLimitError, SimulationError
from ctxplan.sim.notice import compile_notice


def check_memory(cfg: EvalConfig, lay: Layout | None = None) -> MemoryReport:
    """The capacity wall: a lower bound on the fullest chip's memory (weights + the KV kept
    at the phase's end + reserve), without simulating; a point over it is never simulated,
    and a point under it is decided by its simulated peak (:func:`evaluate`)."""
    lay = lay or cfg.layout()
    return MemoryReport.of(entry.chip_memory_bound(cfg.model, lay), cfg.chip,
                          cfg.policy.memory_headroom)


AUTO_BUDGET_BYTES = 2 * 2**30                # host_memory_budget = auto: at most 2 GiB ...
AUTO_BUDGET_SHARE = 0.5                      # ... and at most half of this machine's memory


def host_budget_bytes(asked: int | str) -> int:
    """The simulator's memory budget for one graph: the bytes asked, or under "auto" the
    lower of AUTO_BUDGET_BYTES and AUTO_BUDGET_SHARE of this machine's physical memory."""
    if asked != "auto":
        return int(asked)
    import os

    try:
        machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):   # not on Linux / macOS: the fixed bound
        return AUTO_BUDGET_BYTES
    return min(AUTO_BUDGET_BYTES, int(AUTO_BUDGET_SHARE * machine))


# prefill_chunk = auto halves the chunk until the peak fits, down to this many tokens per CP
# rank (smaller passes than any engine runs).
MIN_AUTO_CHUNK_PER_RANK = 256
# ... and starts from at least this many per CP rank (docs/mapping.md, "Chunked prefill").
AUTO_CHUNK_PER_RANK = 2048


def auto_chunks(cfg: EvalConfig) -> list[int]:
    """The chunks ``prefill_chunk = auto`` tries, in order, once one pass does not fit: the
    cluster's ``prefill_chunk_tokens``, raised so each CP rank's piece is at least
    AUTO_CHUNK_PER_RANK tokens, then halved (smaller than the new tokens, at least
    MIN_AUTO_CHUNK_PER_RANK per rank)."""
    new = cfg.context_length - cfg.cached
    c = max(cfg.cluster.prefill_chunk_tokens, AUTO_CHUNK_PER_RANK * cfg.cp)
    out = []
    while c >= MIN_AUTO_CHUNK_PER_RANK * cfg.cp:
        if c < new:
            out.append(c)
        c //= 2
    return out


def evaluate(cfg: EvalConfig, *, trace: bool = False) -> tuple[EvalResult, Trace | None]:
    """Evaluate one configuration (see :func:`evaluate_chunk`); a prefill under
    ``prefill_chunk = auto`` in one pass when it fits by its simulated peak, else in the
    chunks of :func:`auto_chunks` until one fits (the last tried when none does)."""
    asked = cfg.policy.prefill_chunk
    if cfg.phase != "prefill":
        return evaluate_chunk(cfg, trace=trace)
    new = cfg.context_length - cfg.cached
    if asked == "dynamic":
        got, tr = evaluate_chunk(cfg, trace=trace)
        sizes = entry.chunk_sizes(cfg.layout())
        return replace(got, prefill_chunk=results.ChunkChoice(
            "dynamic", sizes[0], len(sizes),
            f"{len(sizes)} chunks of decreasing size ({sizes[0]:,} down to {sizes[-1]:,} "
            "tokens), each of about the same cost")), tr
    if asked == "auto" and cfg.pp > 1:
        return _evaluate_pipeline_auto(cfg, trace)
    if asked != "auto":
        got, tr = evaluate_chunk(cfg, trace=trace)
        size = new if asked == "off" else min(int(asked), new)
        n = -(-new // size)
        why = ("one pass over the prompt, as asked (--prefill-chunk off)" if asked == "off"
               else f"chunks of {size:,} tokens, as asked")
        return replace(got, prefill_chunk=results.ChunkChoice(
            "off" if asked == "off" else "size", size, n, why)), tr
    got, tr = evaluate_chunk(cfg.with_policy(prefill_chunk="off"), trace=trace)
    sims = got.simulations
    choice = results.ChunkChoice("auto", new, 1, "one pass fits by its simulated peak")
    if not got.simulated and got.reason.startswith(TOO_LARGE):
        choice = replace(choice, why=f"one pass, not simulated: {TOO_LARGE}")
    elif not got.simulated:
        choice = replace(choice, why="one pass: the capacity wall (weights + KV) is over "
                         "the memory already, which chunks do not change")
    elif not got.memory.fits:
        unchunked = got.memory.per_chip_bytes
        seen = [(new, got.memory.transient_peak_bytes)]   # (chunk, simulated transient peak)
        sizes = auto_chunks(cfg)
        i = 0
        while i < len(sizes):
            size = sizes[i]
            got, tr = evaluate_chunk(cfg.with_policy(prefill_chunk=size), trace=trace)
            sims += got.simulations
            n = -(-new // size)
            if got.memory.fits:
                choice = results.ChunkChoice(
                    "auto", size, n, f"one pass peaks at {unchunked / 1e9:.1f} GB per chip "
                    f"> {got.memory.usable_text()}; {n} chunks of {size:,} tokens peak at "
                    f"{got.memory.per_chip_bytes / 1e9:.1f} GB")
                break
            seen.append((size, got.memory.transient_peak_bytes))
            over = got.memory.per_chip_bytes - got.memory.usable_bytes
            step = _next_chunk(seen, over, sizes, i)
            choice = results.ChunkChoice(
                "auto", size, n, f"no chunk fits: one pass peaks at {unchunked / 1e9:.1f} GB "
                f"per chip, {n} chunks of {size:,} tokens at "
                f"{got.memory.per_chip_bytes / 1e9:.1f} GB > {got.memory.usable_text()}"
                + ("" if step is not None or i == len(sizes) - 1 else
                   "; the line through the simulated transient peaks does not reach the "
                   "headroom at any smaller chunk tried by auto"))
            if step is None:
                break
            i = step
    return replace(got, key=cfg.key(), simulations=sims, prefill_chunk=choice), tr


def pipeline_auto_chunks(cfg: EvalConfig) -> list[int]:
    """The chunks ``prefill_chunk = auto`` tries with pipeline stages, in order: 4 x PP
    chunks, the fewest that fill the stages (the chunked-prefill rule would take one pass
    when it fits), then halved while the peak does not fit (at least MIN_AUTO_CHUNK_PER_RANK
    tokens per CP rank)."""
    new = cfg.context_length - cfg.cached
    out = [max(-(-new // (4 * cfg.pp)), 1)]
    while out[-1] // 2 >= MIN_AUTO_CHUNK_PER_RANK * cfg.cp:
        out.append(out[-1] // 2)
    return out


def chunk_schedules(cfg: EvalConfig) -> list[list[tuple[int, int]]]:
    """Every chunk schedule the prefill of ``cfg`` may run, as (new tokens, tokens before it)
    per chunk in order: the one its ``prefill_chunk`` fixes, or under ``auto`` each one auto
    may pick (one pass and :func:`auto_chunks`'s; with pipeline stages
    :func:`pipeline_auto_chunks`'s)."""
    asked = cfg.policy.prefill_chunk
    if asked == "auto":
        sizes: list[int | str] = list(pipeline_auto_chunks(cfg)) if cfg.pp > 1 else \
            ["off", *auto_chunks(cfg)]
        policies = [cfg.with_policy(prefill_chunk=size) for size in sizes]
    else:
        policies = [cfg]
    out = []
    for c in policies:
        lay = c.layout()
        done, chunks = lay.cached, []
        for size in entry.chunk_sizes(lay):
            chunks.append((size, done))
            done += size
        out.append(chunks)
    return out


def _evaluate_pipeline_auto(cfg: EvalConfig, trace: bool) -> tuple[EvalResult, Trace | None]:
    """``prefill_chunk = auto`` with pipeline stages: never one pass (it overlaps no stage),
    the chunks of :func:`pipeline_auto_chunks` until one fits by its simulated peak."""
    new = cfg.context_length - cfg.cached
    sims = 0
    for size in pipeline_auto_chunks(cfg):
        got, tr = evaluate_chunk(cfg.with_policy(prefill_chunk=size), trace=trace)
        sims += got.simulations
        n = -(-new // size)
        why = (f"{n} chunks of {size:,} tokens, at least 4 per pipeline stage so the "
               f"{cfg.pp} stages fill")
        if size < -(-new // (4 * cfg.pp)):
            why += " (halved until the simulated peak fits)"
        if not got.simulated or got.memory.fits:
            break
        why += f"; over the memory at {got.memory.per_chip_bytes / 1e9:.1f} GB per chip"
    choice = results.ChunkChoice("auto", size, n, why)
    return replace(got, key=cfg.key(), simulations=sims, prefill_chunk=choice), tr


def _next_chunk(seen: list[tuple[int, int]], over_bytes: int, sizes: list[int],
                i: int) -> int | None:
    """The index in ``sizes`` of the next chunk auto simulates after ``sizes[i]`` did not fit
    by ``over_bytes``, or None to stop. A guess to be verified, never a result: the line
    through the last two simulated (chunk, transient peak) points says how small a chunk
    would bring the transient down by ``over_bytes``; the largest chunk of ``sizes`` at or
    below it is tried next (the next one when the line cannot tell), and auto stops when
    the line reaches the headroom at no chunk it would try (the part of the transient that
    does not shrink with the chunk, a long prefix's ring blocks say, is over it already)."""
    if i + 1 >= len(sizes):
        return None
    (c1, t1), (c2, t2) = seen[-2], seen[-1]
    if c1 <= c2 or t1 <= t2:
        return i + 1                   # no slope measured: halve once more
    slope = (t1 - t2) / (c1 - c2)      # bytes of transient per token of chunk
    target = t2 - over_bytes           # the transient that would fit
    if target <= t2 - slope * (c2 - sizes[-1]):
        return None
    need = c2 - over_bytes / slope
    return next((j for j in range(i + 1, len(sizes)) if sizes[j] <= need), len(sizes) - 1)


def evaluate_chunk(cfg: EvalConfig, *, trace: bool = False
                   ) -> tuple[EvalResult, Trace | None]:
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
    chunked = prefill and len(entry.chunk_sizes(lay)) > 1
    rings = [lay.policy.prefill_ring]
    if prefill and asked.prefill_ring == "auto":
        rings = ["pass-kv", *(r for r in entry.rings_that_apply(cfg.model, lay)
                              if r != "pass-kv")]
        if chunked:
            # each chunk's full-attention ring by Meta's rule at its own miss rate
            rings = [entry.PER_CHUNK, *(r for r in rings if r == "all-gather")]
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
        if asked.prefill_ring == "auto" and not chunked:
            # a ring no layer runs is the pass-KV graph: its figure
            ttfts = {r: runs.get((r, moe), runs["pass-kv", moe])[0].latency_s
                     for r in ("pass-kv", "pass-q")}
            if "all-gather" in rings:
                ttfts["all-gather"] = runs["all-gather", moe][0].latency_s
        per_chunk: tuple[str, ...] = ()
        if chunked:
            used_lay = replace(lay, policy=replace(lay.policy, prefill_ring=ring))
            per_chunk = entry.chunk_rings(cfg.model, used_lay)
            if ring == entry.PER_CHUNK:
                ring = per_chunk[0] if len(set(per_chunk)) == 1 else entry.PER_CHUNK
        choice = results.RingChoice(asked.prefill_ring, ring, pick, miss, threshold,
                                    ttfts.get("pass-kv"), ttfts.get("pass-q"),
                                    ttfts.get("all-gather"), per_chunk)
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
    mem = check_memory(cfg, lay)   # the lower bound: over it, nothing is simulated
    base = dict(
        phase=cfg.phase, model=cfg.model.name, chip=cfg.chip.name, cluster=cfg.cluster.name,
        context_length=cfg.context_length, batch=cfg.batch, kv_tier=tier_name, c_kv_bytes=c_kv,
        cp=cfg.cp, tp=cfg.tp, chips=lay.n_chips, mla_mode=lay.mla_mode, memory=mem,
        key=cfg.key(), cached=lay.cached, pp=lay.pp, dp=lay.dp,
        stages=lay.stages or ((0, cfg.model.num_hidden_layers - 1),),
    )
    if not mem.fits:
        reason = (f"does not fit: {mem.per_chip_bytes / 1e9:.1f} GB per chip before any "
                  f"transient buffer (weights {mem.weights_bytes / 1e9:.1f}, KV "
                  f"{mem.kv_bytes / 1e9:.1f}, reserve {mem.reserved_bytes / 1e9:.1f}) > "
                  f"{mem.usable_text()}")
        return EvalResult(latency_s=None, comm=None, events=0, tasks=0, simulated=False,
                          reason=reason, **base), None  # type: ignore[arg-type]

    reason = over_host_budget(cfg, lay, lay_d)
    if reason:
        return EvalResult(latency_s=None, comm=None, events=0, tasks=0, simulated=False,
                          reason=reason, **base), None  # type: ignore[arg-type]
    try:
        # Worker processes share the budget: this graph waits for room (evaluate/budget.py).
        with budget.reserved(_estimated_bytes(cfg, lay, lay_d),
                             host_budget_bytes(cfg.policy.host_memory_budget)), paused_gc():
            run = simulate(cfg, lay, lay_d)
    except SimulationError as exc:
        raise _simulation_failed(cfg, exc) from None
    b, res = run.builder, run.result
    mem = _simulated_memory(cfg, lay, run, mem)
    base["memory"] = mem
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
    pp_comm = None
    if lay.pp > 1:
        pp_mask = b.mask_of(list(entry.pp_kinds()))
        units = (len(b.micro_batches) if not lay.is_prefill
                 else len(entry.chunk_sizes(lay.stage_layout())))
        pp_comm = results.PPComm(
            handovers=(lay.pp - 1) * units,
            analytic_bytes=entry.pp_analytic_bytes(cfg.model, lay),
            simulated_bytes=int(b.graph.nbytes[pp_mask].sum()),
            micro_batches=1 if lay.is_prefill else units)
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
            decode_dp=lay_d.dp, decode_pp=lay_d.pp,
            first_decode_chip=_first_decode_chip(cfg, lay),
            decode_chip=cfg.decode_chip.name,
            decode_cluster=(cfg.handoff_cluster or cfg.cluster).name,
            bytes_moved=int(b.graph.nbytes[moving].sum()),
            decode_kv_bytes=entry.decode_pool_kv_bytes(cfg.model, lay_d),
            sends=int(moving.sum()), prefill_s=prefill_end / 1e9,
            handoff_s=(run.latency_ns - prefill_end) / 1e9)
    yield_ = entry.tokens_per_step(cfg.model, lay)
    reason = "" if mem.fits else (
        f"does not fit by its simulated peak: {mem.per_chip_bytes / 1e9:.1f} GB per chip "
        f"(weights {mem.weights_bytes / 1e9:.1f}, KV {mem.kv_bytes / 1e9:.1f}, transient "
        f"buffers {mem.activation_bytes / 1e9:.1f} at the peak, reserve "
        f"{mem.reserved_bytes / 1e9:.1f}) > {mem.usable_text()}")
    result = EvalResult(
        latency_s=run.latency_ns / 1e9 / yield_, comm=comm, events=res.events,
        tasks=b.graph.n_tasks, simulated=True, reason=reason, simulations=1, handoff=handoff,
        tokens_per_step=yield_,
        busy_s_by_kind=busy,
        max_compute_utilisation=round(float(compute_util), 6),
        max_link_utilisation=round(float(link_util), 6),
        layers_simulated=run.layers_simulated,
        breakdown=critical_breakdown(b, res, run.layers_simulated),
        pp_comm=pp_comm,
        **base,  # type: ignore[arg-type]
    )
    return result, (Trace(b, res) if trace else None)


def over_host_budget(cfg: EvalConfig, lay: Layout | None = None,
                     lay_d: Layout | str | None = "auto") -> str:
    """Why the configuration's graph is not built here (its estimate over the host memory
    budget, mapping/size.py), or "" when it may be."""
    lay = lay or cfg.layout()
    lay_d = cfg.handoff_layout() if lay_d == "auto" else lay_d
    budget = host_budget_bytes(cfg.policy.host_memory_budget)
    need = _estimated_bytes(cfg, lay, lay_d)
    if need <= budget:
        return ""
    tasks = entry.estimated_tasks(cfg.model, lay)
    return (f"{TOO_LARGE}: its graph is estimated at {tasks:,} tasks, {need / 2**30:.1f} GiB, "
            f"over the simulator's budget of {budget / 2**30:.1f} GiB (--host-memory-budget)")


def _estimated_bytes(cfg: EvalConfig, lay: Layout, lay_d: Layout | str | None) -> int:
    """The simulator's memory for the graph of ``lay`` (and its handoff's decode pool), by
    the closed form of mapping/size.py."""
    return entry.estimated_bytes(cfg.model, lay) + (
        entry.estimated_bytes(cfg.model, lay_d) if isinstance(lay_d, Layout) else 0)


def _simulated_memory(cfg: EvalConfig, lay: Layout, run: Run, bound: MemoryReport
                      ) -> MemoryReport:
    """The fullest chip of the pool by the simulated peak of its live buffers (KV and
    transient, mapping/buffers.py). Under the periodic shortcut the layers not simulated add
    their KV at the peak (it only grows)."""
    res = run.result
    peaks = entry.live_peaks(run.builder, res.start_ns, res.end_ns, res.makespan_ns)
    n = lay.n_chips
    total, kv_end = peaks.total[:n].copy(), peaks.kv_end[:n]
    if run.repeat:
        held = np.repeat(np.asarray(entry.kv_held_by_rank(cfg.model, lay), np.int64), lay.tp)
        total += np.maximum(held - kv_end, 0)
        kv_end = np.maximum(held, kv_end)
    # The fullest chip by weights and live buffers (with pipeline stages the weights differ
    # from stage to stage).
    weights = np.asarray(entry.weights_by_chip(cfg.model, lay), np.int64)
    full = int(np.argmax(weights + total))
    return replace(bound, weights_bytes=int(weights[full])).simulated(
        int(total[full]), int(kv_end[full]), int(peaks.transient[:n].max(initial=0)))


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


def _first_decode_chip(cfg: EvalConfig, lay: Layout) -> int:
    """The decode pool's first chip, in its own cluster's rank order."""
    graph = cfg.graph_cluster()
    start = entry.decode_start(graph, lay)
    return start - (graph.decode_pool_start or 0)
