"""Prefill with context parallelism, per attention kind (docs/mapping.md, "Prefill").

Per layer, on every CP rank (and, with TP, on each chip of its TP group): the attention half of
the layer's kind, then the FFN half (dense TP or MoE EP, :mod:`ctxplan.mapping.ffn`). The
new tokens sit in 2 Np segments, rank i holding segments i and 2 Np - 1 - i; a cached prefix sits
where its own prefill left it (:mod:`ctxplan.mapping.placement`). The attention half is the
``prefill_emitter`` of the kind the layer runs as (:mod:`ctxplan.mapping.kinds`): the pass-KV
or pass-Q ring of full attention, the halo exchange of sliding-window and chunked layers, the
pass-KV ring with the indexer keys of DSA, the state chain of linear attention. The layer after
waits only on what each chip needs, so layers overlap where data allows.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace

import numpy as np

from ctxplan.mapping import kinds, ops
from ctxplan.mapping.builder import NONE, GraphBuilder, deps_of
from ctxplan.mapping.chunking import chunk_layouts
from ctxplan.mapping.collectives import Rows, rows_of
from ctxplan.mapping.ffn import emit_ffn
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.kinds.full import ring_heuristic
from ctxplan.mapping.layers import emit_layers
from ctxplan.mapping.layout import PREFILL_RINGS, Layout
from ctxplan.mapping.memory import live_width
from ctxplan.mapping.pipeline import emit_handover
from ctxplan.mapping.placement import placement
from ctxplan.mapping.prefill_base import AttentionEmitter, prefill_setup
from ctxplan.model.linear import lm_head_linear
from ctxplan.model.spec import ModelSpec

CHUNK_BARRIER = "chunk_barrier"   # the zero-time join between a chunked prefill's passes
PER_CHUNK = "per-chunk"           # prefill_ring of a chunked layout asked for "auto"


def emit_prefill(b: GraphBuilder, m: ModelSpec, lay: Layout, n_layers: int | None = None,
                 *, tile: bool = True) -> None:
    """Emit the phase's graph; ``n_layers`` emits only the first n layers (then the LM head),
    for the periodic-layer shortcut of :mod:`ctxplan.evaluate`. ``tile=False`` writes every
    layer out instead of copying repeats (the same graph; for tests). A chunked prefill
    (:mod:`ctxplan.mapping.chunking`) is its chunks' graphs one after another, each chunk a
    cached-prefix prefill of its tokens, the next starting once every chip has finished it.
    With pipeline stages (``lay.pp`` > 1) the chunks flow through them (:func:`_emit_pipeline`)."""
    n_layers = m.num_hidden_layers if n_layers is None else n_layers
    if lay.pp > 1:
        assert n_layers == m.num_hidden_layers, "a pipeline is simulated whole"
        _emit_pipeline(b, m, lay, tile)
        return
    prev = np.full((lay.n_chips, 0), NONE, np.int64)
    groups = lay.dp_groups()   # with DP attention, each DP rank's own sequences
    kv_before: list[dict[str, list[int]]] = [{} for _ in groups]
    chunks = [chunk_layouts(g) for g in groups]
    n_chunks = len(chunks[0])
    assert all(len(c) == n_chunks for c in chunks), "DP ranks chunk alike (same S and policy)"
    for k in range(n_chunks):
        if k:
            prev = _chunk_barrier(b, prev)
        if k == n_chunks - 1:
            b.last_chunk_first_task = b.n_tasks
        prev = _emit_groups(b, m, [chunk_ring(m, c[k], n_chunks) for c in chunks],
                            range(n_layers), prev, kv_before, tile)
    width = lay.group_chips
    for g, sub in enumerate(groups):
        with _group(b, g, width, len(groups)):
            _emit_lm_head(b, m, sub, prev[g * width:(g + 1) * width], n_layers)


def _chunk_barrier(b: GraphBuilder, prev: Rows) -> Rows:
    """An engine's next forward pass starts after the last one: a zero-time join of ``prev``
    (rows per chip after the pass), as rows for the next."""
    barrier = b.sync(np.array([0]), CHUNK_BARRIER,
                     deps_of(np.unique(prev[prev >= 0]).reshape(1, -1)))
    return np.full((len(prev), 1), barrier[0], np.int64)


def _emit_lm_head(b: GraphBuilder, m: ModelSpec, lay: Layout, prev: Rows, layer: int) -> None:
    """The first output token: LM head on the last position of each sequence, which rank 0
    holds (the new tokens' segment 2 * Np - 1)."""
    first = np.arange(lay.tp)  # the chips of rank 0
    b.compute(first, ops.LM_HEAD, [ops.linear_work([lm_head_linear(m)], lay.batch, lay,
                                                   "bf16")], prev[first], layer=layer)


def _emit_pipeline(b: GraphBuilder, m: ModelSpec, lay: Layout, tile: bool) -> None:
    """Pipeline-parallel prefill (docs/mapping.md, "Pipeline parallelism"): stage s (chips
    [s W, (s + 1) W)) runs its layers of chunk k once it has finished chunk k - 1 and stage
    s - 1's activations of chunk k have arrived (mapping/pipeline.py), so stage s works on
    chunk k while stage s + 1 works on chunk k - 1: the overlap comes from these dependencies
    only. The LM head runs on the last stage after the last chunk."""
    w = lay.stage_chips
    stage = lay.stage_layout()
    chunks = chunk_layouts(stage)
    ranges = lay.stage_ranges(m.num_hidden_layers)
    after = [np.full((w, 0), NONE, np.int64) for _ in ranges]
    kv_before: list[dict[str, list[int]]] = [{} for _ in ranges]
    for k, lay_k in enumerate(chunks):
        lay_k = chunk_ring(m, lay_k, len(chunks))
        if k == len(chunks) - 1:
            b.last_chunk_first_task = b.n_tasks
        incoming: Rows | None = None
        tokens = placement(lay_k.context_length, lay_k.cached, lay_k.cp).new_tokens * lay.batch
        for s, layers in enumerate(ranges):
            with b.stage(s * w, w):
                mark = b.n_tasks
                prev = _chunk_barrier(b, after[s]) if k else after[s]
                if incoming is not None:
                    prev = deps_of(prev, incoming)
                after[s] = _emit_chunk(b, m, lay_k, layers, prev, kv_before[s], tile)
                b.pipeline_spans.append((k, s, mark, b.n_tasks))
            if s < len(ranges) - 1:
                incoming = emit_handover(b, m, lay_k, s, after[s], tokens, layers.stop - 1)
    with b.stage((len(ranges) - 1) * w, w):
        _emit_lm_head(b, m, stage, after[-1], m.num_hidden_layers)


def chunk_ring(m: ModelSpec, lay: Layout, n_chunks: int) -> Layout:
    """The chunk's layout with its ring: under ``prefill_ring = per-chunk`` (a chunked
    prefill asked for ``auto``) the one Meta's rule picks for the chunk's miss rate."""
    if lay.policy.prefill_ring != PER_CHUNK:
        return lay
    pick = ring_heuristic(m, lay)[2] if n_chunks > 1 else "pass-kv"
    return replace(lay, policy=replace(lay.policy, prefill_ring=pick))


def chunk_rings(m: ModelSpec, lay: Layout) -> tuple[str, ...]:
    """The full-attention ring of each chunk of ``lay``, in order."""
    chunks = chunk_layouts(lay)
    return tuple(chunk_ring(m, c, len(chunks)).policy.prefill_ring for c in chunks)


def _emit_chunk(b: GraphBuilder, m: ModelSpec, lay: Layout, layers: range, prev: Rows,
                kv_before: dict[str, list[int]], tile: bool) -> Rows:
    """One forward pass over the chunk ``lay`` (its new tokens after its cached ones) through
    ``layers`` (every layer, or a pipeline stage's), with the buffers it implies
    (mapping/buffers.py); returns the rows after it."""
    return _emit_groups(b, m, [lay], layers, prev, [kv_before], tile)


def _group(b: GraphBuilder, g: int, width: int, n_groups: int) -> AbstractContextManager[None]:
    """DP rank ``g``'s chips as the pool (nothing to do for one group: the pool itself, or a
    pipeline stage already entered)."""
    return b.stage(g * width, width) if n_groups > 1 else nullcontext()


def _emit_groups(b: GraphBuilder, m: ModelSpec, groups: list[Layout], layers: range,
                 prev: Rows, kv_before: list[dict[str, list[int]]], tile: bool) -> Rows:
    """One forward pass of each DP rank's chunk (``groups``: one layout per DP rank, one
    for a pool without DP attention): each rank's attention half on its own chips, the FFN half
    over the whole pool (docs/mapping.md, "DP attention with EP")."""
    n_groups, width = len(groups), groups[0].n_chips
    setups = [prefill_setup(m, g) for g in groups]
    emitters: list[dict[str, AttentionEmitter]] = [
        {layer_type: kinds.runs_as(m, layer_type, g.context_length).prefill_emitter(
            b, setup, layer_type) for layer_type in m.layer_type_counts}
        for g, setup in zip(groups, setups, strict=True)]
    # Per layer of each kind, on each TP chip of each rank: the KV this chunk adds (what its
    # layers keep after it, less what they kept before), and the kind's transient.
    kv_added: list[dict[str, np.ndarray]] = []
    transient: list[dict[str, np.ndarray]] = []
    for g, setup, before_g in zip(groups, setups, kv_before, strict=True):
        added: dict[str, np.ndarray] = {}
        trans: dict[str, np.ndarray] = {}
        for layer_type, count in m.layer_type_counts.items():
            held = kinds.kind_of(layer_type).prefill_kv(m, g, layer_type, count, setup.pl)
            before = before_g.get(layer_type, [0] * g.cp)
            added[layer_type] = np.ceil(np.maximum(np.array(held.held) - before, 0) / count
                                        )[setup.rank_of]
            trans[layer_type] = np.array(held.transient, np.float64)[setup.rank_of]
            before_g[layer_type] = list(held.held)
        kv_added.append(added)
        transient.append(trans)
    live = [setup.tokens[setup.rank_of] * live_width(m) * g.precision.activation_bytes
            for g, setup in zip(groups, setups, strict=True)]
    ffn_lay = groups[0] if n_groups == 1 else replace(groups[0], cp=n_groups * groups[0].cp)
    tokens = np.concatenate([setup.tokens for setup in setups])

    def layer_ops(layer: int, ready: Rows) -> Rows:
        mark = b.n_tasks
        layer_type = m.layer_type(layer)
        o_rows: list[Rows] = []
        firsts: list[np.ndarray] = []
        for g, setup in enumerate(setups):
            with _group(b, g, width, n_groups):
                declared = len(b.buffers)
                o_ready = emitters[g][layer_type](layer, ready[g * width:(g + 1) * width])
                first = b.first_task_since(mark)[setup.chips]
                if len(b.buffers) == declared:
                    # A kind whose emitter declares no buffers of its own: its closed-form
                    # transient over its attention half.
                    b.buffer(setup.chips, transient[g][layer_type], first, o_ready)
            o_rows.append(rows_of(o_ready))
            firsts.append(first)
        joined = o_rows[0] if n_groups == 1 else _stacked(o_rows)
        out = emit_ffn(b, m, ffn_lay, layer, tokens, joined)
        for g, setup in enumerate(setups):
            with _group(b, g, width, n_groups):
                b.buffer(setup.chips, kv_added[g][layer_type], firsts[g], kv=True)
                # the layer's hidden states
                b.buffer(setup.chips, live[g], firsts[g],
                         out[g * width:(g + 1) * width][setup.chips])
        return out

    return emit_layers(b, m, layers.stop, prev, layer_ops, tile=tile, first=layers.start)


def _stacked(parts: list[Rows]) -> Rows:
    """Rows of consecutive groups of chips as one array (padded with NONE)."""
    width = max(max(p.shape[1] for p in parts), 1)
    out = np.full((sum(len(p) for p in parts), width), NONE, np.int64)
    at = 0
    for p in parts:
        out[at:at + len(p), :p.shape[1]] = p
        at += len(p)
    return out


def prefill_comm(m: ModelSpec, lay: Layout) -> list[KindComm]:
    """Per attention kind of the model: its pattern, steps, sends and closed-form bytes; a
    chunked prefill's summed over its chunks (each chunk's own ring and placement), the
    patterns of its chunks joined, its steps and sends those of the costliest chunk; with DP
    attention summed over the DP ranks (sends added, steps the most of any)."""
    if lay.dp > 1:
        per_group = [prefill_comm(m, g) for g in lay.dp_groups()]
        return [KindComm(rows[0].layer_type, rows[0].pattern, rows[0].layers,
                         max(r.ring_steps_per_layer for r in rows),
                         sum(r.sends_per_layer for r in rows),
                         sum(r.analytic_bytes for r in rows))
                for rows in zip(*per_group, strict=True)]
    chunks = chunk_layouts(lay)
    per_chunk = [[kinds.runs_as(m, t, c.context_length).prefill_comm(m, c, t, n)
                  for t, n in m.layer_type_counts.items()]
                 for c in (chunk_ring(m, c, len(chunks)) for c in chunks)]
    if len(per_chunk) == 1:
        return per_chunk[0]
    out = []
    for rows in zip(*per_chunk, strict=True):
        first = rows[0]
        out.append(KindComm(
            first.layer_type, "+".join(dict.fromkeys(r.pattern for r in rows)), first.layers,
            max(r.ring_steps_per_layer for r in rows), max(r.sends_per_layer for r in rows),
            sum(r.analytic_bytes for r in rows)))
    return out


def rings_that_apply(m: ModelSpec, lay: Layout) -> tuple[str, ...]:
    """The prefill ring values some layer of ``m`` runs (in the order of PREFILL_RINGS):
    what ``prefill_ring = auto`` simulates; () when the option applies to no layer."""
    known = {ring for layer_type in m.layer_type_counts
             for ring in kinds.runs_as(m, layer_type, lay.context_length).rings}
    return tuple(ring for ring in PREFILL_RINGS if ring in known)
