"""Decode with the KV sharded over Nd ranks: pass-Q and a merge of partial attention.

Sequence k of the batch has its home on rank k mod Nd (round robin): the home projects the new
token's query, sends it (pass-Q) to every other rank (all at once, or forwarded around a ring
of ranks with ``pass_q = "ring"``, as Meta's implementation does), every rank attends it to its
S / Nd share of that sequence's KV (partial attention, reading b * S/Nd * c_kv bytes per layer), and
the partial outputs with their log-sum-exp go back to the home in a one-shot gather, where they
are merged (Meta arXiv:2411.01783 section 3.3; NVIDIA Helix arXiv:2507.07120). With TP, every
TP index runs its own pass-Q / gather over its heads. Then the output projection and the FFN
half (dense on the home, MoE with EP over the whole pool).

Aggregation structure per layer (documented in docs/mapping.md and tested): for each home rank
with queries and each TP index, Nd - 1 pass-Q sends and Nd - 1 merge sends.
"""

from __future__ import annotations

from ctxplan.mapping import ops
from ctxplan.mapping.attention import attention_shapes
from ctxplan.mapping.builder import GraphBuilder, Work
from ctxplan.mapping.collectives import Deps
from ctxplan.mapping.ffn import emit_ffn
from ctxplan.mapping.layout import Layout, decode_shard_tokens
from ctxplan.model.attention import attention_dims
from ctxplan.model.linear import lm_head_linear
from ctxplan.model.spec import ModelSpec

LSE_BYTES = 4  # one FP32 log-sum-exp per head per query travels with each partial output


def home_counts(batch: int, cp: int) -> list[int]:
    """Sequences whose home is each rank (sequence k lives on rank k mod cp)."""
    return [len(range(h, batch, cp)) for h in range(cp)]


def _messages(m: ModelSpec, lay: Layout) -> tuple[int, int]:
    """Bytes per query token per TP chip of a pass-Q message and of a merge message."""
    dims = attention_dims(m, lay.mla_mode or "standard")
    heads = dims.q_heads // lay.tp
    act = lay.precision.activation_bytes
    return heads * dims.qk_dim * act, heads * (dims.v_dim * act + LSE_BYTES)


def pass_q_analytic_bytes(m: ModelSpec, lay: Layout) -> int:
    """Closed form: L * b * (Nd - 1) * tp * (query + partial output + LSE bytes per chip)."""
    q_msg, o_msg = _messages(m, lay)
    return m.num_hidden_layers * lay.batch * (lay.cp - 1) * lay.tp * (q_msg + o_msg)


def emit_decode(
    b: GraphBuilder, m: ModelSpec, lay: Layout, n_layers: int | None = None
) -> None:
    """Emit the phase's graph; ``n_layers`` emits only the first n layers (then the LM head),
    for the periodic-layer shortcut of :mod:`ctxplan.evaluate`."""
    n_layers = m.num_hidden_layers if n_layers is None else n_layers
    n_rank, tp = lay.cp, lay.tp
    shards = decode_shard_tokens(lay.context_length, n_rank)
    counts = home_counts(lay.batch, n_rank)
    homes = [h for h in range(n_rank) if counts[h]]
    p = lay.precision
    att = attention_shapes(m, lay)
    dims, heads, pair_flops, c_chip = att.dims, att.heads, att.pair_flops, att.c_chip
    q_msg, o_msg = _messages(m, lay)
    ring = lay.pass_q == "ring"

    prev: dict[int, Deps] = {c: () for c in range(lay.n_chips)}
    for layer in range(n_layers):
        # 1. Query projection on each home chip.
        qp: dict[int, int] = {}
        for h in homes:
            for j in range(tp):
                c = lay.chip(h, j)
                parts = att.projection(m, counts[h], lay)
                qp[c] = b.compute(c, ops.Q_PROJ, parts, prev[c], layer=layer)
        # 2. Pass-Q: every home's queries reach every other rank (per TP index): all at once
        # from the home (broadcast), or forwarded rank to rank (ring).
        q_in: dict[int, list[int]] = {c: list(prev[c]) for c in range(lay.n_chips)}
        for h in homes:
            for j in range(tp):
                src = lay.chip(h, j)
                q_in[src].append(qp[src])
                hop_from, arrived = src, qp[src]
                for k in range(1, n_rank):
                    dst = lay.chip((h + k) % n_rank, j)
                    if ring:
                        arrived = b.send(hop_from, dst, counts[h] * q_msg, ops.PASS_Q_SEND,
                                         (arrived,), layer=layer, step=k - 1)
                        hop_from = dst
                    else:
                        arrived = b.send(src, dst, counts[h] * q_msg, ops.PASS_Q_SEND,
                                         (qp[src],), layer=layer)
                    q_in[dst].append(arrived)
        # 3. Partial attention of all queries over the local shard of each sequence.
        partial: dict[int, int] = {}
        for i in range(n_rank):
            kv_tokens = lay.batch * shards[i]
            for j in range(tp):
                c = lay.chip(i, j)
                parts = [Work("attention", kv_tokens * pair_flops,
                              kv_tokens * c_chip + lay.batch * (q_msg + o_msg), p.attention,
                              m_rows=lay.batch, kv_tokens=shards[i])]
                if att.standard_mla:
                    # Standard MLA up-projects the whole local latent shard every step.
                    parts.append(ops.linear_work(att.kv_b, kv_tokens, lay, p.attention_weights))
                partial[c] = b.compute(c, ops.PARTIAL_ATTN, parts, q_in[c], layer=layer,
                                       step=0)
        # 4. Merge: one-shot gather of partial outputs + LSE to the home, merge, o_proj.
        ready: dict[int, Deps] = {}
        for h in homes:
            for j in range(tp):
                root = lay.chip(h, j)
                deps = [partial[root]]
                for i in range(n_rank):
                    if i != h:
                        src = lay.chip(i, j)
                        deps.append(b.send(src, root, counts[h] * o_msg, ops.MERGE_SEND,
                                           (partial[src],), layer=layer))
                merged_bytes = n_rank * counts[h] * o_msg
                merge = b.compute(root, ops.ATTN_MERGE,
                                  [Work("memory", 4.0 * n_rank * counts[h] * heads * dims.v_dim,
                                        merged_bytes, p.attention)], deps, layer=layer)
                w = ops.linear_work(att.o_proj, counts[h], lay, p.attention_weights)
                ready[root] = (b.compute(root, ops.O_PROJ, [w], (merge,), layer=layer),)
        idle = {c: (t,) for c, t in partial.items() if c not in ready}
        prev = emit_ffn(b, m, lay, layer, {h: counts[h] for h in homes}, ready, idle)

    head = [lm_head_linear(m)]
    for h in homes:
        for j in range(tp):
            c = lay.chip(h, j)
            b.compute(c, ops.LM_HEAD, [ops.linear_work(head, counts[h], lay, "bf16")],
                      prev[c], layer=n_layers)


def decode_structure(lay: Layout) -> dict[str, int]:
    """Sends per layer of the decode CP pattern (for reports and tests)."""
    homes = sum(1 for c in home_counts(lay.batch, lay.cp) if c)
    per = homes * lay.tp * (lay.cp - 1)
    return {"pass_q_sends_per_layer": per, "merge_sends_per_layer": per}


__all__ = ["decode_structure", "emit_decode", "home_counts", "pass_q_analytic_bytes"]
