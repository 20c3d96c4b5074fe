"""Full attention (causal over every earlier token: MHA / GQA / MLA), in both phases.

Prefill (docs/mapping.md, "Prefill"): the pass-KV ring (Meta, arXiv:2411.01783, section 3): Np
steps, at step s rank i attends its queries to the KV block that came from rank i - s while
sending that block on; or, with ``prefill_ring = "pass-q"``, the same ring moving query blocks,
then an all-to-all of partial outputs and a merge (:mod:`.full_passq`). Decode: pass-Q over the
KV sharded S / Nd per rank, partial attention, the All2All of partial outputs and the merge
(:mod:`.full_decode`). The KV of a sequence is kept whole on the ranks that hold its tokens:
in prefill each rank's cached and new chunks (:mod:`ctxplan.mapping.placement`), in decode its
contiguous shard; the handoff moves each token from the one to the other.
"""

from __future__ import annotations

from ctxplan.mapping import ops
from ctxplan.mapping.attention import AttentionShapes, attention_shapes
from ctxplan.mapping.builder import GraphBuilder, Work
from ctxplan.mapping.handoff_base import sharded_pairs
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.kinds.base import AttentionKind, RankBytes
from ctxplan.mapping.kinds.full_decode import decode_comm, full_emitter
from ctxplan.mapping.kinds.full_passq import message_bytes, pass_q_comm, pass_q_emitter
from ctxplan.mapping.layout import Layout, decode_shard_tokens, kv_bytes_per_chip_token
from ctxplan.mapping.placement import Placement, causal_below
from ctxplan.mapping.prefill_base import (
    AttentionEmitter,
    IntArray,
    PrefillSetup,
    kv_and_query_reads,
    ring_attention,
)
from ctxplan.model.spec import FULL_ATTENTION, ModelSpec


def prefill_emitter(b: GraphBuilder, setup: PrefillSetup, layer_type: str) -> AttentionEmitter:
    """The ring ``prefill_ring`` names: pass-KV (default) or pass-Q."""
    if setup.lay.policy.prefill_ring == "pass-q":
        return pass_q_emitter(b, setup)
    return pass_kv_emitter(b, setup, attention_shapes(setup.m, setup.lay, FULL_ATTENTION))


def pass_kv_emitter(b: GraphBuilder, setup: PrefillSetup,
                    att: AttentionShapes) -> AttentionEmitter:
    """Full attention with the pass-KV ring: every rank's KV block, cached and new tokens
    together, visits every other rank once."""
    lay = setup.lay
    p = lay.precision
    w = p.attention_weights
    batch = lay.batch
    tokens, kv_tokens, cached = setup.tokens, setup.kv_tokens, setup.cached
    pairs = setup.pairs(FULL_ATTENTION, causal_below) * batch
    kv_read, q_read = kv_and_query_reads(att, lay)
    ranks = setup.ranks
    has_cached = setup.pl.cached > 0

    def step_work(step: int, k: IntArray) -> list[Work]:
        parts = [Work("attention", pairs[ranks, k] * att.pair_flops,
                      kv_tokens[k] * kv_read + tokens * q_read, p.attention,
                      m_rows=tokens, kv_tokens=kv_tokens[k] / batch,
                      causal=step == 0,    # the rank's own block is its causal diagonal
                      head_dim=att.head_dim)]
        if att.standard_mla and step > 0:
            # A received latent block is up-projected (kv_b_proj) before attending.
            parts.append(ops.linear_work(att.kv_b, kv_tokens[k], lay, w))
        elif att.standard_mla and has_cached:
            # The rank's own cached latents too (its new tokens' ran in the projection).
            parts.append(ops.linear_work(att.kv_b, cached, lay, w))
        return parts

    return ring_attention(b, setup, att, step_work=step_work,
                          send_bytes=lambda k: kv_tokens[k] * att.c_chip,
                          compute_kind=ops.PASS_KV_ATTN, send_kind=ops.PASS_KV_SEND)


def pass_kv_analytic_bytes(m: ModelSpec, lay: Layout, layers: int | None = None) -> int:
    """Closed form of a pass-KV ring's bytes: b * L * (Np - 1) * (P + T) * c_kv per chip-ring,
    times the tp rings (each rank sends every block but its successor's own, so the blocks
    sent over a ring add up to (Np - 1) * S tokens however unevenly S splits)."""
    layers = m.num_hidden_layers if layers is None else layers
    return (lay.batch * layers * (lay.cp - 1) * lay.context_length
            * kv_bytes_per_chip_token(m, lay) * lay.tp)


def pass_kv_comm(m: ModelSpec, lay: Layout, layer_type: str, layers: int) -> KindComm:
    """The pass-KV ring: Np - 1 steps, a send per rank and TP index per step."""
    return KindComm(layer_type, "pass-kv", layers, lay.cp - 1, lay.tp * lay.cp * (lay.cp - 1),
                    pass_kv_analytic_bytes(m, lay, layers))


def prefill_comm(m: ModelSpec, lay: Layout, layer_type: str, layers: int) -> KindComm:
    if lay.policy.prefill_ring == "pass-q":
        return pass_q_comm(m, lay, layer_type, layers)
    return pass_kv_comm(m, lay, layer_type, layers)


def ring_heuristic(m: ModelSpec, lay: Layout) -> tuple[float, float, str]:
    """Meta's closed-form choice between the prefill rings (arXiv:2411.01783): pass-Q when the
    miss rate T / (T + P) <= 2 N_KV / N_H, the ratio of a token's KV to its query; here the
    ratio of the bytes each moves per token per chip (c_kv per chip over the query's), which
    is 2 N_KV / N_H for GQA with KV in the activations' dtype. (miss rate, threshold, pick)."""
    miss = lay.new_tokens / lay.context_length
    q_bytes, _ = message_bytes(m, lay)
    threshold = kv_bytes_per_chip_token(m, lay) / q_bytes
    return miss, threshold, "pass-q" if miss <= threshold else "pass-kv"


# -- memory ---------------------------------------------------------------------------------


def ring_block_tokens(pl: Placement) -> int:
    """A ring block, sized as two of the largest segments (cached and new): a bound on every
    rank's block."""
    sizes = pl.k_hi - pl.k_lo
    return 2 * int(sizes[:, 2:].max()) + 2 * int(sizes[:, :2].max())


def growing_kv(m: ModelSpec, lay: Layout, layers: int, pl: Placement) -> list[int]:
    """Per rank: every token it holds (cached and new segments), in each of ``layers`` layers."""
    c_chip = kv_bytes_per_chip_token(m, lay)
    return [lay.batch * layers * int(held) * c_chip for held in pl.kv_tokens.tolist()]


def sharded_kv(m: ModelSpec, lay: Layout, layers: int) -> list[int]:
    """Decode: each rank's contiguous S / Nd share of every sequence, in ``layers`` layers."""
    c_chip = kv_bytes_per_chip_token(m, lay)
    return [lay.batch * layers * shard * c_chip
            for shard in decode_shard_tokens(lay.context_length, lay.cp)]


def prefill_kv(m: ModelSpec, lay: Layout, layer_type: str, layers: int,
               pl: Placement) -> RankBytes:
    """Every token a rank holds; while a layer computes, two ring blocks (the one attended,
    the one arriving), or under pass-Q two query blocks and the partial outputs of every
    rank's queries, held until the all-to-all sends them home."""
    if lay.policy.prefill_ring == "pass-q":
        q_msg, o_msg = message_bytes(m, lay)
        transient = 2 * int(pl.new_tokens.max()) * q_msg + lay.new_tokens * o_msg
    else:
        transient = 2 * ring_block_tokens(pl) * kv_bytes_per_chip_token(m, lay)
    return RankBytes(growing_kv(m, lay, layers, pl), [lay.batch * transient] * lay.cp)


def decode_kv(m: ModelSpec, lay: Layout, layer_type: str, layers: int) -> list[int]:
    return sharded_kv(m, lay, layers)


KINDS = (AttentionKind(
    FULL_ATTENTION,
    prefill_emitter=prefill_emitter, prefill_comm=prefill_comm,
    decode_emitter=full_emitter, decode_comm=decode_comm,
    prefill_kv=prefill_kv, decode_kv=decode_kv,
    handoff_pairs=lambda m, layer_type, lay_p, lay_d, pl: sharded_pairs(m, lay_p, lay_d, pl),
    pairs_below=lambda m: causal_below, rings=("pass-kv", "pass-q"),
),)
