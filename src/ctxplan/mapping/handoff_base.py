"""What every kind's KV handoff shares: whose share each decode TP chip takes, which tokens a
prefill rank holds, and the pairs of a cache sharded like full attention's (docs/handoff.md;
the kinds' ``handoff_pairs`` hooks, :mod:`ctxplan.mapping.kinds`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctxplan.mapping.layout import (
    Layout,
    decode_shard_tokens,
    kv_bytes_per_chip_token,
    kv_split,
    split_even,
)
from ctxplan.mapping.placement import Placement
from ctxplan.model.spec import ModelSpec

Pairs = dict[tuple[int, int], int]
"""(prefill chip, decode chip) -> bytes of one layer."""


def sources(split_p: int, split_d: int, tp_p: int, tp_d: int, j_d: int) -> list[int]:
    """The prefill TP indices decode TP chip ``j_d`` takes its share from, when the prefill
    splits the KV heads (or a linear layer's value heads) into ``split_p`` groups over its TP
    chips and the decode into ``split_d``: one chip of each prefill group overlapping the
    decode chip's own (picked by ``j_d`` so the load spreads over the replicas)."""
    g_d = j_d * split_d // tp_d
    lo, hi = g_d / split_d, (g_d + 1) / split_d
    per_group = tp_p // split_p
    return [g_p * per_group + j_d % per_group for g_p in range(split_p)
            if min(hi, (g_p + 1) / split_p) - max(lo, g_p / split_p) > 0]


def kv_sources(m: ModelSpec, lay_p: Layout, lay_d: Layout) -> list[list[int]]:
    """Per decode TP index: the prefill TP indices holding its KV heads' share."""
    return [sources(kv_split(m, lay_p.tp), kv_split(m, lay_d.tp), lay_p.tp, lay_d.tp, j)
            for j in range(lay_d.tp)]


def held_tokens(pl: Placement, lo: int, hi: int) -> npt.NDArray[np.int64]:
    """Per prefill rank: tokens of positions [lo, hi) it holds (cached and new chunks)."""
    inter = np.minimum(pl.k_hi, hi) - np.maximum(pl.k_lo, lo)
    return np.asarray(np.maximum(inter, 0).sum(axis=1), np.int64)


def add(pairs: Pairs, src_tps: list[int], rank_p: int, tp_p: int, dst: int,
        nbytes: int) -> None:
    """Split ``nbytes`` for decode chip ``dst`` evenly over its source TP chips of prefill rank
    ``rank_p`` (integer bytes, none lost)."""
    if nbytes == 0:
        return
    for j_p, part in zip(src_tps, split_even(nbytes, len(src_tps)), strict=True):
        key = (rank_p * tp_p + j_p, dst)
        pairs[key] = pairs.get(key, 0) + part


def sharded_pairs(m: ModelSpec, lay_p: Layout, lay_d: Layout, pl: Placement) -> Pairs:
    """A cache sharded as full attention's in decode: decode rank r holds the contiguous tokens
    [start_r, start_r + S / Nd) of every sequence, each from the prefill rank holding it."""
    S, b = lay_p.context_length, lay_p.batch
    nd, tp_p, tp_d = lay_d.cp, lay_p.tp, lay_d.tp
    src = kv_sources(m, lay_p, lay_d)
    c_d = kv_bytes_per_chip_token(m, lay_d)
    pairs: Pairs = {}
    shards = decode_shard_tokens(S, nd)
    start = 0
    for r in range(nd):
        held = held_tokens(pl, start, start + shards[r])
        start += shards[r]
        for i in np.flatnonzero(held).tolist():
            for j in range(tp_d):
                add(pairs, src[j], i, tp_p, r * tp_d + j, b * int(held[i]) * c_d)
    return pairs
