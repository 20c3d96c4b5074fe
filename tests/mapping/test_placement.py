"""Where prefill's tokens sit (new tokens zigzag, a cached prefix zigzag as its own prefill left
it), the pair counts between ranks against the model's scalar functions, and the halo each
rank needs against a token-by-token count."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ctxplan.mapping.kinds import kind_of
from ctxplan.mapping.kinds.window import window_starts
from ctxplan.mapping.placement import (
    PairsBelow,
    block_pairs,
    causal_below,
    needed_tokens,
    placement,
    rank_pairs,
)
from ctxplan.model import kinds
from ctxplan.model.spec import (
    CHUNKED_ATTENTION,
    FULL_ATTENTION,
    INDEXED_ATTENTION,
    SLIDING_ATTENTION,
    ModelSpec,
)
from tests.model.family_specs import DEEPSEEK_V32, GPT_OSS_20B, LLAMA4_SCOUT

SLIDING = dataclasses.replace(GPT_OSS_20B, sliding_window=9)
CHUNKED = dataclasses.replace(LLAMA4_SCOUT, attention_chunk_size=7)
KINDS = [(SLIDING, FULL_ATTENTION), (SLIDING, SLIDING_ATTENTION),
         (CHUNKED, CHUNKED_ATTENTION), (DEEPSEEK_V32, INDEXED_ATTENTION)]


def mask(m: ModelSpec, layer_type: str) -> PairsBelow:
    """The kind's (query, key) mask, as the registry gives it."""
    below = kind_of(layer_type).pairs_below
    assert below is not None
    return below(m)


def holder(pl, position: int) -> int:
    """The rank holding a token, from the placement's key ranges."""
    hits = [(i, r) for i in range(pl.cp) for r in range(4)
            if pl.k_lo[i, r] <= position < pl.k_hi[i, r]]
    assert len(hits) == 1, (position, hits)
    return hits[0][0]


@given(st.integers(1, 200), st.integers(0, 199), st.integers(1, 9))
def test_every_token_sits_once_and_new_chunks_zigzag(S: int, P: int, cp: int) -> None:
    P = min(P, S - 1)
    pl = placement(S, P, cp)
    for position in range(S):
        holder(pl, position)          # exactly one rank holds every token
    assert pl.kv_tokens.sum() == S and pl.new_tokens.sum() == S - P
    assert pl.cached_tokens.sum() == P
    # rank i's queries are two of the 2 cp new chunks, which differ by at most one token
    chunk = (S - P) // (2 * cp)
    assert all(chunk <= n <= chunk + 1 for n in (pl.q_hi - pl.q_lo).ravel())
    # with at least one token per chunk, rank 0 holds the prefix's end, the first new token
    # and the last position
    if 2 * cp <= P:
        assert holder(pl, P - 1) == 0
    if 2 * cp <= S - P:
        assert holder(pl, P) == 0 == holder(pl, S - 1)


@given(st.sampled_from(KINDS), st.integers(1, 120), st.integers(0, 119), st.integers(1, 6))
def test_rank_pairs_equal_the_model_and_cover_the_kind(case: tuple[ModelSpec, str], S: int,
                                                       P: int, cp: int) -> None:
    m, layer_type = case
    P = min(P, S - 1)
    pl = placement(S, P, cp)
    pairs = rank_pairs(mask(m, layer_type), pl)
    for i in range(cp):
        for k in range(cp):
            want = sum(kinds.block_pairs(m, layer_type, int(a), int(b), int(c), int(d))
                       for a, b in zip(pl.q_lo[i], pl.q_hi[i], strict=True)
                       for c, d in zip(pl.k_lo[k], pl.k_hi[k], strict=True))
            assert pairs[i, k] == want
    # every pair of the new queries with every key, exactly once
    if layer_type == INDEXED_ATTENTION:
        total = kinds.indexer_pairs(m, layer_type, S - P, P)
    else:
        total = kinds.attended_pairs(m, layer_type, S - P, P)
    assert pairs.sum() == total


def test_pair_counts_are_exact_at_two_billion_tokens() -> None:
    S = 2**31
    got = block_pairs(causal_below, np.int64(0), np.int64(S), np.int64(0), np.int64(S))
    assert int(got) == S * (S + 1) // 2


@given(st.sampled_from([(SLIDING, SLIDING_ATTENTION), (CHUNKED, CHUNKED_ATTENTION)]),
       st.integers(1, 150), st.integers(0, 149), st.integers(1, 6))
def test_needed_tokens_equal_a_token_by_token_count(case: tuple[ModelSpec, str], S: int,
                                                    P: int, cp: int) -> None:
    m, layer_type = case
    P = min(P, S - 1)
    pl = placement(S, P, cp)
    need = needed_tokens(pl, window_starts(m, layer_type, pl.q_lo))
    for i in range(cp):
        wanted: set[int] = set()
        for lo, hi in zip(pl.q_lo[i].tolist(), pl.q_hi[i].tolist(), strict=True):
            if hi > lo:
                wanted |= set(range(kinds.window_start(m, layer_type, lo), lo))
        for k in range(cp):
            assert need[k, i] == sum(1 for t in wanted if holder(pl, t) == k)


def test_a_short_window_needs_w_minus_one_keys_from_each_ring_neighbour() -> None:
    # the zigzag puts the tokens before rank i's first chunk on rank i - 1 and those before
    # its second chunk on rank i + 1; rank cp - 1's two chunks are adjacent
    w, cp, S = 9, 5, 1000
    m = dataclasses.replace(GPT_OSS_20B, sliding_window=w)
    pl = placement(S, 0, cp)
    need = needed_tokens(pl, window_starts(m, SLIDING_ATTENTION, pl.q_lo))
    halo = need - np.diag(np.diag(need))
    expected = np.zeros((cp, cp), np.int64)
    for i in range(1, cp):
        expected[i - 1, i] = w - 1       # the tail of chunk i - 1, for chunk i
        expected[i, i - 1] = w - 1       # the tail of chunk 2cp - 1 - i, for chunk 2cp - i
    assert (halo == expected).all()
    assert halo.sum() == 2 * (cp - 1) * (w - 1)
    assert need[cp - 1, cp - 1] == w - 1  # rank cp - 1: its own first chunk's tail
