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

from ctxplan.mapping import ops
from ctxplan.mapping.attention import attention_shapes
from ctxplan.mapping.builder import GraphBuilder, Work
from ctxplan.mapping.collectives import Deps
from ctxplan.mapping.ffn import emit_ffn
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


def rank_pairs(context_length: int, cp: int) -> list[list[int]]:
    """pairs[i][k]: causal pairs of rank i's queries against rank k's KV (both chunk pairs)."""
    chunks = prefill_chunks(context_length, cp)
    own = [(i, 2 * cp - 1 - i) for i in range(cp)]
    return [[sum(chunk_pairs(chunks, qa, kb) for qa in own[i] for kb in own[k])
             for k in range(cp)] for i in range(cp)]


def pass_kv_analytic_bytes(m: ModelSpec, lay: Layout) -> int:
    """Closed form of the ring's bytes: b * L * (Np - 1) * S * c_kv per chip-ring, times the
    tp rings (each rank sends every block but the one of its successor, so the blocks sent over
    a ring add up to (Np - 1) * S tokens however unevenly S splits)."""
    return (lay.batch * m.num_hidden_layers * (lay.cp - 1) * lay.context_length
            * kv_bytes_per_chip_token(m, lay) * lay.tp)


def emit_prefill(
    b: GraphBuilder, m: ModelSpec, lay: Layout, n_layers: int | None = None
) -> None:
    """Emit the phase's graph; ``n_layers`` emits only the first n layers (then the LM head),
    for the periodic-layer shortcut of :mod:`ctxplan.evaluate`."""
    n_layers = m.num_hidden_layers if n_layers is None else n_layers
    n_rank, tp, batch = lay.cp, lay.tp, lay.batch
    chunks = prefill_chunks(lay.context_length, n_rank)
    tokens = [(chunks[i] + chunks[2 * n_rank - 1 - i]) * batch for i in range(n_rank)]
    pairs = rank_pairs(lay.context_length, n_rank)
    p = lay.precision
    act = p.activation_bytes
    att = attention_shapes(m, lay)
    dims, heads, pair_flops, c_chip = att.dims, att.heads, att.pair_flops, att.c_chip
    # What attention reads per KV token: the latent up-projected per head (standard MLA), else
    # the cached K and V themselves.
    kv_read = heads * (dims.qk_dim + dims.v_dim) * act if att.standard_mla else c_chip

    prev: dict[int, Deps] = {c: () for c in range(lay.n_chips)}
    for layer in range(n_layers):
        qkv: dict[int, int] = {}
        for i in range(n_rank):
            for j in range(tp):
                c = lay.chip(i, j)
                parts = att.projection(m, tokens[i], lay)
                qkv[c] = b.compute(c, ops.QKV_PROJ, parts, prev[c], layer=layer)

        ring_done: dict[int, Deps] = {}
        for j in range(tp):  # one ring per KV-head group, all in parallel
            ring = [lay.chip(i, j) for i in range(n_rank)]
            holds: list[Deps] = [(qkv[c],) for c in ring]  # block for this step is here
            step_done: list[Deps] = [(qkv[c],) for c in ring]
            for step in range(n_rank):
                next_holds: list[Deps] = [()] * n_rank
                next_done: list[Deps] = [()] * n_rank
                for i, c in enumerate(ring):
                    k = (i - step) % n_rank  # the block attended now came from rank k
                    deps = tuple(dict.fromkeys(holds[i] + step_done[i]))
                    q_tok = tokens[i]
                    parts = [Work("attention", pairs[i][k] * batch * pair_flops,
                                  tokens[k] * kv_read + q_tok * heads * (dims.qk_dim + dims.v_dim)
                                  * act, p.attention, m_rows=q_tok,
                                  kv_tokens=tokens[k] / batch)]
                    if att.standard_mla and step > 0:
                        # A received latent block is up-projected (kv_b_proj) before attending.
                        parts.append(ops.linear_work(att.kv_b, tokens[k], lay, p.attention_weights))
                    a = b.compute(c, ops.PASS_KV_ATTN, parts, deps, layer=layer, step=step)
                    if step < n_rank - 1:
                        nxt = (i + 1) % n_rank
                        s = b.send(c, ring[nxt], tokens[k] * c_chip, ops.PASS_KV_SEND, deps,
                                   layer=layer, step=step)
                        next_holds[nxt] = (s,)
                        next_done[i] = (a, s)
                    else:
                        next_done[i] = (a,)
                holds, step_done = next_holds, next_done
            ring_done.update(zip(ring, step_done, strict=True))

        o_ready: dict[int, Deps] = {}
        for c in range(lay.n_chips):
            rank = c // tp
            w = ops.linear_work(att.o_proj, tokens[rank], lay, p.attention_weights)
            o_ready[c] = (b.compute(c, ops.O_PROJ, [w], ring_done[c], layer=layer),)
        after = emit_ffn(b, m, lay, layer, dict(enumerate(tokens)), o_ready, {})
        prev = {c: after.get(c, o_ready[c]) for c in range(lay.n_chips)}

    # The first output token: LM head on the last position of each sequence, which rank 0
    # holds (chunk 2 * Np - 1).
    head = [lm_head_linear(m)]
    for j in range(tp):
        c = lay.chip(0, j)
        b.compute(c, ops.LM_HEAD, [ops.linear_work(head, batch, lay, "bf16")], prev[c],
                  layer=n_layers)


def prefill_structure(lay: Layout) -> dict[str, int]:
    """What the ring emits per layer (for reports and tests)."""
    return {"ring_steps_per_layer": lay.cp - 1, "rings_per_layer": lay.tp}


__all__ = ["emit_prefill", "pass_kv_analytic_bytes", "prefill_structure", "rank_pairs"]
