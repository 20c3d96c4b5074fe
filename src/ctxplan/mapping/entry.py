"""The one door of the mapping for :mod:`ctxplan.evaluate`: the layout, the graph of a phase
(with its KV handoff), the memory of a chip, the closed forms of the CP communication, and the
op-kind vocabulary the results are reported in.

Nothing above the mapping imports another of its modules (tests/test_import_rules.py), so what
the evaluation may rely on is this module's names, and the rest of the mapping may change
shape behind it.
"""

from __future__ import annotations

from ctxplan.hardware.chip import EAGER, GRAPH, Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.mapping import ops
from ctxplan.mapping.buffers import LivePeaks
from ctxplan.mapping.builder import COMPUTE, GraphBuilder
from ctxplan.mapping.chunking import chunk_sizes, dynamic_sizes
from ctxplan.mapping.decode import decode_comm, emit_decode
from ctxplan.mapping.decode_base import tokens_per_step as decode_tokens_per_step
from ctxplan.mapping.handoff import (
    KV_HANDOFF,
    decode_pool_kv_bytes,
    decode_start,
    emit_handoff,
)
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.kinds import check_simulated_kinds
from ctxplan.mapping.kinds.full import ring_heuristic
from ctxplan.mapping.layers import layer_period
from ctxplan.mapping.layout import Layout, make_layout
from ctxplan.mapping.memory import (
    ChipMemory,
    chip_memory,
    chip_memory_bound,
    kv_held_by_rank,
    weights_by_chip,
)
from ctxplan.mapping.pipeline import pp_analytic_bytes
from ctxplan.mapping.prefill import (
    PER_CHUNK,
    chunk_rings,
    emit_prefill,
    prefill_comm,
    rings_that_apply,
)
from ctxplan.mapping.size import estimated_bytes, estimated_tasks
from ctxplan.mapping.stages import pipeline_stages
from ctxplan.model.spec import ModelSpec


def build_graph(chip: Chip, cluster: Cluster, m: ModelSpec, lay: Layout,
                lay_d: Layout | None = None, n_layers: int | None = None) -> GraphBuilder:
    """The op graph of one pool's phase (the phase picks the emitter), and with ``lay_d``
    (the decode pool's layout) the KV handoff to that pool on the chips after it, as the
    prefill's policy times it; ``n_layers`` emits only the model's first n layers, then the
    LM head."""
    check_simulated_kinds(m, lay.context_length, lay.phase)
    # Decode replays CUDA graphs, prefill runs eager, as serving engines run them.
    launch = EAGER if lay.is_prefill else GRAPH
    n_chips = lay.n_chips if lay_d is None else decode_start(cluster, lay) + lay_d.n_chips
    b = GraphBuilder(chip, cluster, n_chips, launch=launch)
    if lay.is_prefill:
        emit_prefill(b, m, lay, n_layers)
        if lay_d is not None:
            emit_handoff(b, m, lay, lay_d, n_layers)
    else:
        emit_decode(b, m, lay, n_layers)
    b.flush()
    return b


def kind_comms(m: ModelSpec, lay: Layout) -> list[KindComm]:
    """Per attention kind of the model: its CP pattern in this phase, its sequential steps and
    sends per layer, and its closed-form bytes."""
    return prefill_comm(m, lay) if lay.is_prefill else decode_comm(m, lay)


def tokens_per_step(m: ModelSpec, lay: Layout) -> float:
    """The tokens a decode step yields per sequence on average: 1, or under
    ``mtp_speculation`` with n drafts accepted at a each (a draft counts only after every
    draft before it was accepted) 1 + a + a^2 + ... + a^n."""
    n = decode_tokens_per_step(m, lay) - 1
    if lay.is_prefill or n == 0:
        return 1.0
    a = lay.policy.mtp_acceptance
    return sum(a ** k for k in range(n + 1))


def cp_kinds(lay: Layout) -> tuple[str, ...]:
    """The op kinds of the phase's CP transfers (what the simulated CP bytes sum)."""
    return ops.PREFILL_CP_KINDS if lay.is_prefill else ops.DECODE_CP_KINDS


def pp_kinds() -> tuple[str, ...]:
    """The op kinds of the transfers between pipeline stages (what ``pp_comm`` sums)."""
    return ops.PP_KINDS


def handoff_kinds() -> tuple[list[str], list[str]]:
    """The op kinds of the handoff's transfers, and of its transfers with their operations'
    fixed costs."""
    return [KV_HANDOFF], [KV_HANDOFF, ops.op_kind(KV_HANDOFF)]


def live_peaks(b: GraphBuilder, start_ns: object, end_ns: object, makespan_ns: int
               ) -> LivePeaks:
    """The peaks of live bytes per chip over a simulated schedule (mapping/buffers.py)."""
    return b.buffers.peaks(start_ns, end_ns, makespan_ns)  # type: ignore[arg-type]


__all__ = [
    "COMPUTE",
    "PER_CHUNK",
    "ChipMemory",
    "GraphBuilder",
    "KindComm",
    "Layout",
    "LivePeaks",
    "build_graph",
    "chip_memory",
    "chip_memory_bound",
    "chunk_rings",
    "chunk_sizes",
    "cp_kinds",
    "decode_pool_kv_bytes",
    "decode_start",
    "dynamic_sizes",
    "estimated_bytes",
    "estimated_tasks",
    "handoff_kinds",
    "kind_comms",
    "kv_held_by_rank",
    "layer_period",
    "live_peaks",
    "make_layout",
    "ops",
    "pipeline_stages",
    "pp_analytic_bytes",
    "pp_kinds",
    "ring_heuristic",
    "rings_that_apply",
    "tokens_per_step",
    "weights_by_chip",
]
