"""Prefill with context parallelism, per attention kind (docs/mapping.md, "Prefill").

Per layer, on every CP rank (and, with TP, on each chip of its TP group): the attention half of
the layer's kind, then the FFN half (dense TP or MoE EP, :mod:`ctxplan.mapping.ffn`). The
new tokens sit in 2 Np chunks, rank i holding chunks i and 2 Np - 1 - i; a cached prefix sits
where its own prefill left it (:mod:`ctxplan.mapping.placement`). The attention half by kind:

* full attention: the pass-KV ring (Meta, arXiv:2411.01783, section 3): Np steps, at step s
  rank i attends its queries to the KV block that came from rank i - s while sending that
  block on; or, with ``prefill_ring = "pass-q"``, the same ring moving query blocks, then an
  all-to-all of partial outputs and a merge (:mod:`ctxplan.mapping.prefill_passq`);
* sliding window / chunked: a halo exchange, each rank receiving only the keys before its
  chunks that its window reaches (:mod:`ctxplan.mapping.prefill_window`); a window that holds
  the whole context is full attention and runs as such;
* DSA: the pass-KV ring carrying the indexer keys too, the selection and the sparse attention
  after the last step (:mod:`ctxplan.mapping.prefill_dsa`);
* linear attention: chunk-local work in parallel, the state passed chunk to chunk
  (:mod:`ctxplan.mapping.prefill_linear`).
The layer after waits only on what each chip needs, so layers overlap where data allows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctxplan.mapping import ops
from ctxplan.mapping.attention import AttentionShapes, attention_shapes
from ctxplan.mapping.builder import NONE, GraphBuilder, Work
from ctxplan.mapping.collectives import Rows, rows_of
from ctxplan.mapping.ffn import emit_ffn
from ctxplan.mapping.layers import emit_layers
from ctxplan.mapping.layout import Layout, kv_bytes_per_chip_token
from ctxplan.mapping.placement import placement
from ctxplan.mapping.placement import rank_pairs as placed_rank_pairs
from ctxplan.mapping.prefill_base import IntArray, PrefillSetup, emit_ring, prefill_setup
from ctxplan.model.linear import lm_head_linear
from ctxplan.model.spec import (
    CHUNKED_ATTENTION,
    FULL_ATTENTION,
    INDEXED_ATTENTION,
    LINEAR_ATTENTION,
    SLIDING_ATTENTION,
    ModelSpec,
)

AttentionEmitter = Callable[[int, Rows], IntArray]
"""emit(layer, rows each chip waits for) -> per chip, the task after which its attention half
(output projection included) is done."""


def rank_pairs(context_length: int, cp: int) -> npt.NDArray[np.int64]:
    """pairs[i, k]: causal pairs of rank i's queries against rank k's KV, for a prefill of the
    whole context (no cached prefix): :func:`ctxplan.mapping.placement.rank_pairs`."""
    return placed_rank_pairs(None, FULL_ATTENTION, placement(context_length, 0, cp))


def windowed_as_full(m: ModelSpec, layer_type: str, context_length: int) -> bool:
    """A sliding-window or chunked layer whose window holds the whole context is exactly full
    attention (S <= w: query i sees every j <= i; S <= c: every token is in chunk 0)."""
    span = {SLIDING_ATTENTION: m.sliding_window,
            CHUNKED_ATTENTION: m.attention_chunk_size}.get(layer_type)
    return span is not None and context_length <= span


def ring_layer_type(m: ModelSpec, layer_type: str, context_length: int) -> str:
    """The pattern a layer runs: its own kind, or full attention for a window holding S."""
    return FULL_ATTENTION if windowed_as_full(m, layer_type, context_length) else layer_type


def emit_prefill(b: GraphBuilder, m: ModelSpec, lay: Layout, n_layers: int | None = None,
                 *, tile: bool = True) -> None:
    """Emit the phase's graph; ``n_layers`` emits only the first n layers (then the LM head),
    for the periodic-layer shortcut of :mod:`ctxplan.evaluate`. ``tile=False`` writes every
    layer out instead of copying repeats (the same graph; for tests)."""
    n_layers = m.num_hidden_layers if n_layers is None else n_layers
    setup = prefill_setup(m, lay)
    emitters: dict[str, AttentionEmitter] = {}
    for layer_type in m.layer_type_counts:
        emitters[layer_type] = attention_emitter(b, setup, layer_type)

    def layer_ops(layer: int, prev: Rows) -> Rows:
        o_ready = emitters[m.layer_type(layer)](layer, prev)
        return emit_ffn(b, m, lay, layer, setup.tokens, rows_of(o_ready))

    prev = emit_layers(b, m, n_layers, np.full((lay.n_chips, 0), NONE, np.int64), layer_ops,
                       tile=tile)

    # The first output token: LM head on the last position of each sequence, which rank 0
    # holds (new chunk 2 * Np - 1).
    first = np.arange(lay.tp)  # the chips of rank 0
    b.compute(first, ops.LM_HEAD, [ops.linear_work([lm_head_linear(m)], lay.batch, lay,
                                                   "bf16")], prev[first], layer=n_layers)


def attention_emitter(b: GraphBuilder, setup: PrefillSetup, layer_type: str) -> AttentionEmitter:
    """The attention half of a layer of ``layer_type`` under this pool's layout."""
    m, lay = setup.m, setup.lay
    kind = ring_layer_type(m, layer_type, lay.context_length)
    if kind == FULL_ATTENTION:
        if lay.prefill_ring == "pass-q":
            from ctxplan.mapping.prefill_passq import pass_q_emitter

            return pass_q_emitter(b, setup)
        return pass_kv_emitter(b, setup, attention_shapes(m, lay))
    if kind in (SLIDING_ATTENTION, CHUNKED_ATTENTION):
        from ctxplan.mapping.prefill_window import window_emitter

        return window_emitter(b, setup, kind)
    if kind == INDEXED_ATTENTION:
        from ctxplan.mapping.prefill_dsa import dsa_emitter

        return dsa_emitter(b, setup)
    assert kind == LINEAR_ATTENTION, kind
    from ctxplan.mapping.prefill_linear import linear_emitter

    return linear_emitter(b, setup)


def kv_and_query_reads(att: AttentionShapes, lay: Layout) -> tuple[float, float]:
    """HBM bytes attention reads per key (the per-head K and V up-projected from the latent in
    standard MLA, else the cached KV itself) and per query (its q and output)."""
    act = lay.precision.activation_bytes
    dims = att.dims
    q_read = att.heads * (dims.qk_dim + dims.v_dim) * act
    return (q_read if att.standard_mla else att.c_chip), q_read


def pass_kv_emitter(b: GraphBuilder, setup: PrefillSetup,
                    att: AttentionShapes) -> AttentionEmitter:
    """Full attention with the pass-KV ring: every rank's KV block, cached and new tokens
    together, visits every other rank once."""
    m, lay = setup.m, setup.lay
    p = lay.precision
    w = p.attention_weights
    batch = lay.batch
    tokens, kv_tokens, cached = setup.tokens, setup.kv_tokens, setup.cached
    pairs = setup.pairs(FULL_ATTENTION) * batch
    kv_read, q_read = kv_and_query_reads(att, lay)
    ranks, chips, rank_of = setup.ranks, setup.chips, setup.rank_of
    has_cached = setup.pl.cached > 0

    def step_work(step: int, k: IntArray) -> list[Work]:
        parts = [Work("attention", pairs[ranks, k] * att.pair_flops,
                      kv_tokens[k] * kv_read + tokens * q_read, p.attention,
                      m_rows=tokens, kv_tokens=kv_tokens[k] / batch)]
        if att.standard_mla and step > 0:
            # A received latent block is up-projected (kv_b_proj) before attending.
            parts.append(ops.linear_work(att.kv_b, kv_tokens[k], lay, w))
        elif att.standard_mla and has_cached:
            # The rank's own cached latents too (its new tokens' ran in the projection).
            parts.append(ops.linear_work(att.kv_b, cached, lay, w))
        return parts

    def emit(layer: int, prev: Rows) -> IntArray:
        qkv = b.compute(chips, ops.QKV_PROJ, att.projection(m, tokens[rank_of], lay), prev,
                        layer=layer)
        done = emit_ring(b, setup, layer, rows_of(qkv), step_work=step_work,
                         send_bytes=lambda k: kv_tokens[k] * att.c_chip,
                         compute_kind=ops.PASS_KV_ATTN, send_kind=ops.PASS_KV_SEND)
        return b.compute(chips, ops.O_PROJ, att.output(tokens[rank_of], lay), done,
                         layer=layer)

    return emit


# -- what the CP communication should move: closed forms per kind -------------------------------


@dataclass(frozen=True)
class KindComm:
    """The CP communication of the layers of one attention kind (a report row), in either phase
    (decode's: :func:`ctxplan.mapping.decode.decode_comm`)."""

    layer_type: str
    pattern: str                # prefill: "pass-kv", "pass-q", "halo", "state-chain";
                                # decode: "pass-q", "local", "pass-q+top-k"
    layers: int
    ring_steps_per_layer: int   # sequential exchange steps per layer
    sends_per_layer: int        # CP transfer tasks per layer (all TP indices)
    analytic_bytes: int         # all layers of the kind, closed form


def pass_kv_analytic_bytes(m: ModelSpec, lay: Layout, layers: int | None = None) -> int:
    """Closed form of a pass-KV ring's bytes: b * L * (Np - 1) * (P + T) * c_kv per chip-ring,
    times the tp rings (each rank sends every block but its successor's own, so the blocks
    sent over a ring add up to (Np - 1) * S tokens however unevenly S splits)."""
    layers = m.num_hidden_layers if layers is None else layers
    return (lay.batch * layers * (lay.cp - 1) * lay.context_length
            * kv_bytes_per_chip_token(m, lay) * lay.tp)


def prefill_comm(m: ModelSpec, lay: Layout) -> list[KindComm]:
    """Per attention kind of the model: its pattern, steps, sends and closed-form bytes."""
    from ctxplan.mapping.prefill_dsa import dsa_comm
    from ctxplan.mapping.prefill_linear import linear_comm
    from ctxplan.mapping.prefill_passq import pass_q_comm
    from ctxplan.mapping.prefill_window import window_comm

    out = []
    for layer_type, n in m.layer_type_counts.items():
        kind = ring_layer_type(m, layer_type, lay.context_length)
        if kind == FULL_ATTENTION and lay.prefill_ring == "pass-q":
            out.append(pass_q_comm(m, lay, layer_type, n))
        elif kind == FULL_ATTENTION:
            out.append(KindComm(layer_type, "pass-kv", n, lay.cp - 1,
                                lay.tp * lay.cp * (lay.cp - 1),
                                pass_kv_analytic_bytes(m, lay, n)))
        elif kind == INDEXED_ATTENTION:
            out.append(dsa_comm(m, lay, n))
        elif kind == LINEAR_ATTENTION:
            out.append(linear_comm(m, lay, n))
        else:
            out.append(window_comm(m, lay, kind, n))
    return out
