"""DeepSeek-V4's decode with the entries sharded over Nd ranks (mapping/kinds/compressed_decode.py,
docs/mapping.md "DeepSeek-V4"): the bytes equal closed forms written here from the model's
numbers, the FLOPs add up to the model layer's decode counts, the window runs on the home and is
merged with the shards' partials."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxplan.evaluate import build_graph
from ctxplan.mapping import ops
from ctxplan.mapping.builder import GraphBuilder
from ctxplan.mapping.layout import split_even
from ctxplan.model import compressed as c
from ctxplan.model import kinds
from ctxplan.model.attention import attention_pair_flops
from ctxplan.model.spec import (
    COMPRESSED_SPARSE_ATTENTION,
    HEAVILY_COMPRESSED_ATTENTION,
    WINDOW_ATTENTION,
    ModelSpec,
)
from tests.mapping.test_decode_kinds import cfg_of, sent
from tests.model.family_specs import DEEPSEEK_V4_FLASH, DEEPSEEK_V4_PRO

FLASH = DEEPSEEK_V4_FLASH.first_layers(4)   # window x 2, CSA, HCA
PRO = DEEPSEEK_V4_PRO.first_layers(3)       # HCA x 2, CSA
ACT = 2
LSE = 4


def flops(b: GraphBuilder, *kinds_: str) -> float:
    return math.fsum(b.flops[b.mask_of(list(kinds_))].tolist())


def expected_bytes(m: ModelSpec, S: int, nd: int, tp: int, batch: int, index_key: int) -> int:
    """Per layer and TP index: nothing for the window-only layers; HCA's pass-Q (the query,
    heads / tp x 512 BF16, out to Nd - 1 ranks; the partial output and an FP32 LSE per head
    back); CSA's as DSA's over its floor(S / 4) entries: the query with the indexer's (64 x
    (128 + 4) B), the partials, and with more entries than k the candidates (every rank sends
    each other home min(k, its shard) per sequence there, 8 B each) and the boundary (8 B)."""
    if nd == 1:
        return 0
    del index_key   # the keys stay where they are
    heads = m.num_attention_heads // tp
    q, o = heads * 512 * ACT, heads * (512 * ACT + LSE)
    homes = [len(range(r, batch, nd)) for r in range(nd)]
    total = 0
    for kind, n in m.layer_type_counts.items():
        if kind == WINDOW_ATTENTION:
            continue
        per = batch * (nd - 1) * (q + o)
        if kind == COMPRESSED_SPARSE_ATTENTION:
            per += batch * (nd - 1) * 64 * 132
            entries = S // 4
            k = m.dsa.index_topk if m.dsa else 0
            if entries > k:
                shards = split_even(entries, nd)
                per += 8 * sum(min(k, s) * (batch - h) for s, h in zip(shards, homes,
                                                                        strict=True))
                per += 8 * batch * (nd - 1)
        total += n * per
    return total * tp


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.sampled_from([FLASH, PRO]), st.integers(1, 40_000), st.integers(1, 6),
       st.sampled_from([1, 2, 8]), st.integers(1, 7), st.sampled_from(["broadcast", "ring"]),
       st.sampled_from(["v4-fp8", "v4-fp4-index"]))
@example(PRO, 1_000_000, 8, 8, 3, "broadcast", "v4-fp8")
@example(FLASH, 2_000, 3, 1, 1, "ring", "v4-fp8")       # Flash: 500 entries <= k = 512
def test_decode_bytes_equal_closed_forms(m: ModelSpec, S: int, nd: int, tp: int, batch: int,
                                         pass_q: str, tier: str) -> None:
    cfg = cfg_of(m, S, nd, tp=tp, batch=batch, pass_q=pass_q, kv_tier=tier)
    b = build_graph(cfg)
    want = expected_bytes(m, S, nd, tp, batch, cfg.kv()[1] - 584)
    assert sent(b, *ops.DECODE_CP_KINDS) == want
    from ctxplan.mapping.entry import kind_comms
    assert sum(k.analytic_bytes for k in kind_comms(cfg.model, cfg.layout())) == want


@pytest.mark.parametrize(("S", "nd", "tp", "batch"),
                         [(100_000, 4, 2, 3), (1_000, 3, 1, 2), (50, 2, 1, 1), (300_000, 1, 8, 2)])
def test_decode_flops_add_up_to_the_model_layers(S: int, nd: int, tp: int, batch: int) -> None:
    for m in (FLASH, PRO):
        b = build_graph(cfg_of(m, S, nd, tp=tp, batch=batch))
        attention = index = 0.0
        for kind, n in m.layer_type_counts.items():
            cost = kinds.decode_attention_cost(m, kind, S, 716)
            attention += n * cost.attention_flops
            index += n * cost.indexer_flops
            assert cost.attention_flops == (kinds.decode_attended_tokens(m, kind, S)
                                            * attention_pair_flops(m))
        got = flops(b, ops.PARTIAL_ATTN, ops.WINDOW_ATTN, ops.HCA_ATTN, ops.CSA_ATTN)
        assert got == pytest.approx(batch * attention, rel=1e-12)
        # the indexer runs whole on every TP chip
        assert flops(b, ops.CSA_INDEX) == pytest.approx(batch * tp * index, rel=1e-12)


def test_the_window_is_attended_on_the_home_and_merged_with_the_shards() -> None:
    S, nd, batch = 200_000, 4, 2
    m = PRO
    b = build_graph(cfg_of(m, S, nd, batch=batch))
    layer = b.layer
    win = np.flatnonzero(b.mask_of([ops.WINDOW_ATTN]))
    # one window op per home chip and V4 layer (ranks 0 and 1 are the homes)
    assert sorted(set(b.chip_of[win].tolist())) == [0, 1]
    assert len(win) == 2 * m.num_hidden_layers
    deps = b.graph.deps
    kind = b.kind
    for t in np.flatnonzero(b.mask_of([ops.ATTN_MERGE]) & (layer == 0)).tolist():
        waits = [kind[d] for d in deps[t]]
        assert ops.WINDOW_ATTN in waits and ops.PARTIAL_ATTN in waits
    # the entries are sharded: each rank attends its share of HCA's floor(S / 128)
    shards = split_even(S // 128, nd)
    hca = [t for t in np.flatnonzero(b.mask_of([ops.PARTIAL_ATTN]) & (layer == 0)).tolist()]
    per_chip = {int(b.chip_of[t]): b.flops[t] for t in hca}
    pair = attention_pair_flops(m)
    assert per_chip == {r: pytest.approx(batch * shards[r] * pair) for r in range(nd)}


def test_the_compressor_step_is_counted_on_the_home() -> None:
    # a Q_PROJ of a CSA layer carries the pooling of its compressors per step
    m = FLASH
    b = build_graph(cfg_of(m, 10_000, 2))
    q = np.flatnonzero(b.mask_of([ops.Q_PROJ]) & (b.layer == 2))
    proj = np.flatnonzero(b.mask_of([ops.Q_PROJ]) & (b.layer == 0))
    extra = float(b.flops[q].sum() - b.flops[proj].sum())
    linears = 0.0
    from ctxplan.model.linear import attention_linears
    for kind, sign in ((COMPRESSED_SPARSE_ATTENTION, 1), (WINDOW_ATTENTION, -1)):
        linears += sign * sum(x.flops(1) for x in attention_linears(m, kind)
                              if x.name not in ("wo_a", "wo_b"))
    assert extra == pytest.approx(linears + c.compressor_flops_per_token(
        m, COMPRESSED_SPARSE_ATTENTION))
    assert c.compressor_flops_per_token(m, HEAVILY_COMPRESSED_ATTENTION) == 2 * 512
