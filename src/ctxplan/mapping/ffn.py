"""The FFN half of a layer, the same in both phases: dense FFN with TP, or MoE with EP.

Dense: [all-reduce over TP] -> gate_up / down (TP-sharded) -> [all-reduce over TP].
MoE:   [reduce-scatter over TP] -> router + shared experts on the chip's tokens ->
       all-to-all dispatch over the whole pool -> routed experts -> all-to-all combine ->
       [all-gather over TP]; or, with ``moe_parallel = tp``, [reduce-scatter over TP] -> norm ->
       all-gather over the pool -> router and every expert TP-split over the pool ->
       reduce-scatter over the pool -> [all-gather over TP].
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
    ffn_of: int | None = None,
) -> Rows:
    """Emit the FFN of ``layer`` (shaped as model layer ``ffn_of``'s, default ``layer``'s: an
    MTP layer after the last runs the last layer's MoE).

    ``rank_tokens``: tokens each CP rank feeds in (ranks with 0 take part only as expert hosts).
    ``ready``: per chip of the pool, what its FFN input waits for (for a chip of a rank without
    tokens: its last task; experts there run after it).
    Returns per chip what its next op waits for.
    """
    act = lay.precision.activation_bytes
    hidden_bytes = m.hidden_size * act
    tp = lay.tp
    active = np.flatnonzero(rank_tokens > 0)
    shape = layer if ffn_of is None else ffn_of

    groups = active[:, None] * tp + np.arange(tp)[None, :]   # chips of each active rank
    chips = groups.ravel()
    rank_bytes = rank_tokens[active] * hidden_bytes
    if not m.is_moe_layer(shape):
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
    if lay.policy.moe_parallel == "tp":
        back = _moe_tp(b, m, lay, layer, chip_tokens, _set_rows(ready, chips, deps),
                       m.is_hash_routed(shape))
        deps = coll.all_gather(b, groups, back[chips], rank_bytes, layer)
        return _set_rows(back, chips, deps)
    ids = b.compute(chips, ops.ROUTER_SHARED,
                    _router_parts(m, chip_tokens[chips], lay, m.is_hash_routed(shape)), deps,
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


def _moe_tp(b: GraphBuilder, m: ModelSpec, lay: Layout, layer: int,
            chip_tokens: npt.NDArray[np.int64], ready: Rows, hashed: bool) -> Rows:
    """"Attention CP, MoE TP" (``moe_parallel = tp``; SGLang's way for DeepSeek-V4): each chip's
    tokens normed (``router_shared``'s first part), the hidden states all-gathered over the
    whole pool (``moe_allgather``, each chip's share padded to the largest), then on every chip
    the router over every token (none in hash-routed layers) and every expert, shared and
    routed, on its 1 / n of the intermediate columns (column-parallel gate_up, row-parallel
    down), and the partial sums reduce-scattered back to the chips the tokens came from
    (``moe_reducescatter``). Returns rows per chip after it."""
    assert m.moe is not None
    moe = m.moe
    n = lay.n_chips
    act = lay.precision.activation_bytes
    hidden_bytes = m.hidden_size * act
    every = np.arange(n)
    busy = np.flatnonzero(chip_tokens > 0)
    normed = b.compute(busy, ops.ROUTER_SHARED,
                       [ops.residual_work(m, chip_tokens[busy], lay)], ready[busy], layer=layer)
    start = _set_rows(ready, busy, rows_of(normed))
    share = int(chip_tokens.max()) * hidden_bytes * n    # the padded all-gather
    gathered = coll.all_gather(b, every[None, :], start, share, layer, ops.MOE_ALLGATHER)
    total = int(chip_tokens.sum())
    slots = total * moe.num_experts_per_tok
    expert_params = sum(x.params for x in expert_linears(m))
    wb = bytes_per_param(lay.precision.ffn_weights)
    touched = min(moe.n_routed_experts, slots)
    parts = []
    if not hashed:
        parts.append(ops.linear_work([router_linear(m)], total, lay, "bf16"))
    shared = shared_expert_linears(m)
    if shared:
        parts.append(ops.linear_work(shared, total, lay, lay.precision.ffn_weights, tp=n))
    parts.append(Work("matmul", 2.0 * expert_params / n * slots,
                      touched * expert_params / n * wb
                      + slots * (2 * m.hidden_size + 3 * moe.moe_intermediate_size / n) * act,
                      lay.precision.matmul_dtype(lay.precision.ffn_weights),
                      m_rows=slots / max(touched, 1)))
    ids = b.compute(every, ops.EXPERTS, parts, gathered, layer=layer)
    return coll.reduce_scatter(b, every[None, :], rows_of(ids), share, layer,
                               ops.MOE_REDUCESCATTER)


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


def _router_parts(m: ModelSpec, tokens: npt.NDArray[np.int64], lay: Layout,
                  hashed: bool) -> list[Work]:
    """Residual add + norm, the router (gate; none in a hash-routed layer, whose experts a
    token-id hash picks) and the shared experts of ``tokens`` tokens."""
    work = [ops.residual_work(m, tokens, lay)]
    if not hashed:
        work.append(ops.linear_work([router_linear(m)], tokens, lay, "bf16"))
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
    parts = [ops.residual_work(m, tokens, lay)]
    for lin, after in ((gate_up, ops.swiglu_work(m.intermediate_size / lay.tp, tokens, lay)),
                       (down, None)):
        q = ops.quantise_work([lin], tokens, lay, w)
        if q is not None:
            parts.append(q)
        parts.append(ops.linear_work([lin], tokens, lay, w))
        if after is not None:
            parts.append(after)
    return parts
