"""The KV handoff: the cache a prefill pool built moving to the decode pool that continues it.

Placement (docs/handoff.md): the prefill pool holds chips 0 .. Np * tp_p - 1 of the cluster's
rank order and the decode pool Nd * tp_d chips from the first chip of the next host on
(``Cluster.decode_start``: decode rank r, TP index j on chip start + r * tp_d + j), as
separate prefill and decode machines are, so the handoff crosses the levels above the host;
under ``colocate_pools`` the decode pool starts right after the prefill pool, and the handoff
stays within a board when both fit on one.

What moves is exactly what the decode pool keeps, by the model's own KV accounting
(:func:`ctxplan.mapping.memory.kv_bytes_by_rank`), to where it keeps it for each attention kind
(each kind's ``handoff_pairs``, :mod:`ctxplan.mapping.kinds`)
(docs/mapping.md, "Decode, per attention kind"), each token taken from the prefill rank that
holds it in the prefill's layout (:mod:`ctxplan.mapping.placement`: rank i holds the new tokens'
segments i and 2 Np - 1 - i, and of a cached prefix the segments i and 2 Np - 1 - i of its own
zigzag). Per layer:

* full attention and DSA (MLA's latent and the indexer's key): decode rank r holds the
  contiguous tokens [start_r, start_r + S / Nd) of every sequence;
* sliding window and chunked (w or c shorter than S): the last min(S, w) (min(S, c)) tokens of
  each sequence go to the sequence's home rank (k mod Nd), where decode keeps the window
  (mapping/kinds/window.py); a window holding the whole context is full attention, sharded like it;
* linear attention: each sequence's state (recurrent and conv) goes to its home rank, from the
  prefill rank that ends the layer's state chain (the one holding the sequence's last chunk:
  mapping/kinds/linear.py), which holds the final state.

Every TP chip of a decode rank receives its own share: its KV-head group's bytes per token (the
whole latent and index key for MLA / DSA, which every TP chip keeps; for a linear layer its
value heads' share of the state), from the prefill TP chip(s) holding those heads. Transfers
between the same pair of chips in one layer are one send. Bytes moved == the decode pool's KV
bytes, exactly, and each decode chip receives what it stores (tests/mapping/test_handoff.py, on
every kind, simulated).

Timing (``mode``):
* ``streamed`` (default, as disaggregated serving systems stream KV layer by layer, e.g.
  Mooncake, DistServe): a layer's KV leaves a prefill chip as soon as that chip has projected it
  (its q/kv projection of that layer; a cached prefix's KV of the layer leaves with it, in the
  same message), a linear layer's state once the state chain has ended on its holder (the
  holder's last ``gdn_state`` of the layer, or its ``gdn_chunk`` when no state came in), while
  the later layers compute;
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

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from ctxplan.hardware.cluster import Cluster
from ctxplan.mapping import kinds, ops
from ctxplan.mapping.builder import NONE, GraphBuilder, IdArray, deps_of
from ctxplan.mapping.collectives import start_op
from ctxplan.mapping.layout import Layout
from ctxplan.mapping.memory import kv_bytes_by_rank
from ctxplan.mapping.placement import Placement, placement
from ctxplan.mapping.stages import stage_of_layer
from ctxplan.model.spec import ModelSpec
from ctxplan.policy import HANDOFF_MODES

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


def handoff_plan(m: ModelSpec, lay_p: Layout, lay_d: Layout) -> HandoffPlan:
    """Per attention kind, the transfers of one layer (see the module docstring), between
    the chips of the stages holding it (indices within each pool's stage)."""
    lay_p, lay_d = lay_p.stage_layout(), lay_d.stage_layout()
    pl = placement(lay_p.context_length, lay_p.cached, lay_p.cp)
    layer_kinds = tuple(m.layer_type(j) for j in range(m.num_hidden_layers))
    by_kind: dict[str, LayerTransfers] = {}
    runs = _sequence_runs(lay_p, lay_d)
    for kind in dict.fromkeys(layer_kinds):
        pairs: dict[tuple[int, int], int] = {}
        for g_p, g_d, first, n in runs:
            below = _first_pairs(m, kind, lay_p, lay_d, pl, first)
            for (s, d), nbytes in _first_pairs(m, kind, lay_p, lay_d, pl, first + n).items():
                part = nbytes - below.get((s, d), 0)
                assert part >= 0, "a kind's pairs are a sum over sequences"
                if part:
                    key = (g_p * lay_p.group_chips + s, g_d * lay_d.group_chips + d)
                    pairs[key] = pairs.get(key, 0) + part
        items = sorted(pairs.items())
        by_kind[kind] = LayerTransfers(
            np.array([s for (s, _), _ in items], np.int64),
            np.array([d for (_, d), _ in items], np.int64),
            np.array([n for _, n in items], np.int64))
    return HandoffPlan(by_kind, layer_kinds)


def _first_pairs(m: ModelSpec, kind: str, lay_p: Layout, lay_d: Layout, pl: Placement,
                 n: int) -> dict[tuple[int, int], int]:
    """One layer's pairs of a decode DP rank's first ``n`` sequences from one prefill DP rank
    (chips within each rank)."""
    if n == 0:
        return {}
    return kinds.kind_of(kind).handoff_pairs(m, kind, replace(lay_p, dp=1, batch=n),
                                             replace(lay_d, dp=1, batch=n), pl)


def _sequence_runs(lay_p: Layout, lay_d: Layout) -> list[tuple[int, int, int, int]]:
    """Which DP rank of the prefill pool hands which sequences to which DP rank of the decode
    pool: (prefill DP rank, decode DP rank, the first of its sequences within the decode DP
    rank, how many). Sequences are numbered through each pool's DP ranks in chip order (each
    rank's share of ``dp_batches``, the larger shares first) and sequence k goes from the
    prefill rank holding k to the decode rank holding k, so each pair of ranks shares one run.

    A run's pairs are those of the decode rank's first ``first + n`` sequences less those of
    its first ``first``: every kind's pairs are a sum over sequences (sequence k of a decode
    rank on its home rank k mod Nd, or its tokens sharded like every other's) whose sources,
    within a prefill rank, are the same for every sequence (its ring holds the same segments of
    each, and ends each state chain on the same rank), and the integer split over source TP
    chips never falls as the bytes grow, so the difference is the run's own bytes, exactly."""
    owners_p = np.repeat(np.arange(lay_p.dp), lay_p.dp_batches())
    owners_d = np.repeat(np.arange(lay_d.dp), lay_d.dp_batches())
    assert len(owners_p) == len(owners_d), "both pools hold the same sequences"
    starts_d = np.concatenate(([0], np.cumsum(lay_d.dp_batches())[:-1]))
    runs: list[tuple[int, int, int, int]] = []
    for g_p, g_d in dict.fromkeys(zip(owners_p.tolist(), owners_d.tolist(), strict=True)):
        shared = np.flatnonzero((owners_p == g_p) & (owners_d == g_d))
        runs.append((g_p, g_d, int(shared[0] - starts_d[g_d]), len(shared)))
    return runs


def kv_ready(b: GraphBuilder, m: ModelSpec, n_layers: int, n_chips: int) -> IdArray:
    """(n_layers, n_chips): per layer and prefill chip, the task after which that chip holds
    what it hands over of the layer: the task its kind's ``handoff_ready`` names (the q/kv
    projection of the layer: the KV of its tokens, a cached prefix's being there before; for a
    linear layer the end of the state chain on it: its last ``gdn_state`` of the layer, else
    its ``gdn_chunk``, only the chain's last holder sending); else (a chip with no such task)
    its last compute task of the layer."""
    layer = b.layer.astype(np.int64)
    chip = b.chip_of.astype(np.int64)
    # Not compute: transfers and the fixed costs of their operations (tasks of no resource).
    comm = np.array([ops.base_kind(k) in ops.COMM_KINDS for k in b.kinds], bool)
    inside = (layer >= 0) & (layer < n_layers) & (chip < n_chips) & (chip >= 0)
    # A chunked prefill: a layer's KV is whole once the last chunk has projected it.
    inside[:b.last_chunk_first_task] = False
    cell = np.where(inside, layer * n_chips + chip, 0)
    size = n_layers * n_chips
    last = np.full(size, -1, np.int64)
    done = np.flatnonzero(~comm[b.kind_code] & inside)
    np.maximum.at(last, cell[done], done)
    top = np.iinfo(np.int64).max
    readies = [kinds.kind_of(m.layer_type(j)).handoff_ready for j in range(n_layers)]
    by_kind = np.full(size, -1, np.int64)
    for ready in dict.fromkeys(readies):
        tasks = np.flatnonzero(b.mask_of(list(ready.op_kinds)) & inside)
        found = np.full(size, -1 if ready.last else top, np.int64)
        (np.maximum if ready.last else np.minimum).at(found, cell[tasks], tasks)
        found = np.where(found < top, found, -1)
        rows = np.repeat(np.array([r == ready for r in readies], bool), n_chips)
        by_kind = np.where(rows, found, by_kind)
    return np.where(by_kind >= 0, by_kind, last).reshape(n_layers, n_chips)


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


def decode_start(cluster: Cluster, lay_p: Layout) -> int:
    """The decode pool's first chip after the prefill pool of ``lay_p``: the next host's first
    chip, or under ``colocate_pools`` the chip right after the prefill pool."""
    return cluster.decode_start(lay_p.n_chips, lay_p.policy.colocate_pools)


def emit_handoff(b: GraphBuilder, m: ModelSpec, lay_p: Layout, lay_d: Layout,
                 n_layers: int | None = None) -> HandoffPlan:
    """Emit the handoff of a prefill already emitted on chips 0 .. Np * tp_p - 1 to a decode
    pool from chip :func:`decode_start` on, as the prefill's policy times it (``kv_handoff``);
    returns the plan it emitted."""
    mode = lay_p.policy.kv_handoff
    assert mode in HANDOFF_MODES, mode
    n_layers = m.num_hidden_layers if n_layers is None else n_layers
    plan = handoff_plan(m, lay_p, lay_d)
    n_p = lay_p.n_chips
    first = decode_start(b.topology.cluster, lay_p)
    chips = np.arange(first + lay_d.n_chips, dtype=np.int64)   # positions are chips here
    after = prefill_done(b, n_p) if mode == "after" else None
    ready = kv_ready(b, m, n_layers, n_p) if mode == "streamed" else None
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
        # Each layer from the stage of the prefill pool that computed it to the stage of the
        # decode pool that keeps it, whatever the two pools' PP.
        src = stage_of_layer(lay_p, j) * lay_p.stage_chips + t.src
        dst = first + stage_of_layer(lay_d, j) * lay_d.stage_chips + t.dst
        op = start_op(b, chips, src, dst, rows, KV_HANDOFF, j, collective=False)
        b.send(src, dst, t.nbytes, KV_HANDOFF, deps_of(op[src], op[dst]), layer=j)
    return plan
