"""Prefill with context parallelism: the pass-KV ring (Meta, arXiv:2411.01783, section 3).

Per layer, on every CP rank (and, with TP, on each chip of its TP group):
1. q / kv projections of the rank's local tokens (two chunks of the causal load-balanced split);
2. a ring of Np steps per KV-head group: at step s, rank i attends its queries to the KV block
   that originated at rank i - s, and at the same time (no dependency between the two) sends
   that block on to rank i + 1. Step s + 1 waits for both (the spec's serial ring, no
   cross-step pipelining). Np - 1 sends per ring per layer;
3. the output projection, then the FFN half (dense TP or MoE EP, :mod:`ctxplan.mapping.ffn`).
The layer after waits only on what each chip needs, so layers overlap where data allows.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctxplan.mapping import ops
from ctxplan.mapping.attention import attention_shapes
from ctxplan.mapping.builder import NONE, GraphBuilder, Work, deps_of
from ctxplan.mapping.collectives import Rows, rows_of, sendrecv
from ctxplan.mapping.ffn import emit_ffn
from ctxplan.mapping.layers import emit_layers
from ctxplan.mapping.layout import Layout, kv_bytes_per_chip_token, prefill_chunks
from ctxplan.model.linear import lm_head_linear
from ctxplan.model.spec import ModelSpec


def chunk_pairs(chunks: list[int], q_chunk: int, kv_chunk: int) -> int:
    """Causal (query, key) pairs between two chunks of the sequence (diagonal included)."""
    if kv_chunk < q_chunk:
        return chunks[q_chunk] * chunks[kv_chunk]
    if kv_chunk == q_chunk:
        n = chunks[q_chunk]
        return n * (n + 1) // 2
    return 0


def rank_pairs(context_length: int, cp: int) -> npt.NDArray[np.int64]:
    """pairs[i, k]: causal pairs of rank i's queries against rank k's KV (both chunk pairs).

    Rank i holds chunks a_i = i and b_i = 2cp - 1 - i. Chunk b_i comes after every chunk a_k, so
    it sees all of them; chunk a_i comes before every b_k and sees the a_k with k < i (and
    itself, causally); b_i sees the b_k with k > i (later ranks hold earlier b chunks).
    """
    c = np.array(prefill_chunks(context_length, cp), np.int64)
    a = c[:cp]              # a_i = chunk i
    bb = c[2 * cp - 1 - np.arange(cp)]   # b_i = chunk 2cp - 1 - i
    i = np.arange(cp)[:, None]
    k = np.arange(cp)[None, :]
    diag_a = a * (a + 1) // 2
    diag_b = bb * (bb + 1) // 2
    aa = np.where(k < i, a[:, None] * a[None, :], 0) + np.where(k == i, diag_a[:, None], 0)
    ba = bb[:, None] * a[None, :]                       # b_i against a_k: always full
    bbk = np.where(k > i, bb[:, None] * bb[None, :], 0) + np.where(k == i, diag_b[:, None], 0)
    return np.asarray(aa + ba + bbk, np.int64)          # a_i against b_k: never (causal)


def pass_kv_analytic_bytes(m: ModelSpec, lay: Layout) -> int:
    """Closed form of the ring's bytes: b * L * (Np - 1) * S * c_kv per chip-ring, times the
    tp rings (each rank sends every block but the one of its successor, so the blocks sent over
    a ring add up to (Np - 1) * S tokens however unevenly S splits)."""
    return (lay.batch * m.num_hidden_layers * (lay.cp - 1) * lay.context_length
            * kv_bytes_per_chip_token(m, lay) * lay.tp)


def emit_prefill(b: GraphBuilder, m: ModelSpec, lay: Layout, n_layers: int | None = None,
                 *, tile: bool = True) -> None:
    """Emit the phase's graph; ``n_layers`` emits only the first n layers (then the LM head),
    for the periodic-layer shortcut of :mod:`ctxplan.evaluate`. ``tile=False`` writes every
    layer out instead of copying repeats (the same graph; for tests)."""
    n_layers = m.num_hidden_layers if n_layers is None else n_layers
    n_rank, tp, batch = lay.cp, lay.tp, lay.batch
    chunks = prefill_chunks(lay.context_length, n_rank)
    tokens = np.array([(chunks[i] + chunks[2 * n_rank - 1 - i]) * batch for i in range(n_rank)],
                      np.int64)
    pairs = rank_pairs(lay.context_length, n_rank)
    p = lay.precision
    act = p.activation_bytes
    att = attention_shapes(m, lay)
    dims, heads, pair_flops, c_chip = att.dims, att.heads, att.pair_flops, att.c_chip
    # What attention reads per KV token: the latent up-projected per head (standard MLA), else
    # the cached K and V themselves.
    kv_read = heads * (dims.qk_dim + dims.v_dim) * act if att.standard_mla else c_chip
    q_read = heads * (dims.qk_dim + dims.v_dim) * act
    chips = np.arange(lay.n_chips)
    rank_of = chips // tp
    ranks = np.arange(n_rank)
    prv = (ranks - 1) % n_rank

    def layer_ops(layer: int, prev: Rows) -> Rows:
        qkv = b.compute(chips, ops.QKV_PROJ, att.projection(m, tokens[rank_of], lay), prev,
                        layer=layer)
        ring_done = np.empty(lay.n_chips, np.int64)
        for j in range(tp):  # one ring per KV-head group, all in parallel
            ring = ranks * tp + j
            deps = qkv[ring]            # step 0: the local block, after the projection
            for step in range(n_rank):
                k = (ranks - step) % n_rank  # the block attended now came from rank k
                parts = [Work("attention", pairs[ranks, k] * batch * pair_flops,
                              tokens[k] * kv_read + tokens * q_read, p.attention,
                              m_rows=tokens, kv_tokens=tokens[k] / batch)]
                if att.standard_mla and step > 0:
                    # A received latent block is up-projected (kv_b_proj) before attending.
                    parts.append(ops.linear_work(att.kv_b, tokens[k], lay, p.attention_weights))
                last = step == n_rank - 1
                a, s = _attend_and_send(b, ring, parts, tokens[k] * c_chip, deps, layer, step,
                                        send=not last)
                if last:
                    ring_done[ring] = a
                else:
                    # Step s + 1 waits for the block from the predecessor, its own attention
                    # and its own send (the buffer is free again).
                    deps = deps_of(s[prv], a, s)
        o_ready = b.compute(chips, ops.O_PROJ, att.output(tokens[rank_of], lay), ring_done,
                            layer=layer)
        return emit_ffn(b, m, lay, layer, tokens, rows_of(o_ready))

    prev = emit_layers(b, m, n_layers, np.full((lay.n_chips, 0), NONE, np.int64), layer_ops,
                       tile=tile)

    # The first output token: LM head on the last position of each sequence, which rank 0
    # holds (chunk 2 * Np - 1).
    head = [lm_head_linear(m)]
    first = np.arange(tp)  # the chips of rank 0
    b.compute(first, ops.LM_HEAD, [ops.linear_work(head, batch, lay, "bf16")], prev[first],
              layer=n_layers)


def _attend_and_send(b: GraphBuilder, ring: npt.NDArray[np.int64], parts: list[Work],
                     send_bytes: npt.NDArray[np.int64], deps: Rows | npt.NDArray[np.int64],
                     layer: int, step: int, *, send: bool
                     ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """One ring step on every rank: attention on the held block and, at the same time (the
    same dependencies, nothing between them), the block's send to the next rank. (A rank
    issues its attention before its send; emitting all attentions, then all sends, gives the
    same schedule, since an attention and a send never hold a common resource.) The send is
    one SendRecv operation per rank (:func:`ctxplan.mapping.collectives.sendrecv`)."""
    a = b.compute(ring, ops.PASS_KV_ATTN, parts, deps, layer=layer, step=step)
    if not send:
        return a, a[:0]
    # One SendRecv per rank (send to the next, receive from the previous): its fixed cost
    # after the step's dependencies, the send once both neighbours have started it.
    nxt = np.roll(np.arange(len(ring)), -1)
    _, s = sendrecv(b, ring, nxt, send_bytes, ops.PASS_KV_SEND, _rows(deps, len(ring)),
                    layer, step)
    return a, s


def _rows(deps: Rows | npt.NDArray[np.int64], n: int) -> Rows:
    arr = np.asarray(deps, np.int64)
    return arr.reshape(n, -1)
