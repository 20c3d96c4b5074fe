"""Running the simulation of one configuration: its graph, the kernel (every layer, or the
opt-in periodic-layer shortcut), and the busy time and bytes of what ran."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from ctxplan.evaluate.config import EvalConfig
from ctxplan.mapping import entry
from ctxplan.mapping.entry import GraphBuilder, Layout
from ctxplan.sim import SimResult


def build_graph(cfg: EvalConfig, lay: Layout | None = None, n_layers: int | None = None, *,
                lay_d: Layout | Literal["auto"] | None = "auto") -> GraphBuilder:
    """Emit the op graph of one configuration (the phase picks the emitter); ``n_layers``
    emits only the model's first n layers, then the LM head. ``lay`` / ``lay_d``: the
    configuration's layouts when the caller has them (default: built here)."""
    lay = lay or cfg.layout()
    handoff = cfg.handoff_layout() if lay_d == "auto" else lay_d
    return entry.build_graph(cfg.chip, cfg.graph_cluster(), cfg.model, lay, handoff, n_layers)


@dataclass
class Run:
    builder: GraphBuilder
    result: SimResult
    latency_ns: int
    layers_simulated: int
    repeat: int                   # periods extrapolated (0: full simulation)
    period: range = range(0)      # task ids of the last simulated period (the one repeated)
    delta_ns: int = 0             # time between periods


def simulate(cfg: EvalConfig, lay: Layout, lay_d: Layout | None) -> Run:
    """Simulate the whole configuration (``lay``, with its handoff to ``lay_d``), or (opt-in
    ``periodic_shortcut``) its first layers. A handoff is always simulated in full (its
    transfers follow the layers, not a period)."""
    # (Not for a chunked prefill: its layers repeat per chunk, and the shortcut reads a
    # period from layer numbers that only grow along the graph.)
    # (Nor for a pipeline: its layers' periods are on different chips.)
    if (cfg.policy.periodic_shortcut and lay_d is None and len(entry.chunk_sizes(lay)) == 1
            and lay.pp == 1):
        run = _simulate_periodic(cfg, lay)
        if run is not None:
            return run
    b = build_graph(cfg, lay, lay_d=lay_d)
    res = b.run(event_limit=cfg.policy.event_limit)
    return Run(b, res, sequence_latency_ns(b, res), cfg.model.num_hidden_layers, 0)


def sequence_latency_ns(b: GraphBuilder, res: SimResult) -> int:
    """The latency one sequence sees: the makespan, or for a pipelined decode whose batch
    flows in micro-batches the longest span of one micro-batch (first start to last end):
    its step passes every stage in turn while the others' steps fill the stages between."""
    if len(b.micro_batches) <= 1:
        return res.makespan_ns
    return max(int(res.end_ns[a:e].max() - res.start_ns[a:e].min())
               for a, e in b.micro_batches)


# -- the periodic-layer shortcut (opt-in) ----------------------------------------------------
# The layers after the first few repeat one pattern of p layers, and the graph holds them as
# tiled copies of one period of T tasks (ctxplan.mapping.layers). The shortcut simulates only
# n < L layers and checks that, over the last CHECK_PERIODS periods, EVERY task started and
# ended exactly Δ after its counterpart one period earlier (the task T ids before it). Then the
# schedule has settled into a pure shift (the kernel is deterministic and shift-invariant), and
# the remaining periods are extrapolated: latency T(n) + (L - n) / p * Δ, bytes and busy time
# plus that many copies of the last period's. If the check fails (a little drift anywhere, even
# on a task that is not the last of its chip), it retries once with more layers to settle and
# then simulates in full. tests/test_evaluate_shortcut.py compares it with the full
# simulation on a fuzzed matrix (MoE, TP, cross-host, uneven chunks) and on the
# configurations where an earlier, weaker check (last completion per chip) was wrong.
CHECK_PERIODS = 3


def _simulate_periodic(cfg: EvalConfig, lay: Layout) -> Run | None:
    m = cfg.model
    L = m.num_hidden_layers
    k0, p = entry.layer_period(m)
    for settle in (1, 4):
        n = k0 + (settle + CHECK_PERIODS + 1) * p
        n += (L - n) % p
        if n >= L:
            return None
        b = build_graph(cfg, lay, n, lay_d=None)
        res = b.run(event_limit=cfg.policy.event_limit)
        # Period q (0-based from layer k0) of the truncated graph: its tasks' ids.
        layer = b.layer   # non-decreasing in task id: layers are emitted in order
        lo = int(np.searchsorted(layer, n - p, side="left"))
        hi = int(np.searchsorted(layer, n - 1, side="right"))
        t = hi - lo   # tasks per period
        delta = _shift_of(res, lo, t, CHECK_PERIODS)
        if delta is None:
            continue
        repeat = (L - n) // p
        return Run(b, res, res.makespan_ns + repeat * delta, n, repeat, range(lo, hi), delta)
    return None


def _shift_of(res: SimResult, lo: int, t: int, periods: int) -> int | None:
    """Δ if every task of the ``periods`` periods ending at [lo, lo + t) started and ended
    exactly Δ after its counterpart one period (t ids) earlier; else None."""
    first = lo - periods * t
    if first < 0:
        return None
    start = res.start_ns[first:lo + t].reshape(periods + 1, t)
    end = res.end_ns[first:lo + t].reshape(periods + 1, t)
    d_start = np.diff(start, axis=0)
    d_end = np.diff(end, axis=0)
    delta = int(d_start[0, 0])
    if (d_start == delta).all() and (d_end == delta).all():
        return delta
    return None


def busy_and_bytes(run: Run, lay: Layout, kinds: tuple[str, ...]
                   ) -> tuple[dict[str, float], int, npt.NDArray[np.int64]]:
    """Busy ns per op kind, CP bytes of the given kinds and busy ns per resource, of the whole
    model: the simulated tasks plus the repeated periods' copies."""
    b, res = run.builder, run.result
    g = b.graph
    code = b.kind_code
    dur = g.duration_ns
    weight = np.ones(len(dur), np.int64)
    resource_busy = res.resource_busy_ns.copy()
    if run.repeat:
        sl = slice(run.period.start, run.period.stop)
        weight[sl] += run.repeat
        per = np.zeros_like(resource_busy)
        lo, hi = g.res_ptr[run.period.start], g.res_ptr[run.period.stop]
        holder = np.repeat(np.arange(run.period.start, run.period.stop),
                           np.diff(g.res_ptr[run.period.start:run.period.stop + 1]))
        np.add.at(per, g.res_idx[lo:hi], dur[holder])
        resource_busy += run.repeat * per
    # Busy time is time holding a resource: the fixed costs of communication operations
    # (tasks that hold none) are not busy time.
    holds = np.diff(g.res_ptr) > 0
    busy_ns = np.bincount(code, weights=(dur * weight * holds).astype(np.float64),
                          minlength=len(b.kinds))
    busy = {k: float(busy_ns[i]) / 1e9 for i, k in enumerate(b.kinds)
            if entry.ops.base_kind(k) == k}   # operation-cost kinds hold nothing
    cp_mask = b.mask_of(kinds)
    cp_bytes = int((g.nbytes[cp_mask] * weight[cp_mask]).sum())
    return busy, cp_bytes, resource_busy


@contextmanager
def paused_gc() -> Iterator[None]:
    """Python's cyclic garbage collector off for a block (restored after, if it was on).

    Building a graph allocates few Python objects, but enough to trigger collections, and a
    full collection walks every object the process holds (numba's compiled-code bookkeeping
    is large): about a tenth of a 1M-token evaluation (docs/benchmarks.md). Nothing built
    here forms reference cycles; reference counting frees it all.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
