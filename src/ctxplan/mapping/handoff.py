"""The KV handoff: the cache a prefill pool built moving to the decode pool that continues it.

Placement (docs/handoff.md): the prefill pool holds chips 0 .. Np * tp_p - 1 of the cluster's
rank order and the decode pool the Nd * tp_d chips right after it (decode rank r, TP index j
on chip Np * tp_p + r * tp_d + j), so the handoff crosses whatever levels of the cluster lie
between the two ranges: within a board when both fit on one, through its switch otherwise.

What moves is exactly what the decode pool keeps, by the model's own KV accounting
(:func:`ctxplan.mapping.memory.kv_bytes_by_rank`): decode rank r holds the contiguous tokens
[start_r, start_r + S / Nd) of every sequence, and takes each of them from the prefill rank
whose ring chunk holds it (rank i holds chunks i and 2 Np - 1 - i); per layer, full and DSA
layers hand every such token over, sliding-window and chunked layers only those inside the last
min(S, w) tokens, linear-attention layers one state per sequence, from prefill rank 0 (which
holds the last chunk, so the final state) to the sequence's home rank (k mod Nd). Every TP chip
of a decode rank receives its own share (its KV-head group's bytes per token, or the whole
latent for MLA, which every TP chip keeps), from the prefill TP chip(s) holding those heads.
Bytes moved == the decode pool's KV bytes, exactly (tests/mapping/test_handoff.py).

Timing (``mode``):
* ``streamed`` (default, as disaggregated serving systems stream KV layer by layer, e.g.
  Mooncake, DistServe): a layer's KV leaves a prefill chip as soon as that chip has projected it
  (its q/kv projection of that layer), while the later layers compute;
* ``after``: every transfer waits until the whole prefill has finished.
The transfers are emitted after every prefill task, so where they share a link with the prefill's
own traffic (the ring, the MoE all-to-all) the prefill's goes first: emission order is priority.
They hold the links of their routes like every other transfer; nothing is assumed about how
much of them hides behind compute: that comes out of the simulation.

Operations (docs/mapping.md, "Operations"): each layer's handoff is one point-to-point
operation, so every chip that sends or receives in it pays the fixed cost of the costliest level
it talks over (the level's ``op_overhead_us``: an RDMA write is set up like a SendRecv) as a task
of kind ``kv_handoff.op`` that holds no resource, and each transfer waits for the fixed-cost tasks
of both its ends. A decode chip's waits on nothing (the pool is idle until the cache arrives), so
under ``after`` every layer's cost runs at once after the prefill: one cost in all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctxplan.mapping import ops
from ctxplan.mapping.builder import NONE, GraphBuilder, IdArray, deps_of
from ctxplan.mapping.collectives import start_op
from ctxplan.mapping.layout import (
    Layout,
    decode_shard_tokens,
    kv_bytes_per_chip_token,
    kv_split,
    prefill_chunks,
    split_even,
)
from ctxplan.mapping.memory import kv_bytes_by_rank, linear_state_bytes_per_chip
from ctxplan.model.kinds import kv_tokens
from ctxplan.model.spec import (
    CHUNKED_ATTENTION,
    LINEAR_ATTENTION,
    SLIDING_ATTENTION,
    ModelSpec,
)

HANDOFF_MODES = ("after", "streamed")
KV_HANDOFF = "kv_handoff"      # the op kind of a handoff transfer


@dataclass(frozen=True)
class LayerTransfers:
    """The transfers of one layer of one attention kind: prefill chip -> decode chip (both as
    indices within their own pool) and bytes, one entry per pair that exchanges anything."""

    src: npt.NDArray[np.int64]
    dst: npt.NDArray[np.int64]
    nbytes: npt.NDArray[np.int64]


@dataclass(frozen=True)
class HandoffPlan:
    """What moves per layer, by the layer's attention kind."""

    by_kind: dict[str, LayerTransfers]
    layer_kinds: tuple[str, ...]       # per layer

    def layer(self, j: int) -> LayerTransfers:
        return self.by_kind[self.layer_kinds[j]]

    @property
    def total_bytes(self) -> int:
        return sum(int(self.layer(j).nbytes.sum()) for j in range(len(self.layer_kinds)))


def decode_pool_kv_bytes(m: ModelSpec, lay_d: Layout) -> int:
    """The KV (and linear-attention state) bytes the whole decode pool keeps: every TP chip of
    every rank, by the model's own accounting."""
    return sum(kv_bytes_by_rank(m, lay_d)) * lay_d.tp


def _overlap(a0: int, a1: int, b0: int, b1: int) -> int:
    return max(0, min(a1, b1) - max(a0, b0))


def _sources(m: ModelSpec, tp_p: int, tp_d: int, j_d: int) -> list[int]:
    """The prefill TP indices a decode TP chip takes its KV share from: the chips of the
    prefill KV-head groups overlapping its own group (one chip per group, picked by j_d so the
    load spreads), as fractions of the KV-head space."""
    split_p, split_d = kv_split(m, tp_p), kv_split(m, tp_d)
    g_d = j_d * split_d // tp_d
    lo, hi = g_d / split_d, (g_d + 1) / split_d
    per_group = tp_p // split_p
    return [g_p * per_group + j_d % per_group for g_p in range(split_p)
            if _overlap_f(g_p / split_p, (g_p + 1) / split_p, lo, hi) > 0]


def _overlap_f(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def handoff_plan(m: ModelSpec, lay_p: Layout, lay_d: Layout) -> HandoffPlan:
    """Per attention kind, the transfers of one layer (see the module docstring)."""
    S, b = lay_p.context_length, lay_p.batch
    np_, nd = lay_p.cp, lay_d.cp
    tp_p, tp_d = lay_p.tp, lay_d.tp
    c_d = kv_bytes_per_chip_token(m, lay_d)
    chunks = prefill_chunks(S, np_)
    chunk_start = np.concatenate(([0], np.cumsum(chunks)[:-1])).tolist()
    chunk_rank = [q if q < np_ else 2 * np_ - 1 - q for q in range(2 * np_)]
    shards = decode_shard_tokens(S, nd)
    shard_start = np.concatenate(([0], np.cumsum(shards)[:-1])).tolist()
    sources = [_sources(m, tp_p, tp_d, j) for j in range(tp_d)]
    kinds = tuple(m.layer_type(j) for j in range(m.num_hidden_layers))
    by_kind: dict[str, LayerTransfers] = {}
    for kind in dict.fromkeys(kinds):
        pairs: dict[tuple[int, int], int] = {}
        if kind == LINEAR_ATTENTION:
            state = linear_state_bytes_per_chip(m, tp_d)
            for r in range(nd):
                homes = len(range(r, b, nd))   # sequences whose home is rank r (decode.py)
                for j in range(tp_d):
                    _add(pairs, sources[j], 0, tp_p, r * tp_d + j, homes * state)
        else:
            keep = kv_tokens(m, kind, S)
            window = (S - keep, S) if kind in (SLIDING_ATTENTION, CHUNKED_ATTENTION) \
                else (0, S)
            for r in range(nd):
                d0, d1 = shard_start[r], shard_start[r] + shards[r]
                lo, hi = max(d0, window[0]), min(d1, window[1])
                for q in range(2 * np_):
                    tokens = _overlap(lo, hi, chunk_start[q], chunk_start[q] + chunks[q])
                    if tokens == 0:
                        continue
                    for j in range(tp_d):
                        _add(pairs, sources[j], chunk_rank[q], tp_p, r * tp_d + j,
                             b * tokens * c_d)
        items = sorted(pairs.items())
        by_kind[kind] = LayerTransfers(
            np.array([s for (s, _), _ in items], np.int64),
            np.array([d for (_, d), _ in items], np.int64),
            np.array([n for _, n in items], np.int64))
    return HandoffPlan(by_kind, kinds)


def _add(pairs: dict[tuple[int, int], int], src_tps: list[int], rank_p: int, tp_p: int,
         dst: int, nbytes: int) -> None:
    """Split ``nbytes`` for decode chip ``dst`` evenly over its source TP chips of prefill rank
    ``rank_p`` (integer bytes, none lost)."""
    if nbytes == 0:
        return
    for j_p, part in zip(src_tps, split_even(nbytes, len(src_tps)), strict=True):
        key = (rank_p * tp_p + j_p, dst)
        pairs[key] = pairs.get(key, 0) + part


def kv_ready(b: GraphBuilder, n_layers: int, n_chips: int) -> IdArray:
    """(n_layers, n_chips): per layer and prefill chip, the task after which that chip holds
    the layer's KV: its q/kv projection of the layer, else (a kind without one, e.g. linear
    attention, whose state is final at the end of the layer) its last compute task of it."""
    layer = b.layer.astype(np.int64)
    chip = b.chip_of.astype(np.int64)
    # Not compute: transfers and the fixed costs of their operations (tasks of no resource).
    comm = np.array([ops.base_kind(k) in ops.COMM_KINDS for k in b.kinds], bool)
    inside = (layer >= 0) & (layer < n_layers) & (chip < n_chips) & (chip >= 0)
    cell = np.where(inside, layer * n_chips + chip, 0)
    last = np.full(n_layers * n_chips, -1, np.int64)
    done = np.flatnonzero(~comm[b.kind_code] & inside)
    np.maximum.at(last, cell[done], done)
    first = np.full(n_layers * n_chips, np.iinfo(np.int64).max, np.int64)
    proj = np.flatnonzero(b.mask_of([ops.QKV_PROJ]) & inside)
    np.minimum.at(first, cell[proj], proj)
    ready = np.where(first < np.iinfo(np.int64).max, first, last)
    return ready.reshape(n_layers, n_chips)


def prefill_done(b: GraphBuilder, n_chips: int) -> IdArray:
    """A zero-time join after every prefill task: it waits on each chip's last task of each
    kind (every other task of the prefill leads to one of those)."""
    chip = b.chip_of.astype(np.int64)
    key = chip * len(b.kinds) + b.kind_code.astype(np.int64)
    ids = np.arange(len(key))
    last = np.full(n_chips * len(b.kinds), -1, np.int64)
    own = (chip >= 0) & (chip < n_chips)
    np.maximum.at(last, key[own], ids[own])
    deps = last[last >= 0]
    return b.sync(np.array([0]), KV_HANDOFF + "_wait", deps_of(deps.reshape(1, -1)),
                  layer=-1)


def emit_handoff(b: GraphBuilder, m: ModelSpec, lay_p: Layout, lay_d: Layout, mode: str,
                 n_layers: int | None = None) -> HandoffPlan:
    """Emit the handoff of a prefill already emitted on chips 0 .. Np * tp_p - 1 to a decode
    pool on the chips after them; returns the plan it emitted."""
    if mode not in HANDOFF_MODES:
        raise ValueError(f"kv handoff mode {mode!r}: use one of {HANDOFF_MODES}")
    n_layers = m.num_hidden_layers if n_layers is None else n_layers
    plan = handoff_plan(m, lay_p, lay_d)
    n_p = lay_p.n_chips
    chips = np.arange(n_p + lay_d.n_chips, dtype=np.int64)   # positions are chips here
    after = prefill_done(b, n_p) if mode == "after" else None
    ready = kv_ready(b, n_layers, n_p) if mode == "streamed" else None
    rows = np.full((len(chips), 1), NONE, np.int64)   # decode chips: ready from the start
    for j in range(n_layers):
        t = plan.layer(j)
        if not len(t.src):
            continue
        if ready is not None:
            rows[:n_p, 0] = ready[j]
        else:
            assert after is not None
            rows[:n_p, 0] = after[0]
        dst = n_p + t.dst
        op = start_op(b, chips, t.src, dst, rows, KV_HANDOFF, j, collective=False)
        b.send(t.src, dst, t.nbytes, KV_HANDOFF, deps_of(op[t.src], op[dst]), layer=j)
    return plan
