"""Where a prefill's tokens sit on the CP ranks, and the (query, key) pairs between ranks.

A prefill of S = P + T tokens computes the T new tokens; the first P (a cached prefix) already
have their KV in the cache (docs/mapping.md, "A cached prefix").

* **New tokens**: positions [P, S) in 2 Np segments (``split_even``: larger ones first); rank i
  holds segments i and 2 Np - 1 - i (Meta's causal load balancing, arXiv:2411.01783).
* **The cached prefix** sits where the prefill that computed it left it: the same zigzag over
  its own 2 Np segments. So rank 0 holds the prefix's last tokens, next to the new segment 0 it
  also holds (a window or a state that crosses P stays on rank 0).

Each rank's queries are its two new segments; its keys are its two cached and two new
segments. ("Segment" is a CP rank's piece; a "chunk" is a chunked prefill's forward pass,
mapping/chunking.py, or a block of Llama 4's chunked attention, its published name.)
Pair counts between ranges use each attention kind's mask (its ``pairs_below`` hook, the numpy
form of :func:`ctxplan.model.kinds.pairs_below`), exactly, and are tested against them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctxplan.mapping.layout import split_even

IntArray = npt.NDArray[np.int64]


def _zigzag(total: int, cp: int, offset: int) -> tuple[IntArray, IntArray]:
    """(lo, hi) of rank i's segments i and 2cp - 1 - i of ``total`` tokens from ``offset``:
    arrays of shape (cp, 2)."""
    sizes = np.array(split_even(total, 2 * cp), np.int64)
    starts = offset + np.concatenate(([0], np.cumsum(sizes)[:-1]))
    ranks = np.arange(cp)
    which = np.stack([ranks, 2 * cp - 1 - ranks], axis=1)
    return starts[which], starts[which] + sizes[which]


@dataclass(frozen=True)
class Placement:
    """Token positions of each CP rank (absolute positions in the sequence)."""

    cp: int
    cached: int          # P: positions [0, P) have their KV cached
    new: int             # T: positions [P, P + T) are computed
    q_lo: IntArray       # (cp, 2): the rank's new segments (its queries)
    q_hi: IntArray
    k_lo: IntArray       # (cp, 4): cached segment a, cached segment b, new segment a, new segment b
    k_hi: IntArray

    @property
    def new_tokens(self) -> IntArray:
        """Per rank: new tokens (queries)."""
        return np.asarray((self.q_hi - self.q_lo).sum(axis=1), np.int64)

    @property
    def cached_tokens(self) -> IntArray:
        return np.asarray((self.k_hi[:, :2] - self.k_lo[:, :2]).sum(axis=1), np.int64)

    @property
    def kv_tokens(self) -> IntArray:
        """Per rank: tokens whose KV it holds (cached and new)."""
        return np.asarray((self.k_hi - self.k_lo).sum(axis=1), np.int64)


def placement(context_length: int, cached: int, cp: int) -> Placement:
    if not 0 <= cached < context_length:
        raise ValueError(f"cached tokens must be in [0, {context_length}), got {cached}")
    new = context_length - cached
    q_lo, q_hi = _zigzag(new, cp, cached)
    c_lo, c_hi = _zigzag(cached, cp, 0)
    return Placement(cp, cached, new, q_lo, q_hi, np.concatenate([c_lo, q_lo], axis=1),
                     np.concatenate([c_hi, q_hi], axis=1))


# -- pair counts (numpy mirrors of ctxplan.model.kinds) -----------------------------------------
# Each attention kind gives its mask as a ``PairsBelow`` (its ``pairs_below`` hook,
# :mod:`ctxplan.mapping.kinds`); the pair counts between ranges follow by inclusion-exclusion.

PairsBelow = Callable[[IntArray, IntArray], IntArray]
"""below(q_end, k_end): (query, key) pairs with query < q_end and key < k_end, element by
element (:func:`ctxplan.model.kinds.pairs_below` of one kind)."""


def _capped_prefix(n: IntArray, cap: int) -> IntArray:
    return np.where(n <= cap, n * (n + 1) // 2, cap * (cap + 1) // 2 + (n - cap) * cap)


def _chunked_prefix(n: IntArray, chunk: int) -> IntArray:
    full, rest = np.divmod(n, chunk)
    return full * (chunk * (chunk + 1) // 2) + rest * (rest + 1) // 2


def causal_below(q: IntArray, k: IntArray) -> IntArray:
    """Causal pairs (full attention, the DSA indexer)."""
    below = q - np.minimum(k, q)
    return q * (q + 1) // 2 - below * (below + 1) // 2


def sliding_below(w: int) -> PairsBelow:
    """Pairs of a sliding window of w keys (itself included)."""

    def below(q: IntArray, k: IntArray) -> IntArray:
        return _capped_prefix(q, w) - _capped_prefix(q - np.minimum(k, q), w)

    return below


def chunked_below(c: int) -> PairsBelow:
    """Pairs of chunked attention with chunks of c tokens."""

    def below(q: IntArray, k: IntArray) -> IntArray:
        start = k // c * c
        partial = _chunked_prefix(k, c) + np.maximum(np.minimum(q, start + c) - k, 0) * (
            k - start)
        return np.where(k >= q, _chunked_prefix(q, c), partial)

    return below


def entry_below(r: int) -> PairsBelow:
    """(query, entry) pairs of DeepSeek-V4's compressed entries of r tokens: entry j sits at its
    last token's position e = (j + 1) r - 1 (the rank holding that token holds the entry) and
    a query at p sees it when e <= p. Over the n = min(K, Q) // r entries below min(K, Q):
    sum_j (Q - e_j) = n (Q + 1) - r n (n + 1) / 2 (causal pairs counted at every r-th key)."""

    def below(q: IntArray, k: IntArray) -> IntArray:
        n = np.minimum(k, q) // r
        return n * (q + 1) - r * n * (n + 1) // 2

    return below


def block_pairs(below: PairsBelow, q_lo: npt.ArrayLike, q_hi: npt.ArrayLike,
                k_lo: npt.ArrayLike, k_hi: npt.ArrayLike) -> IntArray:
    """Pairs between queries [q_lo, q_hi) and keys [k_lo, k_hi) under the mask ``below``,
    element by element (int64; S <= 2^31 keeps S^2 / 2 below 2^62)."""
    q0, q1, k0, k1 = (np.asarray(x, np.int64) for x in (q_lo, q_hi, k_lo, k_hi))
    return below(q1, k1) - below(q0, k1) - below(q1, k0) + below(q0, k0)


def rank_pairs(below: PairsBelow, pl: Placement) -> IntArray:
    """pairs[i, k]: pairs of rank i's queries with rank k's keys (per sequence) under the mask
    ``below``."""
    q_lo, q_hi = pl.q_lo[:, None, :, None], pl.q_hi[:, None, :, None]
    k_lo, k_hi = pl.k_lo[None, :, None, :], pl.k_hi[None, :, None, :]
    return np.asarray(block_pairs(below, q_lo, q_hi, k_lo, k_hi).sum(axis=(2, 3)), np.int64)


def needed_tokens(pl: Placement, starts: IntArray, k_lo: IntArray | None = None,
                  k_hi: IntArray | None = None) -> IntArray:
    """tokens[k, i]: tokens rank k holds that rank i's queries need from before their segments,
    when segment x of rank i needs the keys [starts[i, x], start of x): each needed token once
    (the two segments' needs may overlap). The diagonal is what rank i holds itself; the rest is
    the halo it receives. Key ranges default to the placement's (cached and new segments)."""
    k_lo = pl.k_lo if k_lo is None else k_lo
    k_hi = pl.k_hi if k_hi is None else k_hi
    has = pl.q_hi > pl.q_lo
    lo = np.where(has, starts, 0)
    hi = np.where(has, pl.q_lo, 0)       # an empty segment needs nothing

    def overlap(a: IntArray, b: IntArray) -> IntArray:
        # (k, i): keys of rank k (all its ranges) inside [a[i], b[i])
        inter = (np.minimum(k_hi[:, None, :], b[None, :, None])
                 - np.maximum(k_lo[:, None, :], a[None, :, None]))
        return np.asarray(np.maximum(inter, 0).sum(axis=2), np.int64)

    both_lo = np.maximum(lo[:, 0], lo[:, 1])
    both_hi = np.minimum(hi[:, 0], hi[:, 1])
    return (overlap(lo[:, 0], hi[:, 0]) + overlap(lo[:, 1], hi[:, 1])
            - overlap(both_lo, np.maximum(both_hi, both_lo)))
