"""What every prefill attention emitter shares: the pool's arrays, the CP ring and the emitter's
type (:data:`AttentionEmitter`, what each kind's ``prefill_emitter`` hook returns).

:class:`PrefillSetup` holds, once per graph, where the tokens are (:mod:`placement`) and the
per-chip arrays the emitters index. :func:`emit_ring` writes one ring of Np steps per TP index:
at step s rank i computes on the block that came from rank i - s while (no dependency between
the two) it sends that block on to rank i + 1; step s + 1 waits for its own compute, its own
send (the buffer is free again) and the block from its predecessor (the spec's overlap scope:
one step). Each send with its receive is one SendRecv operation
(:func:`ctxplan.mapping.collectives.sendrecv`, docs/mapping.md "Operations"). The pass-KV ring
(full attention, DSA) moves KV blocks around it, prefill's pass-Q moves query blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ctxplan.mapping import ops
from ctxplan.mapping.attention import AttentionShapes
from ctxplan.mapping.builder import GraphBuilder, Work, deps_of
from ctxplan.mapping.collectives import Rows, rows_of, sendrecv
from ctxplan.mapping.layout import Layout
from ctxplan.mapping.placement import PairsBelow, Placement, placement, rank_pairs
from ctxplan.model.spec import ModelSpec

IntArray = npt.NDArray[np.int64]

AttentionEmitter = Callable[[int, Rows], IntArray]
"""emit(layer, rows each chip waits for) -> per chip, the task after which its attention half
(output projection included) is done."""


@dataclass(frozen=True)
class PrefillSetup:
    """The pool of one prefill graph: layout, token placement and per-chip indices."""

    m: ModelSpec
    lay: Layout
    pl: Placement
    chips: IntArray = field(init=False)
    rank_of: IntArray = field(init=False)     # per chip: its CP rank
    ranks: IntArray = field(init=False)
    tokens: IntArray = field(init=False)      # per rank: b * new tokens (queries, FFN rows)
    kv_tokens: IntArray = field(init=False)   # per rank: b * tokens of KV held (cached + new)
    cached: IntArray = field(init=False)      # per rank: b * cached tokens held

    def __post_init__(self) -> None:
        lay, pl, batch = self.lay, self.pl, self.lay.batch
        chips = np.arange(lay.n_chips)
        for name, value in (("chips", chips), ("rank_of", chips // lay.tp),
                            ("ranks", np.arange(lay.cp)), ("tokens", pl.new_tokens * batch),
                            ("kv_tokens", pl.kv_tokens * batch),
                            ("cached", pl.cached_tokens * batch)):
            object.__setattr__(self, name, value)

    def pairs(self, name: str, below: PairsBelow) -> IntArray:
        """pairs[i, k] of rank i's queries with rank k's keys, per sequence, under the mask
        ``below`` (a kind's ``pairs_below``), cached under ``name``."""
        key = f"_pairs_{name}"
        got = self.__dict__.get(key)
        if got is None:
            got = rank_pairs(below, self.pl)
            object.__setattr__(self, key, got)
        return got


def prefill_setup(m: ModelSpec, lay: Layout) -> PrefillSetup:
    return PrefillSetup(m, lay, placement(lay.context_length, lay.cached, lay.cp))


def kv_and_query_reads(att: AttentionShapes, lay: Layout) -> tuple[float, float]:
    """HBM bytes attention reads per key (the per-head K and V up-projected from the latent in
    standard MLA, else the cached KV itself) and per query (its q and output)."""
    act = lay.precision.activation_bytes
    dims = att.dims
    q_read = att.heads * (dims.qk_dim + dims.v_dim) * act
    return (q_read if att.standard_mla else att.c_chip), q_read


StepWork = Callable[[int, IntArray], list[Work]]
"""step_work(step, k) -> the compute parts of that step on every rank (k[i]: the rank whose
block rank i holds at this step)."""


def emit_ring(b: GraphBuilder, setup: PrefillSetup, layer: int, start: Rows, *,
              step_work: StepWork, send_bytes: Callable[[IntArray], npt.ArrayLike],
              compute_kind: str, send_kind: str, last_kind: str | None = None) -> IntArray:
    """One ring of Np steps per TP index (all in parallel); ``start`` (rows per chip) is what
    step 0 waits for. Returns, per chip, its last step's compute task. ``last_kind`` names the
    last step's op when it differs (DSA: the last scores, the selection and the sparse
    attention run as one op)."""
    lay = setup.lay
    n_rank, tp = lay.cp, lay.tp
    ranks = setup.ranks
    prv = (ranks - 1) % n_rank
    nxt = (ranks + 1) % n_rank
    done = np.empty(lay.n_chips, np.int64)
    for j in range(tp):  # one ring per TP index (KV-head group; MLA: latent copy)
        ring = ranks * tp + j
        deps: Rows = start[ring]
        incoming = None   # the transfers that brought the blocks held now (step >= 1)
        for step in range(n_rank):
            k = (ranks - step) % n_rank  # the block held now came from rank k
            last = step == n_rank - 1
            kind = last_kind if last and last_kind is not None else compute_kind
            a = b.compute(ring, kind, step_work(step, k), deps, layer=layer, step=step)
            s = None
            if not last:
                # The send and the compute of a step share their inputs and do not wait for
                # each other (emitting every rank's compute, then every send, gives the
                # schedule a rank issuing "compute i, send i" would: a compute and a send hold
                # no common resource). The send with the receive from the predecessor is one
                # SendRecv operation: its fixed cost after the step's inputs, the transfer
                # once both ends have paid theirs.
                _, s = sendrecv(b, ring, nxt, send_bytes(k), send_kind, deps, layer, step)
            if incoming is not None:
                # A received block lives on its receiver from the transfer's start until the
                # step that attends to it and forwards it has done both.
                b.buffer(ring, send_bytes(k), incoming, a if s is None else deps_of(a, s))
            if last:
                done[ring] = a
                break
            assert s is not None
            incoming = s[prv]
            deps = deps_of(s[prv], a, s)
    return done


def ring_attention(b: GraphBuilder, setup: PrefillSetup, att: AttentionShapes, *,
                   step_work: StepWork, send_bytes: Callable[[IntArray], npt.ArrayLike],
                   compute_kind: str, send_kind: str, last_kind: str | None = None,
                   after_ring: Callable[[int, IntArray], IntArray | Rows] | None = None
                   ) -> AttentionEmitter:
    """The attention half of a kind that runs a ring (:func:`emit_ring`): ``qkv_proj`` on the
    rank's new tokens, the ring, then (``after_ring(layer, done)``: what the ring's outputs go
    through first, e.g. pass-Q's all-to-all and merge) ``o_proj``."""
    m, lay = setup.m, setup.lay
    chips, tokens = setup.chips, setup.tokens[setup.rank_of]

    def emit(layer: int, prev: Rows) -> IntArray:
        qkv = b.compute(chips, ops.QKV_PROJ, att.projection(m, tokens, lay), prev, layer=layer)
        done = emit_ring(b, setup, layer, rows_of(qkv), step_work=step_work,
                         send_bytes=send_bytes, compute_kind=compute_kind, send_kind=send_kind,
                         last_kind=last_kind)
        ready = done if after_ring is None else after_ring(layer, done)
        return b.compute(chips, ops.O_PROJ, att.output(tokens, lay), ready, layer=layer)

    return emit
