"""The FFN half of a layer, the same in both phases: dense FFN with TP, or MoE with EP.

Dense: [all-reduce over TP] -> gate_up / down (TP-sharded) -> [all-reduce over TP].
MoE:   [reduce-scatter over TP] -> router + shared experts on the chip's tokens ->
       all-to-all dispatch over the whole pool -> routed experts -> all-to-all combine ->
       [all-gather over TP]; or, with ``moe_parallel = tp``, [reduce-scatter over TP] -> norm ->
       all-gather over the pool -> router and every expert TP-split over the pool ->
       reduce-scatter over the pool -> [all-gather over TP].
Routing is uniform (every expert equally loaded), spread over chips in whole token-slots by
:func:`route_matrix`, so bytes are integers and conserved. Which of a chip's experts its slots
touch is the expectation under random top-k routing (:func:`experts_touched`): what the
fused-MoE tables measure, and what sets the weight bytes a small batch streams. On a pool of
one chip there is no dispatch: the tokens are permuted into expert order and summed back by
kernels of the experts op.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from ctxplan.mapping import collectives as coll
from ctxplan.mapping import ops
from ctxplan.mapping.builder import NONE, GraphBuilder, Work
from ctxplan.mapping.collectives import Rows, rows_of
from ctxplan.mapping.layout import Layout, route_matrix, split_even
from ctxplan.mapping.memory import experts_per_chip
from ctxplan.model.dtypes import matmul_input_bytes
from ctxplan.model.linear import (
    Linear,
    dense_ffn_linears,
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
        # gate_up's output (two FFN-wide values per token) while the FFN runs
        b.buffer(chips, np.repeat(rank_tokens[active], tp) * 2 * m.intermediate_size / tp
                 * act, ffn, ffn)
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
    hashed = m.is_hash_routed(shape)
    if lay.policy.moe_parallel == "tp":
        back = _moe_tp(b, m, lay, layer, chip_tokens, _set_rows(ready, chips, deps), hashed)
        deps = coll.all_gather(b, groups, back[chips], rank_bytes, layer)
        return _set_rows(back, chips, deps)
    ids = b.compute(chips, ops.ROUTER_SHARED,
                    _router_parts(m, chip_tokens[chips], lay, hashed), deps, layer=layer)
    start = _set_rows(ready, chips, rows_of(ids))

    counts = route_matrix(chip_tokens * moe.num_experts_per_tok, n)
    received = counts.sum(axis=0)
    all_chips = np.arange(n)
    # (A pool of one chip sends nothing: its experts op permutes the tokens instead.)
    arrived = coll.all_to_all(b, all_chips, start, counts * dispatch_bytes_per_slot(m, lay),
                              layer, ops.MOE_DISPATCH)
    busy = np.flatnonzero(received > 0)
    slots = received[busy]
    parts = expert_parts(m, lay, slots, experts_per_chip(m, n),
                         tokens=chip_tokens[busy] if n == 1 else None)
    ids = b.compute(busy, ops.EXPERTS, parts, arrived[busy], layer=layer)
    done = _set_rows(start, busy, rows_of(ids))
    back = coll.all_to_all(b, all_chips, done, counts.T * m.hidden_size * act, layer,
                           ops.MOE_COMBINE)
    deps = coll.all_gather(b, groups, back[chips], rank_bytes, layer)
    if n > 1:
        # The routed slots a chip receives live from the dispatch until its experts are done;
        # the experts' outputs until the combine has sent them; the outputs a chip gets back
        # (top-k per token) until the combine and the TP all-gather after it are done.
        b.buffer(busy, slots * dispatch_bytes_per_slot(m, lay), arrived[busy], ids)
        b.buffer(busy, slots * m.hidden_size * act, ids, back[busy])
        b.buffer(chips, chip_tokens[chips] * moe.num_experts_per_tok * m.hidden_size * act,
                 back[chips], deps)
    else:
        # one chip: the permuted copies and the experts' outputs while the experts run
        b.buffer(busy, 2 * slots * m.hidden_size * act, ids, ids)
    return _set_rows(back, chips, deps)


def _moe_tp(b: GraphBuilder, m: ModelSpec, lay: Layout, layer: int,
            chip_tokens: npt.NDArray[np.int64], ready: Rows, hashed: bool) -> Rows:
    """"Attention CP, MoE TP" (``moe_parallel = tp``; SGLang's way for DeepSeek-V4): each chip's
    tokens normed (``router_shared``), the hidden states all-gathered over the whole pool
    (``moe_allgather``, each chip's share padded to the largest), then on every chip the router
    and its top-k over every token (none in a hash-routed layer), the shared expert, and every
    routed expert's 1 / n of the intermediate columns (gate_up column-parallel, down
    row-parallel: grouped GEMMs over the experts the slots touch), and the partial sums
    reduce-scattered back to the chips the tokens came from (``moe_reducescatter``). Returns
    rows per chip after it."""
    assert m.moe is not None
    moe = m.moe
    n = lay.n_chips
    act = lay.precision.activation_bytes
    w = lay.precision.ffn_weights
    every = np.arange(n)
    busy = np.flatnonzero(chip_tokens > 0)
    normed = b.compute(busy, ops.ROUTER_SHARED,
                       [ops.residual_work(m, chip_tokens[busy], lay)], ready[busy], layer=layer)
    start = _set_rows(ready, busy, rows_of(normed))
    share = int(chip_tokens.max()) * m.hidden_size * act * n    # the padded all-gather
    gathered = coll.all_gather(b, every[None, :], start, share, layer, ops.MOE_ALLGATHER)
    total = int(chip_tokens.sum())
    slots = total * moe.num_experts_per_tok
    parts = _gate_parts(m, total, lay, hashed)
    q = ops.quantise_inputs_work(m.hidden_size, total, lay, w)   # FP8 experts: their input
    if q is not None:
        parts.append(q)
    shared = shared_expert_linears(m)
    if shared:
        parts += _swiglu_parts(shared, total, lay, tp=n, quantised=True)
    # every expert on every chip, its 1 / n of the columns
    touched = float(experts_touched(moe.n_routed_experts, slots, moe.num_experts_per_tok,
                                    moe.n_routed_experts))
    parts += _expert_gemms(m, lay, slots, touched, moe.moe_intermediate_size / n)
    ids = b.compute(every, ops.EXPERTS, parts, gathered, layer=layer)
    out = coll.reduce_scatter(b, every[None, :], rows_of(ids), share, layer,
                              ops.MOE_REDUCESCATTER)
    # The pool's hidden states gathered, and their partial sums, until the reduce-scatter
    # is done; every routed slot's gate and up values on the chip's 1 / n of the columns
    # while the experts run.
    b.buffer(every, 2 * share, gathered, out)
    b.buffer(every, 2.0 * slots * moe.moe_intermediate_size / n * act, ids, ids)
    return out


def experts_touched(experts_on_chip: int, slots: npt.ArrayLike, top_k: int,
                    n_experts: int) -> npt.NDArray[np.float64]:
    """Expected distinct experts among a chip's ``experts_on_chip`` that ``slots`` routed
    token-slots land on, when each token picks its top-k uniformly at random (what the fused-MoE
    benchmarks run: random gating; real, skewed routing touches fewer).

    A token fills about g = top_k e / E of the chip's e experts, all different (a top-k has no
    repeats), so with s slots, s / g tokens each miss a given expert with probability 1 - g / e:
    touched = e (1 - (1 - g / e)^(s / g)), g at least 1 and at most e. One chip holding every
    expert gives E (1 - (1 - k / E)^b) for b tokens; one expert per chip gives 1 for any slot.
    Never more than the slots nor than e, and it never falls when a slot is added."""
    e = float(experts_on_chip)
    g = min(max(1.0, top_k * e / n_experts), e)
    s = np.asarray(slots, np.float64)
    if g >= e:
        return np.minimum(s, e)   # every token fills all of them: as many as the slots
    missed = np.expm1((s / g) * np.log1p(-g / e))   # (1 - g/e)^(s/g) - 1, in (-1, 0]
    return np.minimum(-e * missed, s)


def _expert_gemms(m: ModelSpec, lay: Layout, slots: int | npt.NDArray[np.int64],
                  touched: float | npt.NDArray[np.float64], inter: float) -> list[Work]:
    """The experts' kernels for ``slots`` token-slots over ``touched`` experts of FFN width
    ``inter`` (per chip): the gate_up grouped GEMM, SwiGLU, (FP8 weights) the quantisation of
    the down projection's input, the down grouped GEMM; each expert's rows its share of the
    slots."""
    act = lay.precision.activation_bytes
    w = lay.precision.ffn_weights
    wb = bytes_per_param(w)
    dtype = lay.precision.matmul_dtype(w)
    rows = slots / touched
    parts = [ops.grouped_gemm_work(touched, rows, m.hidden_size, 2 * inter, wb, act, dtype),
             ops.swiglu_work(inter, slots, lay)]
    down = ops.quantise_inputs_work(inter, slots, lay, w)
    if down is not None:
        parts.append(down)
    parts.append(ops.grouped_gemm_work(touched, rows, inter, m.hidden_size, wb, act, dtype))
    return parts


def expert_parts(m: ModelSpec, lay: Layout, slots: npt.NDArray[np.int64],
                 experts_on_chip: int, tokens: npt.ArrayLike | None = None) -> list[Work]:
    """The routed experts of a chip that received ``slots`` token-slots: the kernels an engine
    runs (docs/mapping.md, "What a layer launches"). Each expert touched is its own piece of
    two grouped GEMMs (gate_up, down: its weights streamed once, its rows padded to a tile on
    their own), with SwiGLU and (FP8 weights) the quantisation of its input between them. On a
    pool of one chip (``tokens``: the chip's tokens; no dispatch) the tokens are permuted into
    expert order before and summed back after; with a dispatch the all-to-alls deliver and
    collect them in that order (DeepEP's low-latency layout)."""
    assert m.moe is not None
    moe = m.moe
    touched = experts_touched(experts_on_chip, slots, moe.num_experts_per_tok,
                              moe.n_routed_experts)
    parts = []
    if tokens is not None:
        parts.append(ops.permute_work(m.hidden_size, slots, tokens, lay))
    parts += _expert_gemms(m, lay, slots, touched, moe.moe_intermediate_size)
    if tokens is not None:
        parts.append(ops.unpermute_work(m.hidden_size, slots, tokens, lay))
    return parts


def dispatch_bytes_per_slot(m: ModelSpec, lay: Layout) -> int:
    """Bytes a routed token-slot carries to its expert: the hidden state in the experts' matmul
    input dtype (FP8 experts: quantised before the dispatch, with one FP32 scale per 128
    values, as DeepEP's FP8 dispatch sends it), else in the activations' dtype."""
    act = lay.precision.activation_bytes
    wb = matmul_input_bytes(lay.precision.matmul_dtype(lay.precision.ffn_weights))
    if wb >= act:
        return m.hidden_size * act
    return math.ceil(m.hidden_size * wb) + 4 * -(-m.hidden_size // 128)


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


def _gate_parts(m: ModelSpec, tokens: npt.ArrayLike, lay: Layout, hashed: bool) -> list[Work]:
    """The router (gate, BF16) and its top-k; none in a hash-routed layer, whose experts a
    token-id hash picks (DeepSeek-V4's first layers)."""
    assert m.moe is not None
    if hashed:
        return []
    return [ops.linear_work([router_linear(m)], tokens, lay, "bf16"),
            ops.topk_work(m.moe.n_routed_experts, tokens)]


def _router_parts(m: ModelSpec, tokens: npt.NDArray[np.int64], lay: Layout,
                  hashed: bool) -> list[Work]:
    """Residual add + norm (mHC's traffic for DeepSeek-V4), the router and its top-k (not in a
    hash-routed layer), the quantisation of the experts' input (FP8 experts), and the shared
    experts (replicated, not TP-sharded), for ``tokens`` tokens: one kernel each."""
    work = [ops.residual_work(m, tokens, lay), *_gate_parts(m, tokens, lay, hashed)]
    q = ops.quantise_inputs_work(m.hidden_size, tokens, lay, lay.precision.ffn_weights)
    if q is not None:
        work.append(q)
    shared = shared_expert_linears(m)
    if shared:
        work += _swiglu_parts(shared, tokens, lay, tp=1, quantised=True)
    return work


def _dense_ffn_parts(m: ModelSpec, tokens: npt.ArrayLike, lay: Layout) -> list[Work]:
    """One TP chip's dense FFN: residual add + RMSNorm, then the SwiGLU's kernels."""
    return [ops.residual_work(m, tokens, lay),
            *_swiglu_parts(dense_ffn_linears(m), tokens, lay, tp=lay.tp)]


def _swiglu_parts(linears: list[Linear], tokens: npt.ArrayLike, lay: Layout, *, tp: int,
                  quantised: bool = False) -> list[Work]:
    """A SwiGLU FFN (gate_up, down) on ``tp``-sharded weights: row-wise quantisation of the
    gate_up input when the weights are FP8 (unless ``quantised`` already), gate_up, SwiGLU,
    quantisation of the down input, down; one kernel each."""
    w = lay.precision.ffn_weights
    gate_up, down = linears
    width = down.in_features / tp
    parts = []
    q = None if quantised else ops.quantise_work([gate_up], tokens, lay, w, tp=tp)
    if q is not None:
        parts.append(q)
    parts.append(ops.linear_work([gate_up], tokens, lay, w, tp=tp))
    parts.append(ops.swiglu_work(width, tokens, lay))
    q = ops.quantise_work([down], tokens, lay, w, tp=tp)
    if q is not None:
        parts.append(q)
    parts.append(ops.linear_work([down], tokens, lay, w, tp=tp))
    return parts
