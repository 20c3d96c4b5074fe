"""The FFN half of a layer, the same in both phases: dense FFN with TP, or MoE with EP.

Dense: [all-reduce over TP] -> gate_up / down (TP-sharded) -> [all-reduce over TP].
MoE:   [reduce-scatter over TP] -> router + shared experts on the chip's tokens ->
       all-to-all dispatch over the whole pool -> routed experts -> all-to-all combine ->
       [all-gather over TP].
Routing is uniform (every expert equally loaded), spread over chips in whole token-slots by
:func:`route_counts`, so bytes are integers and conserved.
"""

from __future__ import annotations

from collections.abc import Mapping

from ctxplan.mapping import collectives as coll
from ctxplan.mapping import ops
from ctxplan.mapping.builder import GraphBuilder, Work
from ctxplan.mapping.collectives import Deps
from ctxplan.mapping.layout import Layout, route_counts, split_even
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
    rank_tokens: Mapping[int, int],
    ready: Mapping[int, Deps],
    idle: Mapping[int, Deps],
) -> dict[int, Deps]:
    """Emit the FFN of ``layer``.

    ``rank_tokens``: tokens each active CP rank feeds in (ranks absent or 0 have none).
    ``ready``: per chip of the active ranks, what its FFN input waits for.
    ``idle``: per other chip of the pool, its last task (experts there run after it).
    Returns per chip what its next op waits for.
    """
    act = lay.precision.activation_bytes
    hidden_bytes = m.hidden_size * act
    tp = lay.tp
    out: dict[int, Deps] = dict(idle)
    active = [r for r in sorted(rank_tokens) if rank_tokens[r] > 0]

    if not m.is_moe_layer(layer):
        for r in active:
            chips = [lay.chip(r, j) for j in range(tp)]
            tokens = rank_tokens[r]
            nbytes = tokens * hidden_bytes
            deps = coll.all_reduce(b, chips, [ready[c] for c in chips], nbytes, layer)
            ffn = [b.compute(c, ops.FFN, _dense_ffn_parts(m, tokens, lay), d, layer=layer)
                   for c, d in zip(chips, deps, strict=True)]
            deps = coll.all_reduce(b, chips, [(t,) for t in ffn], nbytes, layer)
            out.update(zip(chips, deps, strict=True))
        return out

    assert m.moe is not None
    moe = m.moe
    n = lay.n_chips
    # Tokens per chip after the reduce-scatter over its TP group.
    chip_tokens = [0] * n
    pre: dict[int, Deps] = {}
    for r in active:
        chips = [lay.chip(r, j) for j in range(tp)]
        deps = coll.reduce_scatter(b, chips, [ready[c] for c in chips],
                                   rank_tokens[r] * hidden_bytes, layer)
        for c, d, t in zip(chips, deps, split_even(rank_tokens[r], tp), strict=True):
            chip_tokens[c] = t
            work = [ops.norm_work(m.hidden_size, t, lay),
                    ops.linear_work([router_linear(m)], t, lay, "bf16")]
            shared = shared_expert_linears(m)
            if shared:
                # Shared experts are replicated (not TP-sharded): a one-chip linear.
                work.append(ops.linear_work(shared, t, lay, lay.precision.ffn_weights, tp=1))
            pre[c] = (b.compute(c, ops.ROUTER_SHARED, work, d, layer=layer),)

    counts = [route_counts(chip_tokens[x] * moe.num_experts_per_tok, n, x) if chip_tokens[x]
              else {} for x in range(n)]
    # Slots each chip receives (its experts' load), and the bytes of both all-to-alls.
    received = [0] * n
    for row in counts:
        for y, k in row.items():
            received[y] += k
    dispatch = [{y: k * hidden_bytes for y, k in row.items()} for row in counts]
    combine: list[dict[int, int]] = [{} for _ in range(n)]
    for x, row in enumerate(dispatch):
        for y, nb in row.items():
            combine[y][x] = nb
    start: list[Deps] = [pre.get(c, out.get(c, ())) for c in range(n)]
    arrived = coll.all_to_all(b, range(n), start, dispatch, layer, ops.MOE_DISPATCH)
    expert_params = sum(x.params for x in expert_linears(m))
    wb = bytes_per_param(lay.precision.ffn_weights)
    per_chip_experts = experts_per_chip(m, n)
    done: list[Deps] = []
    for y in range(n):
        slots = received[y]
        if slots == 0:
            done.append(start[y])
            continue
        # Each expert with at least one token streams its weights once.
        weights = min(per_chip_experts, slots) * expert_params * wb
        flops = 2.0 * expert_params * slots
        act_bytes = slots * (2 * m.hidden_size + 3 * moe.moe_intermediate_size) * act
        # m_rows: rows of each expert's GEMM, the slots spread evenly over the busy experts.
        expert_work = Work("matmul", flops, weights + act_bytes, lay.precision.ffn_weights,
                           m_rows=slots / min(per_chip_experts, slots))
        done.append((b.compute(y, ops.EXPERTS, [expert_work], arrived[y], layer=layer),))
    back = coll.all_to_all(b, range(n), done, combine, layer, ops.MOE_COMBINE)
    for c in range(n):
        out[c] = back[c]
    for r in active:
        chips = [lay.chip(r, j) for j in range(tp)]
        deps = coll.all_gather(b, chips, [back[c] for c in chips],
                               rank_tokens[r] * hidden_bytes, layer)
        out.update(zip(chips, deps, strict=True))
    return out


def _dense_ffn_parts(m: ModelSpec, tokens: int, lay: Layout) -> list[Work]:
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
