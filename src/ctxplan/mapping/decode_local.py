"""Decode of the kinds whose cache does not grow with S: it lives on the sequence's home rank.

**Sliding window / chunked (window w or chunk c shorter than S).** A decode step's query sees
the last min(S, w) keys (chunked: at most the last min(S, c), the chunk it is in; we cost the
fullest chunk, as docs/model.md does). Those are the sequence's newest tokens, and decode
writes every new token's KV on the home (as full attention does, :mod:`ctxplan.mapping.
decode`), so after w steps the rank holding the last w tokens is the home whatever the prompt's
layout; we place the prompt's window there too (the handoff moves those w tokens once per
request, docs/mapping.md). So the query never leaves the home, and a window layer moves
nothing: ``q_proj``, ``window_attn`` over the window on the home chips (its KV heads split
over TP as everywhere), ``o_proj``. Keeping the window on the contiguous shard that holds the
prompt's last tokens instead would add a query round trip (two operations) per window layer and
put every sequence's window on one rank.

**Linear attention.** The recurrent state (and the conv1d's last inputs) of a sequence lives on
its home rank, split over TP by value heads (vLLM shards Gated DeltaNet by heads): ``q_proj``
(in_proj_qkvz, in_proj_ba), ``gdn_step`` (one recurrent step: the state read and written back,
:func:`ctxplan.model.kinds.linear_decode_flops_per_token`), ``out_proj``. No pass-Q, nothing
moves.
"""

from __future__ import annotations

from ctxplan.mapping import ops
from ctxplan.mapping.attention import attention_shapes
from ctxplan.mapping.builder import GraphBuilder, Work
from ctxplan.mapping.collectives import Rows
from ctxplan.mapping.decode import DecodeEmitter
from ctxplan.mapping.decode_base import DecodePool, attention_parts
from ctxplan.mapping.layout import Layout
from ctxplan.mapping.memory import linear_state_bytes_per_chip
from ctxplan.model.kinds import kv_tokens, linear_decode_flops_per_token
from ctxplan.model.linear import attention_linears
from ctxplan.model.spec import LINEAR_ATTENTION, ModelSpec


def window_emitter(b: GraphBuilder, m: ModelSpec, lay: Layout, pool: DecodePool,
                   layer_type: str) -> DecodeEmitter:
    att = attention_shapes(m, lay, layer_type)
    keep = kv_tokens(m, layer_type, lay.context_length)   # min(S, w) or min(S, c)
    home, seqs = pool.home_chips, pool.home_seqs
    attend = attention_parts(lay, att, pool, seqs, keep, lse=False)

    def emit(layer: int, prev: Rows) -> Rows:
        qp = b.compute(home, ops.Q_PROJ, att.projection(m, seqs, lay), prev[home], layer=layer)
        attn = b.compute(home, ops.WINDOW_ATTN, attend, qp, layer=layer, step=0)
        o_ready = b.compute(home, ops.O_PROJ, att.output(seqs, lay), attn, layer=layer)
        return pool.home_rows(prev, o_ready)

    return emit


def linear_emitter(b: GraphBuilder, m: ModelSpec, lay: Layout, pool: DecodePool
                   ) -> DecodeEmitter:
    la = m.linear_attention
    assert la is not None
    p = lay.precision
    w = p.attention_weights
    act = p.activation_bytes
    split = min(lay.tp, la.linear_num_value_heads)
    state = linear_state_bytes_per_chip(m, lay.tp)
    linears = attention_linears(m, LINEAR_ATTENTION)
    pre = [x for x in linears if x.name != "out_proj"]
    out = [x for x in linears if x.name == "out_proj"]
    home, seqs = pool.home_chips, pool.home_seqs
    # The step reads the state and writes it back, reads the projected inputs (the conv1d's
    # channels) and writes the output, per sequence, on its share of the value heads.
    step = Work("memory", seqs * linear_decode_flops_per_token(m) / split,
                seqs * (2 * state + (la.conv_dim + la.value_dim) * act / split), p.attention)

    def emit(layer: int, prev: Rows) -> Rows:
        proj = b.compute(home, ops.Q_PROJ, [ops.norm_work(m.hidden_size, seqs, lay),
                                            ops.linear_work(pre, seqs, lay, w)],
                         prev[home], layer=layer)
        done = b.compute(home, ops.GDN_STEP, [step], proj, layer=layer)
        o_ready = b.compute(home, ops.O_PROJ, [ops.linear_work(out, seqs, lay, w)], done,
                            layer=layer)
        return pool.home_rows(prev, o_ready)

    return emit
