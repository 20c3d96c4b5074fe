"""DeepSeek-V4's prefill under CP (mapping/kinds/compressed_prefill.py, docs/mapping.md
"DeepSeek-V4"): the bytes each pattern moves equal counts written here token by token from the
documented placement (not from the mapping's functions), the FLOPs add up to the model layer's,
and the ops wait for what they need."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxplan.config.checks import check_point
from ctxplan.config.hardware_presets import load_chip, load_cluster
from ctxplan.errors import UserInputError
from ctxplan.evaluate import EvalConfig, build_graph, evaluate
from ctxplan.mapping import ops
from ctxplan.mapping.builder import GraphBuilder
from ctxplan.mapping.placement import entry_below, placement, rank_pairs
from ctxplan.model import compressed as c
from ctxplan.model import kinds
from ctxplan.model.attention import attention_pair_flops
from ctxplan.model.spec import (
    COMPRESSED_SPARSE_ATTENTION,
    HEAVILY_COMPRESSED_ATTENTION,
    WINDOW_ATTENTION,
    ModelSpec,
)
from ctxplan.policy import Policy
from tests.mapping.test_prefill_kinds import chunk_holders
from tests.model.family_specs import DEEPSEEK_V4_FLASH, DEEPSEEK_V4_PRO

FLASH = DEEPSEEK_V4_FLASH.first_layers(4)   # window x 2, CSA, HCA; hash-routed MoE x 3, gated
PRO = DEEPSEEK_V4_PRO.first_layers(5)       # HCA x 2, CSA, HCA, CSA
ENTRY = 584
ACT = 2
POOLED = (COMPRESSED_SPARSE_ATTENTION, HEAVILY_COMPRESSED_ATTENTION)


def cfg_of(m: ModelSpec, S: int, cp: int, *, tp: int = 1, batch: int = 1, cached: int = 0,
           ring: str = "pass-kv", kv_tier: str | None = None, moe: str = "ep",
           chip: str = "h100-sxm") -> EvalConfig:
    k = load_chip(chip)
    cfg = EvalConfig(model=m, chip=k, cluster=load_cluster(k.default_cluster), phase="prefill",
                     context_length=S, cp=cp, tp=tp, batch=batch, kv_tier=kv_tier,
                     cached=cached, policy=Policy(prefill_ring=ring, moe_parallel=moe))
    return check_point(cfg)


def sent(b: GraphBuilder, *kinds_: str) -> int:
    return int(b.graph.nbytes[b.mask_of(list(kinds_))].sum())


def flops(b: GraphBuilder, *kinds_: str) -> float:
    return math.fsum(b.flops[b.mask_of(list(kinds_))].tolist())


def row_bytes(m: ModelSpec, kind: str) -> int:
    """A token's compressor rows as they travel: kv and gate, overlap x d values each, BF16,
    for the latent's compressor (d 512) and in CSA the indexer's (d 128)."""
    overlap = 2 if kind == COMPRESSED_SPARSE_ATTENTION else 1
    widths = [m.head_dim] + ([128] if kind == COMPRESSED_SPARSE_ATTENTION else [])
    return sum(2 * overlap * d for d in widths) * ACT


def expected_cp_bytes(m: ModelSpec, S: int, P: int, cp: int, ring: str, c_kv: int) -> int:
    """Per sequence and TP index, over the model's layers, token by token: the window halo
    (the w - 1 keys before each chunk held by another rank), the compressor rows of the tokens
    a chunk's first entry pools held by another rank (a cached prefix's: rank 0's state), and
    the entries (ring: every entry to every other rank; all-gather: every rank's share padded
    to the largest)."""
    owner = chunk_holders(S, P, cp)
    w = m.sliding_window
    assert w is not None
    total = 0
    for kind, layers in m.layer_type_counts.items():
        per = _window_halo(owner, P, S, w, cp) * ENTRY
        if kind in POOLED:
            r = 4 if kind == COMPRESSED_SPARSE_ATTENTION else 128
            overlap = 2 if kind == COMPRESSED_SPARSE_ATTENTION else 1
            size = c_kv if kind == COMPRESSED_SPARSE_ATTENTION else ENTRY
            per += _row_halo(owner, P, S, r, overlap, cp) * row_bytes(m, kind)
            if ring == "all-gather":
                held = [0] * cp
                for j in range(S // r):
                    held[owner[(j + 1) * r - 1]] += 1
                per += cp * (cp - 1) * max(held) * size
            else:
                per += (cp - 1) * (S // r) * size
        total += layers * per
    return total


def _window_halo(owner: list[int], P: int, S: int, w: int, cp: int) -> int:
    """Keys each rank receives for its windows (each once, though both its chunks need it)."""
    out = 0
    for i in range(cp):
        need: set[int] = set()
        for p in range(P, S):
            if owner[p] == i and (p == P or owner[p - 1] != i):
                need |= set(range(max(0, p - w + 1), p))
        out += sum(1 for t in need if owner[t] != i)
    return out


def _row_halo(owner: list[int], P: int, S: int, r: int, overlap: int, cp: int) -> int:
    """Rows each rank receives: for each of its new chunks [x, y) that completes an entry, the
    tokens [(x // r + 1 - overlap) r, x) whose rows another rank holds (a new token's holder;
    a cached token's rows exist only in the prefix's state, on rank 0)."""
    state = set(range(max((P // r + 1 - overlap) * r, 0), P)) if P else set()
    rows_of = {t: (0 if t in state else None) for t in range(P)}
    rows_of.update({t: owner[t] for t in range(P, S)})
    out = 0
    for i in range(cp):
        need: set[int] = set()
        p = P
        while p < S:
            if owner[p] != i:
                p += 1
                continue
            x = p
            while p < S and owner[p] == i:
                p += 1
            y = p
            j0 = x // r
            if (j0 + 1) * r - 1 < y:
                need |= set(range(max((j0 + 1 - overlap) * r, 0), x))
        out += sum(1 for t in need if rows_of.get(t) not in (None, i))
    return out


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.sampled_from([FLASH, PRO]), st.integers(2, 1500), st.integers(0, 1499),
       st.sampled_from([(1, 1), (2, 1), (3, 2), (5, 1)]), st.sampled_from([1, 2]),
       st.sampled_from(["pass-kv", "all-gather"]))
@example(PRO, 1500, 0, (3, 2), 1, "all-gather")
@example(FLASH, 1000, 700, (2, 1), 2, "pass-kv")
def test_cp_bytes_equal_a_token_by_token_count(m: ModelSpec, S: int, P: int,
                                               cp_tp: tuple[int, int], batch: int,
                                               ring: str) -> None:
    cp, tp = cp_tp
    P = min(P, S - 1)
    cfg = cfg_of(m, S, cp, tp=tp, batch=batch, cached=P, ring=ring)
    b = build_graph(cfg)
    want = batch * tp * expected_cp_bytes(m, S, P, cp, ring, cfg.kv()[1])
    assert sent(b, *ops.PREFILL_CP_KINDS) == want
    # the closed form the result reports is the same number
    assert sum(k.analytic_bytes for k in _comms(cfg)) == want


def _comms(cfg: EvalConfig):  # type: ignore[no-untyped-def]
    from ctxplan.mapping.entry import kind_comms
    return kind_comms(cfg.model, cfg.layout())


def test_the_entry_patterns_closed_forms_on_an_even_split() -> None:
    # S = 2^16 over Np = 4: 8 chunks of 8192 tokens, multiples of r; the ring moves every
    # entry Np - 1 times; the all-gather pads nothing; the windows' halo is 2 (Np - 1) (w - 1)
    # keys, and so are the rows: (overlap - 1) r + 0 tokens before each chunk but the first
    # (at 0) and rank Np - 1's second (after its first)
    S, cp = 2**16, 4
    for ring in ("pass-kv", "all-gather"):
        cfg = cfg_of(PRO, S, cp, ring=ring)
        by = {k.layer_type: k.analytic_bytes for k in _comms(cfg)}
        halo = 2 * (cp - 1) * 127 * ENTRY
        csa_rows = 2 * (cp - 1) * 4 * row_bytes(PRO, COMPRESSED_SPARSE_ATTENTION)
        hca_rows = 0   # HCA's entries pool r tokens, none of them before a chunk at k r
        assert by[COMPRESSED_SPARSE_ATTENTION] == 2 * (halo + csa_rows + (cp - 1) * S // 4 * 716)
        assert by[HEAVILY_COMPRESSED_ATTENTION] == 3 * (halo + hca_rows
                                                        + (cp - 1) * S // 128 * ENTRY)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.integers(1, 3000), st.integers(0, 2999), st.integers(1, 6),
       st.sampled_from([4, 128]))
def test_entry_pairs_between_ranks_add_up_to_the_models(S: int, P: int, cp: int,
                                                        r: int) -> None:
    P = min(P, S - 1)
    pl = placement(S, P, cp)
    kind = COMPRESSED_SPARSE_ATTENTION if r == 4 else HEAVILY_COMPRESSED_ATTENTION
    got = int(rank_pairs(entry_below(r), pl).sum())
    assert got == c.entry_pairs(DEEPSEEK_V4_PRO, kind, S - P, P, capped=False)
    # and each rank's queries see only entries that exist: brute force on a small case
    if S <= 300:
        owner = chunk_holders(S, P, cp)
        pairs = np.zeros((cp, cp), np.int64)
        for p in range(P, S):
            for j in range((p + 1) // r):
                pairs[owner[p], owner[(j + 1) * r - 1]] += 1
        assert np.array_equal(rank_pairs(entry_below(r), pl), pairs)


@pytest.mark.parametrize("ring", ["pass-kv", "all-gather"])
@pytest.mark.parametrize(("S", "P", "cp", "tp", "batch"),
                         [(5000, 0, 3, 2, 1), (2100, 1500, 2, 1, 2), (900, 0, 1, 1, 1),
                          (40, 0, 3, 1, 1)])
def test_flops_add_up_to_the_model_layers(ring: str, S: int, P: int, cp: int, tp: int,
                                          batch: int) -> None:
    m = PRO
    b = build_graph(cfg_of(m, S, cp, tp=tp, batch=batch, cached=P, ring=ring))
    T = S - P
    attention = index = pooling = 0.0
    for kind, n in m.layer_type_counts.items():
        attention += n * kinds.attended_pairs(m, kind, T, P) * attention_pair_flops(m)
        index += n * kinds.indexer_pairs(m, kind, T, P) * kinds.indexer_pair_flops(m)
        pooling += n * T * c.compressor_flops_per_token(m, kind)
    got = flops(b, ops.HCA_ATTN, ops.CSA_INDEX, ops.CSA_ATTN)
    # the attention splits its heads over TP; the indexer and the pooling run whole on every
    # TP chip (their linears are replicated)
    assert got == pytest.approx(batch * (attention + tp * index), rel=1e-12)
    assert flops(b, ops.COMPRESS) == pytest.approx(batch * tp * pooling, rel=1e-12)


def test_the_window_only_layers_run_the_halo_over_v4s_entries() -> None:
    cfg = cfg_of(FLASH.first_layers(2), 4096, 4)
    b = build_graph(cfg)
    assert sent(b, ops.HALO_SEND) == 2 * 2 * 3 * 127 * ENTRY
    assert not b.mask_of([ops.COMPRESS, ops.PASS_KV_SEND, ops.ENTRY_GATHER]).any()
    pairs = kinds.attended_pairs(FLASH, WINDOW_ATTENTION, 4096)
    assert flops(b, ops.WINDOW_ATTN) == pytest.approx(2 * pairs * attention_pair_flops(FLASH))


def test_the_pooling_waits_for_its_rows_and_the_gather_for_the_pooling() -> None:
    b = build_graph(cfg_of(PRO.first_layers(3), 3000, 3, ring="all-gather"))
    g = b.graph
    deps = g.deps
    kind = b.kind
    layer = b.layer
    for t in np.flatnonzero(b.mask_of([ops.COMPRESS]) & (layer == 2)).tolist():
        # through the halo's operation (rank 0's first chunk has no rows to wait for)
        assert {kind[d] for d in _ancestors(deps, t, 3)} & {ops.HALO_SEND, ops.QKV_PROJ}
    gather = np.flatnonzero(b.mask_of([ops.op_kind(ops.ENTRY_GATHER)]) & (layer == 2))
    assert len(gather) == 3
    for t in gather.tolist():
        assert {kind[d] for d in deps[t]} == {ops.COMPRESS}
    for t in np.flatnonzero(b.mask_of([ops.CSA_INDEX]) & (layer == 2)).tolist():
        assert ops.ENTRY_GATHER in {kind[d] for d in deps[t]}


def _ancestors(deps, t: int, depth: int) -> set[int]:  # type: ignore[no-untyped-def]
    out, frontier = set(), {t}
    for _ in range(depth):
        frontier = {d for f in frontier for d in deps[f]}
        out |= frontier
    return out


def test_a_tp_that_splits_the_output_groups_is_refused() -> None:
    # Flash: 64 heads, 8 output groups: TP 16 divides the heads, not the groups
    with pytest.raises(UserInputError) as info:
        cfg_of(FLASH, 4096, 1, tp=16, chip="gb300")
    assert info.value.field == "tp" and "8 groups" in str(info.value)


def test_auto_simulates_the_rings_v4_runs_and_keeps_the_fastest() -> None:
    cfg = cfg_of(FLASH, 8192, 4, ring="auto", chip="b200")
    r, _ = evaluate(cfg)
    g = r.ring
    assert g is not None and r.simulations == 2          # pass-kv and all-gather, no pass-q
    assert g.ttft_pass_kv_s is not None and g.ttft_all_gather_s is not None
    assert g.ttft_pass_q_s == g.ttft_pass_kv_s           # pass-q is pass-kv for these kinds
    assert r.latency_s == min(g.ttft_pass_kv_s, g.ttft_all_gather_s)
    assert g.used == ("all-gather" if g.ttft_all_gather_s < g.ttft_pass_kv_s else "pass-kv")
    one, _ = evaluate(cfg.with_policy(prefill_ring=g.used))
    assert one.latency_s == r.latency_s
    # a model without V4's kinds never simulates the all-gather
    assert "all-gather" not in _rings(load_model_named("llama3.1-8b"))


def _rings(m: ModelSpec) -> tuple[str, ...]:
    from ctxplan.mapping.prefill import rings_that_apply
    return rings_that_apply(m, cfg_of(m, 4096, 2).layout())


def load_model_named(name: str) -> ModelSpec:
    from ctxplan.config.model_presets import load_model
    return load_model(name)
