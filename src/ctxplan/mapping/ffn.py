"""The FFN half of a layer, the same in both phases: dense FFN with TP, or MoE with EP.

Dense: [all-reduce over TP] -> gate_up / down (TP-sharded) -> [all-reduce over TP].
MoE:   [reduce-scatter over TP] -> router + shared experts on the chip's tokens ->
       all-to-all dispatch over the whole pool -> routed experts -> all-to-all combine ->
       [all-gather over TP].
Routing is uniform (every expert equally loaded), spread over chips in whole token-slots by
:func:`route_matrix`, so bytes are integers and conserved.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctxplan.mapping import collectives as coll
from ctxplan.mapping import ops
from ctxplan.mapping.builder import NONE, GraphBuilder, Work
from ctxplan.mapping.collectives import Rows, rows_of
from ctxplan.mapping.layout import Layout, route_matrix, split_even
from ctxplan.mapping.memory import experts_per_chip
from ctxplan.model.linear import (
    dense_ffn_linears,
    expert_linears,
    router_linear,
    shared_expert_linears,
)
from ctxplan.model.params import bytes_per_param
from ctxplan.model.spec import ModelSpec


def emit_ffn(
    b: GraphBuilder,
    m: ModelSpec,
    lay: Layout,
    layer: int,
    rank_tokens: npt.NDArray[np.int64],
    ready: Rows,
) -> Rows:
    """Emit the FFN of ``layer``.

    ``rank_tokens``: tokens each CP rank feeds in (ranks with 0 take part only as expert hosts).
    ``ready``: per chip of the pool, what its FFN input waits for (for a chip of a rank without
    tokens: its last task; experts there run after it).
    Returns per chip what its next op waits for.
    """
    act = lay.precision.activation_bytes
    hidden_bytes = m.hidden_size * act
    tp = lay.tp
    active = np.flatnonzero(rank_tokens > 0)

    groups = active[:, None] * tp + np.arange(tp)[None, :]   # chips of each active rank
    chips = groups.ravel()
    rank_bytes = rank_tokens[active] * hidden_bytes
    if not m.is_moe_layer(layer):
        deps = coll.all_reduce(b, groups, ready[chips], rank_bytes, layer)
        ffn = b.compute(chips, ops.FFN,
                        _dense_ffn_parts(m, np.repeat(rank_tokens[active], tp), lay), deps,
                        layer=layer)
        deps = coll.all_reduce(b, groups, rows_of(ffn), rank_bytes, layer)
        return _set_rows(ready, chips, deps)

    assert m.moe is not None
    moe = m.moe
    n = lay.n_chips
    # Tokens per chip after the reduce-scatter over its TP group.
    chip_tokens = np.zeros(n, np.int64)
    deps = coll.reduce_scatter(b, groups, ready[chips], rank_bytes, layer)
    chip_tokens[chips] = np.concatenate([split_even(int(t), tp) for t in rank_tokens[active]]
                                        ) if len(active) else []
    ids = b.compute(chips, ops.ROUTER_SHARED, _router_parts(m, chip_tokens[chips], lay), deps,
                    layer=layer)
    start = _set_rows(ready, chips, rows_of(ids))

    counts = route_matrix(chip_tokens * moe.num_experts_per_tok, n)
    received = counts.sum(axis=0)
    dispatch = counts * hidden_bytes
    all_chips = np.arange(n)
    arrived = coll.all_to_all(b, all_chips, start, dispatch, layer, ops.MOE_DISPATCH)
    expert_params = sum(x.params for x in expert_linears(m))
    wb = bytes_per_param(lay.precision.ffn_weights)
    per_chip_experts = experts_per_chip(m, n)
    busy = np.flatnonzero(received > 0)
    slots = received[busy]
    # Each expert with at least one token streams its weights once.
    weights = np.minimum(per_chip_experts, slots) * expert_params * wb
    flops = 2.0 * expert_params * slots
    act_bytes = slots * (2 * m.hidden_size + 3 * moe.moe_intermediate_size) * act
    # m_rows: rows of each expert's GEMM, the slots spread evenly over the busy experts.
    expert_work = Work("matmul", flops, weights + act_bytes,
                       lay.precision.matmul_dtype(lay.precision.ffn_weights),
                       m_rows=slots / np.minimum(per_chip_experts, slots))
    ids = b.compute(busy, ops.EXPERTS, [expert_work], arrived[busy], layer=layer)
    done = _set_rows(start, busy, rows_of(ids))
    back = coll.all_to_all(b, all_chips, done, dispatch.T, layer, ops.MOE_COMBINE)
    deps = coll.all_gather(b, groups, back[chips], rank_bytes, layer)
    return _set_rows(back, chips, deps)


def _set_rows(rows: Rows, which: npt.NDArray[np.int64], new: Rows) -> Rows:
    """``rows`` with the rows ``which`` replaced by ``new`` (widened with -1 as needed)."""
    width = max(rows.shape[1], new.shape[1])
    if rows.shape[1] < width:
        rows = np.pad(rows, ((0, 0), (0, width - rows.shape[1])), constant_values=NONE)
    else:
        rows = rows.copy()
    rows[which] = NONE
    rows[which, :new.shape[1]] = new
    return rows


def _router_parts(m: ModelSpec, tokens: npt.NDArray[np.int64], lay: Layout) -> list[Work]:
    """Residual add + norm, the router (gate) and the shared experts of ``tokens`` tokens."""
    work = [ops.norm_work(m.hidden_size, tokens, lay),
            ops.linear_work([router_linear(m)], tokens, lay, "bf16")]
    shared = shared_expert_linears(m)
    if shared:
        # Shared experts are replicated (not TP-sharded): a one-chip linear.
        work.append(ops.linear_work(shared, tokens, lay, lay.precision.ffn_weights, tp=1))
    return work


def _dense_ffn_parts(m: ModelSpec, tokens: npt.ArrayLike, lay: Layout) -> list[Work]:
    """One TP chip's dense FFN: residual add + RMSNorm, row-wise quantisation of the gate_up
    input when the weights are FP8, gate_up, SwiGLU, quantisation of the down input, down."""
    w = lay.precision.ffn_weights
    gate_up, down = dense_ffn_linears(m)
    parts = [ops.norm_work(m.hidden_size, tokens, lay)]
    for lin, after in ((gate_up, ops.swiglu_work(m.intermediate_size / lay.tp, tokens, lay)),
                       (down, None)):
        q = ops.quantise_work([lin], tokens, lay, w)
        if q is not None:
            parts.append(q)
        parts.append(ops.linear_work([lin], tokens, lay, w))
        if after is not None:
            parts.append(after)
    return parts
