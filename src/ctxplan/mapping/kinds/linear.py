"""Linear attention (Gated DeltaNet), in both phases.

**Prefill under CP: the state passed chunk to chunk.**

A linear layer keeps no KV: each token updates a recurrent state, so a chunk's outputs depend
on the state the tokens before it left. We pass that state rank to rank in chunk order, a
sequential scan (LASP, Sun et al., arXiv:2404.02882: the intra-chunk work in parallel, the
memory state passed point to point in sequence order), not a parallel prefix scan: for the
delta rule a chunk's effect on the state is affine, S_out = A S_in + B, with A a d_k x d_k
matrix per head as large as the state, so a scan over (A, B) pairs (LASP-2's all-gather,
arXiv:2502.07563, or a Blelloch scan) moves at least twice the state per chunk and composes
d_k^3 matrices at every step, against one state per hop here. What we do keep from the scans
is that only the affine update waits: the heavy work runs before the state arrives. (The
chain's latency grows with Np; docs/mapping.md measures it and says when a log-depth scan over
the (A, B) pairs would pay off.)

Chunk order under the zigzag split is rank 0, 1, ..., Np - 1 (chunks 0 .. Np - 1), then
Np - 1, ..., 0 (chunks Np .. 2 Np - 1): adjacent chunks on one rank (Np - 1's two) form one
segment, so a layer's chain has 2 Np - 1 segments and 2 Np - 2 state hops, each to a ring
neighbour. Per layer:

1. ``qkv_proj``: in_proj_qkvz and in_proj_ba on the rank's new tokens; the depthwise conv1d
   needs the kernel - 1 inputs before each chunk, a halo from the chunk before's holder
   (``halo_send``; a cached prefix's conv state is cached on rank 0, with its state);
2. ``gdn_chunk``: the conv1d and the chunkwise pass of its tokens from a zero state (outputs
   O_0 and the final state B), and for a chunk with an incoming state also A and the
   effective queries Q' (:func:`ctxplan.model.kinds.linear_cp_flops_per_token`);
3. the chain: per segment with an incoming state, ``gdn_state`` S_out = A S_in + B on its
   holder once S_in is in, then ``state_send`` of S_out to the next segment's holder;
4. ``gdn_correct``: O = O_0 + Q' S_in for its chunks with an incoming state;
5. ``out_proj``.
The first segment starts from a zero state (no chain op) unless a cached prefix left a state
(on rank 0, where that prefix's last chunk and the first new chunk are). The final state stays
on rank 0 (the last chunk's), which keeps it for decode.

**Decode.** The recurrent state (and the conv1d's last inputs) of a sequence lives on its home
rank, split over TP by value heads (vLLM shards Gated DeltaNet by heads): ``q_proj``
(in_proj_qkvz, in_proj_ba), ``gdn_step`` (one recurrent step: the state read and written back,
:func:`ctxplan.model.kinds.linear_decode_flops_per_token`), ``out_proj``. No pass-Q, nothing
moves. The handoff sends each sequence's state to its home rank, from the prefill rank that
ends the layer's state chain, once the chain has ended there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctxplan.mapping import collectives as coll
from ctxplan.mapping import ops
from ctxplan.mapping.builder import GraphBuilder, Work, deps_of
from ctxplan.mapping.collectives import Rows, rows_of, scatter_rows
from ctxplan.mapping.decode_base import DecodeEmitter, DecodePool, home_counts, local_comm
from ctxplan.mapping.handoff_base import Pairs, add, sources
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.kinds.base import AttentionKind, HandoffReady, RankBytes
from ctxplan.mapping.layout import Layout
from ctxplan.mapping.placement import Placement, needed_tokens, placement
from ctxplan.mapping.prefill_base import AttentionEmitter, IntArray, PrefillSetup
from ctxplan.model import kinds as costs
from ctxplan.model.linear import attention_linears
from ctxplan.model.spec import LINEAR_ATTENTION, ModelSpec


@dataclass(frozen=True)
class Chain:
    """The state's path through one layer: segments (runs of adjacent new chunks on one rank)
    in position order."""

    holder: IntArray        # per segment: its rank
    tokens: IntArray        # per segment: new tokens (per sequence)
    has_state: IntArray     # per segment: 1 when a state comes in (not the very first)

    @property
    def hops(self) -> int:
        """State messages per layer per TP index: one between consecutive segments."""
        return max(len(self.holder) - 1, 0)


def state_chain(pl: Placement) -> Chain:
    cp = pl.cp
    order = np.concatenate([np.arange(cp), np.arange(cp)[::-1]])   # chunk j's holder
    which = np.concatenate([np.zeros(cp, np.int64), np.ones(cp, np.int64)])
    sizes = (pl.q_hi - pl.q_lo)[order, which]
    holders: list[int] = []
    tokens: list[int] = []
    for rank, size in zip(order.tolist(), sizes.tolist(), strict=True):
        if size == 0:
            continue
        if holders and holders[-1] == rank:
            tokens[-1] += size
        else:
            holders.append(rank)
            tokens.append(size)
    has_state = np.ones(len(holders), np.int64)
    if len(holders) and pl.cached == 0:
        has_state[0] = 0
    return Chain(np.array(holders, np.int64), np.array(tokens, np.int64), has_state)


def conv_needs(m: ModelSpec, pl: Placement) -> IntArray:
    """tokens[k, i]: conv1d inputs rank k sends rank i (off the diagonal): the kernel - 1
    before each chunk. Of the cached prefix only its conv state exists, on rank 0."""
    la = m.linear_attention
    assert la is not None
    k_lo = pl.k_lo.copy()
    k_hi = pl.k_hi.copy()
    k_lo[:, :2] = 0
    k_hi[:, :2] = 0
    k_hi[0, 0] = pl.cached
    starts = np.maximum(pl.q_lo - (la.linear_conv_kernel_dim - 1), 0)
    need = needed_tokens(pl, starts, k_lo, k_hi)
    np.fill_diagonal(need, 0)
    return need


def _sizes(m: ModelSpec, lay: Layout) -> tuple[int, int, int]:
    """(value-head split over TP, state bytes per chip, conv input bytes per token per chip)."""
    la = m.linear_attention
    assert la is not None
    split = min(lay.tp, la.linear_num_value_heads)
    state = -(-costs.linear_recurrent_state_bytes(m) // split)
    conv = -(-la.conv_dim * lay.precision.activation_bytes
             // min(lay.tp, la.linear_num_key_heads))
    return split, state, conv


def linear_emitter(b: GraphBuilder, setup: PrefillSetup,
                   layer_type: str = LINEAR_ATTENTION) -> AttentionEmitter:
    m, lay = setup.m, setup.lay
    la = m.linear_attention
    assert la is not None
    p = lay.precision
    w = p.attention_weights
    act = p.activation_bytes
    batch, tp, n = lay.batch, lay.tp, lay.n_chips
    tokens, chips, rank_of = setup.tokens, setup.chips, setup.rank_of
    split, state_chip, conv_chip = _sizes(m, lay)
    state_b = batch * state_chip
    linears = attention_linears(m, LINEAR_ATTENTION)
    pre = [x for x in linears if x.name != "out_proj"]
    out = [x for x in linears if x.name == "out_proj"]
    chain = state_chain(setup.pl)
    seg_state = chain.has_state.astype(bool)
    # Per rank: tokens of its segments with an incoming state, and its segments.
    stated = np.bincount(chain.holder, weights=chain.tokens * chain.has_state,
                         minlength=lay.cp).astype(np.int64) * batch
    segments = np.bincount(chain.holder, minlength=lay.cp)
    j = np.arange(tp)
    # The conv1d halo, one message per (sender, receiver) per TP index.
    halo = conv_needs(m, setup.pl) * batch
    src_rank, dst_rank = np.nonzero(halo)
    h_src = (src_rank[:, None] * tp + j).ravel()
    h_dst = (dst_rank[:, None] * tp + j).ravel()
    h_bytes = np.repeat(halo[src_rank, dst_rank], tp) * conv_chip
    r = rank_of
    per_token = costs.linear_prefill_flops_per_token(m)
    cp_token = costs.linear_cp_flops_per_token(m)
    key_width = la.linear_num_value_heads * la.linear_key_head_dim   # Q' per token
    chunk_work = Work(
        "matmul", (tokens[r] * per_token + stated[r] * cp_token) / split,
        (tokens[r] * (la.conv_dim + la.value_dim) + stated[r] * key_width) * act / split
        + segments[r] * 2 * state_b, p.attention, m_rows=costs.GDN_CHUNK_SIZE)
    state_work = Work("matmul", batch * costs.linear_state_update_flops(m) / split, 4.0 * state_b,
                      p.attention, m_rows=la.linear_key_head_dim)
    corrected = np.flatnonzero(stated > 0)
    c_chips = (corrected[:, None] * tp + j).ravel()
    cr = rank_of[c_chips]
    correct_work = Work(
        "matmul", stated[cr] * costs.linear_correction_flops_per_token(m) / split,
        stated[cr] * (key_width + 2 * la.value_dim) * act / split
        + segments[cr] * state_b, p.attention, m_rows=costs.GDN_CHUNK_SIZE)

    def emit(layer: int, prev: Rows) -> IntArray:
        proj = b.compute(chips, ops.QKV_PROJ, [ops.norm_work(m.hidden_size, tokens[r], lay),
                                               ops.linear_work(pre, tokens[r], lay, w)],
                         prev, layer=layer)
        deps: Rows | IntArray = proj
        if len(h_src):
            # The conv halo: one grouped point-to-point operation per chip taking part.
            deps = coll.exchange(b, chips, h_src, h_dst, h_bytes, rows_of(proj), layer,
                                 ops.HALO_SEND, collective=False)
        local = b.compute(chips, ops.GDN_CHUNK, [chunk_work], deps, layer=layer)
        # The chain, segment by segment: each waits for the state the one before sent.
        incoming: list[IntArray] = []   # per hop: the sends (one per TP index)
        arrived = None
        for s, holder in enumerate(chain.holder.tolist()):
            here = holder * tp + j
            if seg_state[s]:
                step_deps = local[here] if arrived is None else deps_of(local[here], arrived)
                ready = b.compute(here, ops.GDN_STATE, [state_work], step_deps, layer=layer,
                                  step=s)
            else:
                ready = local[here]
            if s + 1 < len(chain.holder):
                nxt = int(chain.holder[s + 1]) * tp + j
                # One point-to-point operation per hop: its fixed cost on the sender once the
                # state is ready, on the receiver once it is in the layer (its projection),
                # then the transfer.
                ends = np.concatenate([here, nxt])
                op = coll.start_op(b, ends, np.arange(tp), np.arange(tp, 2 * tp),
                                   rows_of(np.concatenate([ready, proj[nxt]])),
                                   ops.STATE_SEND, layer, collective=False, step=s)
                arrived = b.send(here, nxt, state_b, ops.STATE_SEND,
                                 deps_of(op[:tp], op[tp:]), layer=layer, step=s)
                incoming.append(arrived)
        done = local.copy()
        if len(c_chips):
            if incoming:
                hop_dst = (chain.holder[1:, None] * tp + j).ravel()
                got = scatter_rows(n, hop_dst, np.concatenate(incoming))[c_chips]
                c_deps = deps_of(local[c_chips], got)
            else:
                c_deps = local[c_chips]
            done[c_chips] = b.compute(c_chips, ops.GDN_CORRECT, [correct_work], c_deps,
                                      layer=layer)
        return b.compute(chips, ops.O_PROJ, [ops.linear_work(out, tokens[r], lay, w)], done,
                         layer=layer)

    return emit


def linear_comm(m: ModelSpec, lay: Layout, layer_type: str, layers: int) -> KindComm:
    """State hops and conv halo: b * L * tp * (hops * state_chip + halo inputs * conv_chip)."""
    pl = placement(lay.context_length, lay.cached, lay.cp)
    chain = state_chain(pl)
    halo = conv_needs(m, pl)
    _, state_chip, conv_chip = _sizes(m, lay)
    nbytes = lay.batch * layers * lay.tp * (chain.hops * state_chip
                                            + int(halo.sum()) * conv_chip)
    return KindComm(layer_type, "state-chain", layers, chain.hops,
                    lay.tp * (chain.hops + int((halo > 0).sum())), nbytes)


# -- decode ---------------------------------------------------------------------------------


def linear_state_bytes_per_chip(m: ModelSpec, tp: int) -> int:
    """One sequence's state of one linear-attention layer on one TP chip: the value heads are
    split over the TP group (vLLM shards Gated DeltaNet by heads), replicated beyond them."""
    la = m.linear_attention
    assert la is not None
    return -(-costs.linear_state_bytes(m) // min(tp, la.linear_num_value_heads))


def decode_emitter(b: GraphBuilder, m: ModelSpec, lay: Layout, pool: DecodePool,
                   layer_type: str = LINEAR_ATTENTION) -> DecodeEmitter:
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
    tokens = pool.home_tokens
    # The step reads the state and writes it back, reads the projected inputs (the conv1d's
    # channels) and writes the output, per token, on its share of the value heads.
    step = Work("memory", tokens * costs.linear_decode_flops_per_token(m) / split,
                seqs * 2 * state + tokens * (la.conv_dim + la.value_dim) * act / split,
                p.attention)

    def emit(layer: int, prev: Rows) -> Rows:
        proj = b.compute(home, ops.Q_PROJ, [ops.norm_work(m.hidden_size, tokens, lay),
                                            ops.linear_work(pre, tokens, lay, w)],
                         prev[home], layer=layer)
        done = b.compute(home, ops.GDN_STEP, [step], proj, layer=layer)
        o_ready = b.compute(home, ops.O_PROJ, [ops.linear_work(out, tokens, lay, w)], done,
                            layer=layer)
        return pool.home_rows(prev, o_ready)

    return emit


# -- memory and handoff ---------------------------------------------------------------------


def prefill_kv(m: ModelSpec, lay: Layout, layer_type: str, layers: int,
               pl: Placement) -> RankBytes:
    """One state per sequence on every rank (each carries the running state of its chunks: a
    bound that over-counts by the states handed on, < 0.1 % of a chip); while a layer
    computes, a state in and one out."""
    state = linear_state_bytes_per_chip(m, lay.tp)
    return RankBytes([lay.batch * layers * state] * pl.cp, [lay.batch * 2 * state] * pl.cp)


def decode_kv(m: ModelSpec, lay: Layout, layer_type: str, layers: int) -> list[int]:
    """One state per sequence, on its home rank."""
    state = linear_state_bytes_per_chip(m, lay.tp)
    return [layers * homes * state for homes in home_counts(lay.batch, lay.cp)]


def handoff_pairs(m: ModelSpec, layer_type: str, lay_p: Layout, lay_d: Layout,
                  pl: Placement) -> Pairs:
    """Each sequence's state (recurrent and conv) to its home rank, from the prefill rank that
    ends the layer's state chain (the one holding the sequence's last chunk), which holds the
    final state; each decode TP chip its value heads' share."""
    la = m.linear_attention
    assert la is not None
    nd, tp_p, tp_d = lay_d.cp, lay_p.tp, lay_d.tp
    homes = home_counts(lay_p.batch, nd)
    heads = la.linear_num_value_heads
    src = [sources(min(tp_p, heads), min(tp_d, heads), tp_p, tp_d, j) for j in range(tp_d)]
    state = linear_state_bytes_per_chip(m, tp_d)
    holder = int(state_chain(pl).holder[-1])   # ends the chain: the final state
    pairs: Pairs = {}
    for r in range(nd):
        for j in range(tp_d):
            add(pairs, src[j], holder, tp_p, r * tp_d + j, homes[r] * state)
    return pairs


KINDS = (AttentionKind(
    LINEAR_ATTENTION,
    prefill_emitter=linear_emitter, prefill_comm=linear_comm,
    decode_emitter=decode_emitter, decode_comm=local_comm,
    prefill_kv=prefill_kv, decode_kv=decode_kv, handoff_pairs=handoff_pairs,
    # the state is final once the chain has ended on its holder: its last gdn_state of the
    # layer, or its gdn_chunk when no state came in
    handoff_ready=HandoffReady((ops.GDN_STATE, ops.GDN_CHUNK), last=True),
),)
