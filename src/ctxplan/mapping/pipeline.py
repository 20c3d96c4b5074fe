"""Between pipeline stages: the activations of a chunk (prefill) or a micro-batch (decode)
moving from the last layer of stage s to the first of stage s + 1 (docs/mapping.md, "Pipeline
parallelism").

After a layer, every TP chip of a CP rank holds the rank's hidden states in full (the TP
all-reduce). As engines do (Megatron's scatter-gather, SGLang's PP send), each TP chip sends only
its 1 / TP share to the chip in the same position of the next stage (rank i, TP index j to rank
i, TP index j), and the receiving TP group all-gathers the shares. Both are operations with
their fixed costs on the simulated links (:func:`ctxplan.mapping.collectives.start_op`, the
ring all-gather); their bytes are the result's ``pp_comm``. What moves per CP rank is its tokens
x the residual width (hc_mult x hidden for DeepSeek-V4's mHC) x the activation bytes.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctxplan.mapping import ops
from ctxplan.mapping.builder import NONE, GraphBuilder, deps_of
from ctxplan.mapping.collectives import Rows, all_gather, start_op
from ctxplan.mapping.layout import Layout
from ctxplan.model.spec import ModelSpec

IntArray = npt.NDArray[np.int64]


def handover_bytes(m: ModelSpec, lay: Layout, rank_tokens: npt.ArrayLike) -> IntArray:
    """Per chip of a stage (``lay``: the stage's layout): the bytes it sends to the next stage,
    its 1 / TP share of its rank's ``rank_tokens`` (per CP rank) hidden states."""
    per_rank = (np.asarray(rank_tokens, np.int64) * m.residual_width
                * lay.precision.activation_bytes)
    return np.repeat(-(-per_rank // lay.tp), lay.tp)


def emit_handover(b: GraphBuilder, m: ModelSpec, lay: Layout, stage: int, ready: Rows,
                  rank_tokens: npt.ArrayLike, layer: int) -> Rows:
    """The handover from stage ``stage`` to the next (``lay``: one stage's layout; ``ready``:
    per chip of the sending stage, what its share waits for). Returns, per chip of the next
    stage, what its first layer waits for (-1 rows on chips that receive nothing)."""
    w = lay.stage_chips
    nbytes = handover_bytes(m, lay, rank_tokens)
    src_pos = np.flatnonzero(nbytes > 0)
    out = np.full((w, 1), NONE, np.int64)
    if not len(src_pos):
        return out
    senders = stage * w + np.arange(w, dtype=np.int64)
    chips = np.concatenate([senders, senders + w])         # positions: senders, then receivers
    rows = np.full((2 * w, ready.shape[1]), NONE, np.int64)
    rows[:w] = ready
    op = start_op(b, chips, src_pos, src_pos + w, rows, ops.PP_SEND, layer, collective=False)
    sent = b.send(chips[src_pos], chips[src_pos + w], nbytes[src_pos], ops.PP_SEND,
                  deps_of(op[src_pos], op[src_pos + w]), layer=layer)
    out[src_pos, 0] = sent
    if lay.tp == 1:
        return out
    # The receiving TP groups all-gather the shares (ranks that received nothing skip it).
    ranks = np.flatnonzero(nbytes.reshape(lay.cp, lay.tp)[:, 0] > 0)
    groups = (stage + 1) * w + ranks[:, None] * lay.tp + np.arange(lay.tp)[None, :]
    got = all_gather(b, groups, out[groups.ravel() - (stage + 1) * w],
                     nbytes.reshape(lay.cp, lay.tp)[ranks, 0] * lay.tp, layer, ops.PP_ALLGATHER)
    full = np.full((w, got.shape[1]), NONE, np.int64)
    full[groups.ravel() - (stage + 1) * w] = got
    return full


def handover_analytic_bytes(m: ModelSpec, lay: Layout, rank_tokens: npt.ArrayLike) -> int:
    """Closed-form bytes of one handover: the shares sent, and the ring all-gather's
    (TP - 1) / TP of each rank's hidden states on every chip of the receiving TP group."""
    sent = int(handover_bytes(m, lay, rank_tokens).sum())
    per_rank = handover_bytes(m, lay, rank_tokens).reshape(lay.cp, lay.tp)[:, 0] * lay.tp
    gathered = int((per_rank // lay.tp * (lay.tp - 1) * lay.tp).sum()) if lay.tp > 1 else 0
    return sent + gathered


def pp_analytic_bytes(m: ModelSpec, lay: Layout) -> int:
    """Closed-form bytes of every handover of the phase: (pp - 1) per chunk of a prefill (each
    chunk's new tokens per CP rank), per micro-batch of a decode (its sequences' tokens per
    home rank)."""
    if lay.pp == 1:
        return 0
    from ctxplan.mapping.chunking import chunk_layouts
    from ctxplan.mapping.decode_base import decode_pool, tokens_per_step
    from ctxplan.mapping.placement import placement

    stage = lay.stage_layout()
    total = 0
    if lay.is_prefill:
        for c in chunk_layouts(stage):
            tokens = placement(c.context_length, c.cached, c.cp).new_tokens * lay.batch
            total += handover_analytic_bytes(m, c, tokens)
    else:
        from dataclasses import replace

        from ctxplan.mapping.layout import split_even

        q = tokens_per_step(m, lay)
        for size in split_even(lay.batch, min(lay.pp, lay.batch)):
            mb = replace(stage, batch=size)
            total += handover_analytic_bytes(m, mb, decode_pool(m, mb).counts * q)
    return total * (lay.pp - 1)
