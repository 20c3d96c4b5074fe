"""What every decode attention emitter shares: the pool's arrays, the emitter's type
(:data:`DecodeEmitter`, what each kind's ``decode_emitter`` hook returns), the queries sent to
every shard, the partial attention, the All2All of partial outputs and the merge.

Sequence k of the batch has its home on rank k mod Nd (round robin, :func:`home_counts`); its
new token is projected there, and whatever the attention kind, its output comes back there for
``o_proj`` and the FFN. Each rank holds a contiguous S / Nd share of every sequence's growing
KV (full attention, DSA); the kinds whose cache does not grow with S keep it on the home
(docs/mapping.md, "Decode, per attention kind").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctxplan.mapping import ops
from ctxplan.mapping.attention import AttentionShapes
from ctxplan.mapping.builder import NONE, GraphBuilder, IdArray, Work
from ctxplan.mapping.collectives import Rows, exchange
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.layout import Layout, decode_shard_tokens
from ctxplan.model.attention import attention_dims
from ctxplan.model.spec import ModelSpec

LOCAL = "local"   # the decode pattern of the kinds decoded on the home: nothing moves
LSE_BYTES = 4  # one FP32 log-sum-exp per head per query travels with each partial output

IntArray = npt.NDArray[np.int64]

DecodeEmitter = Callable[[int, Rows], Rows]
"""emit(layer, rows each chip waits for) -> rows per chip its FFN half waits for (the home
chips: their ``o_proj``)."""


def home_counts(batch: int, cp: int) -> list[int]:
    """Sequences whose home is each rank (sequence k lives on rank k mod cp)."""
    return [len(range(h, batch, cp)) for h in range(cp)]


def tokens_per_step(m: ModelSpec, lay: Layout) -> int:
    """Tokens each sequence's step computes: 1, or with ``mtp_speculation`` (a model with MTP
    layers, DeepSeek-V4) 1 + its MTP layers: the target model verifies the last token and
    the drafts together (docs/mapping.md, "Speculative decoding with the MTP layer")."""
    if lay.policy.mtp_speculation and m.mtp_layer_types:
        return 1 + len(m.mtp_layer_types)
    return 1


def messages(m: ModelSpec, lay: Layout) -> tuple[int, int]:
    """Bytes per query token per TP chip of a pass-Q message and of a merge message."""
    dims = attention_dims(m, lay.mla_mode or "standard")
    heads = dims.q_heads // lay.tp
    act = lay.precision.activation_bytes
    return heads * dims.qk_dim * act, heads * (dims.v_dim * act + LSE_BYTES)


@dataclass(frozen=True)
class DecodePool:
    """The decode pool's fixed arrays, shared by every layer."""

    n_rank: int
    tp: int
    chips: IntArray        # every chip
    rank: IntArray         # rank of each chip
    counts: IntArray       # sequences per home rank
    shards: IntArray       # KV tokens per sequence held by each rank
    home_chips: IntArray   # chips of home ranks (rank-major)
    home_seqs: IntArray    # sequences of each home chip
    q_msg: int             # bytes per sequence per TP chip (pass-Q: its tokens' queries)
    o_msg: int             # bytes per sequence per TP chip (its tokens' outputs + LSE)
    q: int = 1             # tokens per sequence per step (speculation: 1 + the drafts)

    @property
    def home_tokens(self) -> IntArray:
        """Tokens of each home chip (its sequences' q each): the projections' and FFN's rows."""
        return self.home_seqs * self.q

    @property
    def tokens(self) -> IntArray:
        """Tokens per home rank."""
        return self.counts * self.q

    def chip(self, rank: IntArray, like: IntArray) -> IntArray:
        """The chip of ``rank`` with the TP index of chip ``like``."""
        return rank * self.tp + like % self.tp

    def home_rows(self, rows: Rows, at_home: IdArray) -> Rows:
        """``rows`` with each home chip's row replaced by its task in ``at_home`` (aligned
        with :attr:`home_chips`): what the FFN half waits for."""
        out = np.full((len(self.chips), max(rows.shape[1], 1)), NONE, np.int64)
        out[:, :rows.shape[1]] = rows
        out[self.home_chips] = NONE
        out[self.home_chips, 0] = at_home
        return out


def decode_pool(m: ModelSpec, lay: Layout) -> DecodePool:
    n_rank, tp = lay.cp, lay.tp
    counts = np.array(home_counts(lay.batch, n_rank), np.int64)
    homes = np.flatnonzero(counts)
    chips = np.arange(lay.n_chips, dtype=np.int64)
    home_chips = (homes[:, None] * tp + np.arange(tp)[None, :]).ravel()
    q = tokens_per_step(m, lay)
    q_msg, o_msg = messages(m, lay)
    return DecodePool(n_rank, tp, chips, chips // tp, counts,
                      np.array(decode_shard_tokens(lay.context_length, n_rank), np.int64),
                      home_chips, np.repeat(counts[homes], tp), q * q_msg, q * o_msg, q)


def broadcast_queries(b: GraphBuilder, pool: DecodePool, q_ready: Rows, q_bytes: int,
                      layer: int) -> Rows:
    """One collective: each home chip sends its sequences' queries (``q_bytes`` per sequence)
    to the chip of the same TP index on every other rank. Returns rows per chip."""
    n_rank = pool.n_rank
    src = np.repeat(pool.home_chips, n_rank - 1)
    hops = np.tile(np.arange(1, n_rank), len(pool.home_chips))
    dst = pool.chip((pool.rank[src] + hops) % n_rank, src)
    return exchange(b, pool.chips, src, dst, pool.counts[pool.rank[src]] * q_bytes, q_ready,
                    layer, ops.PASS_Q_SEND)


def attention_parts(lay: Layout, att: AttentionShapes, pool: DecodePool, seqs: npt.ArrayLike,
                    keys: npt.ArrayLike, *, key_bytes: int | None = None,
                    lse: bool = True) -> list[Work]:
    """Attention of ``seqs`` sequences' new queries over ``keys`` cached tokens of each (arrays
    aligned with the chips): one kernel, plus (standard MLA) the up-projection of those keys'
    latents, which that mode pays every step. Reads ``key_bytes`` per key (default the KV tier
    per chip), the queries, and writes the outputs with (``lse``: a partial to merge) or
    without their log-sum-exp."""
    seqs = np.asarray(seqs, np.int64)
    kv_tokens = seqs * np.asarray(keys, np.int64)
    per_key = att.c_chip if key_bytes is None else key_bytes
    out = pool.o_msg if lse else pool.o_msg - pool.q * att.heads * LSE_BYTES
    # each of a sequence's q query tokens attends its keys, read once
    parts = [Work("attention", kv_tokens * att.pair_flops * pool.q,
                  kv_tokens * per_key + seqs * (pool.q_msg + out),
                  lay.precision.attention,
                  m_rows=seqs, kv_tokens=keys, q_rows=att.q_per_kv * pool.q, causal=False,
                  head_dim=att.head_dim)]
    if att.standard_mla:
        parts.append(ops.linear_work(att.kv_b, kv_tokens, lay, lay.precision.attention_weights))
    return parts


def return_partials(b: GraphBuilder, pool: DecodePool, done: Rows, layer: int,
                    senders: IntArray | None = None) -> Rows:
    """The All2All: each chip of a sending rank (default: every rank) sends the partial output
    + LSE of every other home's queries to that home (the chip of the same TP index), one
    collective operation per chip taking part."""
    n_rank = pool.n_rank
    src_ranks = np.arange(n_rank) if senders is None else senders
    src_chips = pool.chips[np.isin(pool.rank, src_ranks)]
    src = np.repeat(src_chips, n_rank - 1)
    k = np.tile(np.arange(1, n_rank), len(src_chips))
    dst_rank = (pool.rank[src] + k) % n_rank
    keep = pool.counts[dst_rank] > 0
    src, dst_rank = src[keep], dst_rank[keep]
    dst = pool.chip(dst_rank, src)
    return exchange(b, pool.chips, src, dst, pool.counts[dst_rank] * pool.o_msg, done,
                    layer, ops.MERGE_SEND)


def merge(b: GraphBuilder, lay: Layout, att: AttentionShapes, pool: DecodePool, deps: Rows,
          layer: int, parts: int | None = None) -> IdArray:
    """The merge on each home chip: ``parts`` (default Nd) partial outputs rescaled by
    exp(lse_i - lse) and summed, a memory-bound kernel of 4 * parts * heads * v_dim FLOPs per
    query."""
    seqs = pool.home_seqs
    n = pool.n_rank if parts is None else parts
    work = Work("memory", 4.0 * n * seqs * pool.q * att.heads * att.dims.v_dim,
                n * seqs * pool.o_msg, lay.precision.attention)
    return b.compute(pool.home_chips, ops.ATTN_MERGE, [work], deps, layer=layer)


def local_comm(m: ModelSpec, lay: Layout, layer_type: str, layers: int) -> KindComm:
    """A kind decoded on each sequence's home rank (its cache does not grow with S): nothing
    moves."""
    return KindComm(layer_type, LOCAL, layers, 0, 0, 0)
