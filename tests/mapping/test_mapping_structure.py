"""Structure of the CP communication each phase emits (docs/mapping.md).

Prefill: per layer and per ring (one ring per TP index), Np - 1 ring steps; at each step every
rank sends the block it holds to its successor, so each rank sends Np - 1 times per layer and
every block reaches every other rank once. The transfer of step s overlaps step s's attention
(neither depends on the other); step s + 1 waits for both.
Decode: per layer, per home rank with queries, per TP index: Nd - 1 pass-Q sends out of the
home and Nd - 1 merge sends back into it. The two phases share no CP op kind.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from ctxplan.mapping import ops
from ctxplan.mapping.builder import GraphBuilder
from ctxplan.mapping.decode_base import home_counts
from ctxplan.mapping.kinds.full_decode import decode_structure
from ctxplan.mapping.layout import prefill_rank_tokens
from tests.mapping.mapping_helpers import config, graph, model


def _ancestors(b: GraphBuilder, t: int) -> set[int]:
    seen: set[int] = set()
    stack = list(b.graph.deps[t])
    while stack:
        d = stack.pop()
        if d not in seen:
            seen.add(d)
            stack.extend(b.graph.deps[d])
    return seen


PREFILL_CASES = [
    # (model, S, Np, tp, batch)
    ("llama3.1-8b", 4096, 4, 1, 1),
    ("llama3.1-8b", 1001, 5, 2, 3),      # uneven chunks, two rings
    ("llama3.1-8b", 3, 4, 1, 1),         # S < Np: empty blocks still take their ring step
    ("qwen3-235b-a22b", 640, 3, 2, 1),   # MoE
    ("deepseek-v3", 700, 6, 1, 1),       # MLA + MoE, full depth
    ("deepseek-v3", 512, 2, 4, 1),       # MLA: one latent ring per TP index
]


@pytest.mark.parametrize(("name", "S", "np_", "tp", "batch"), PREFILL_CASES)
def test_prefill_ring_steps_per_layer_and_ring(name: str, S: int, np_: int, tp: int,
                                               batch: int) -> None:
    m = model(name)
    cfg = config(m, "prefill", S, np_, tp=tp, batch=batch)
    lay = cfg.layout()
    _, c_kv = cfg.kv()
    b = graph(cfg)
    nbytes = b.graph.nbytes
    rank_tokens = [t * batch for t in prefill_rank_tokens(S, np_)]
    # One chip's block: MLA's latent whole on every TP chip, GQA heads split over TP.
    per_chip = -(-c_kv // min(tp, 1 if m.mla is not None else m.num_key_value_heads))
    sends: dict[tuple[int, int], list[int]] = defaultdict(list)   # (layer, ring) -> tasks
    attns: dict[tuple[int, int], list[int]] = defaultdict(list)   # (layer, chip) -> tasks
    for t, k in enumerate(b.kind):
        if k == ops.PASS_KV_SEND:
            assert b.chip_of[t] % tp == b.peer[t] % tp  # a ring never leaves its TP index
            sends[(b.layer[t], b.chip_of[t] % tp)].append(t)
        elif k == ops.PASS_KV_ATTN:
            attns[(b.layer[t], b.chip_of[t])].append(t)
    L = m.num_hidden_layers
    assert set(sends) == {(layer, j) for layer in range(L) for j in range(tp)}
    for (_layer, j), ts in sends.items():
        ring = [lay.chip(i, j) for i in range(np_)]
        # Np - 1 ring steps; at each, every rank sends once, to its successor.
        by_step = Counter(b.step[t] for t in ts)
        assert by_step == dict.fromkeys(range(np_ - 1), np_)
        assert Counter(b.chip_of[t] for t in ts) == dict.fromkeys(ring, np_ - 1)
        for t in ts:
            i = ring.index(b.chip_of[t])
            assert b.peer[t] == ring[(i + 1) % np_]
            # At step s rank i passes on the block that came from rank i - s.
            assert nbytes[t] == rank_tokens[(i - b.step[t]) % np_] * per_chip
        # Every block reaches every other rank exactly once.
        for i, c in enumerate(ring):
            got = sorted(nbytes[t] for t in ts if b.peer[t] == c)
            assert got == sorted(rank_tokens[k] * per_chip for k in range(np_) if k != i)
    # Np attention steps per chip per layer.
    for layer in range(L):
        for c in range(lay.n_chips):
            assert sorted(b.step[t] for t in attns[(layer, c)]) == list(range(np_))


@pytest.mark.parametrize(("name", "S", "np_", "tp"), [("llama3.1-8b", 4096, 4, 2),
                                                      ("deepseek-v3", 512, 3, 1)])
def test_prefill_overlap_scope_is_one_step(name: str, S: int, np_: int, tp: int) -> None:
    """Step s: the send's operation (its SendRecv's fixed cost) and the attention share their
    inputs, and the send and the attention do not wait for each other; the send waits for its
    own operation and its receiver's. Step s + 1 (attention and operation) waits for step s's
    attention, its send and the block received from the predecessor: the ring is serial
    across steps."""
    m = model(name)
    cfg = config(m, "prefill", S, np_, tp=tp)
    lay = cfg.layout()
    b = graph(cfg)
    for layer in (0, m.num_hidden_layers - 1):
        attn: dict[tuple[int, int], int] = {}
        send: dict[tuple[int, int], int] = {}
        op: dict[tuple[int, int], int] = {}
        for t, k in enumerate(b.kind):
            if b.layer[t] != layer:
                continue
            if k == ops.PASS_KV_ATTN:
                attn[(b.chip_of[t], b.step[t])] = t
            elif k == ops.PASS_KV_SEND:
                send[(b.chip_of[t], b.step[t])] = t
            elif k == ops.op_kind(ops.PASS_KV_SEND):
                op[(b.chip_of[t], b.step[t])] = t
        for c in range(lay.n_chips):
            i, j = divmod(c, tp)
            pred = lay.chip((i - 1) % np_, j)
            succ = lay.chip((i + 1) % np_, j)
            for s in range(np_ - 1):
                a, x, o = attn[(c, s)], send[(c, s)], op[(c, s)]
                assert x not in _ancestors(b, a)
                assert a not in _ancestors(b, x)
                assert set(b.graph.deps[a]) == set(b.graph.deps[o])
                assert set(b.graph.deps[x]) == {o, op[(succ, s)]}
                nxt = [attn[(c, s + 1)]] + ([op[(c, s + 1)]] if s + 1 < np_ - 1 else [])
                for y in nxt:
                    deps = set(b.graph.deps[y])
                    assert {a, x, send[(pred, s)]} <= deps


DECODE_CASES = [
    # (model, S, Nd, tp, batch)
    ("llama3.1-8b", 4096, 4, 1, 1),       # one home
    ("llama3.1-8b", 4096, 4, 2, 3),       # three homes, two TP indices
    ("llama3.1-8b", 1000, 2, 1, 3),       # more sequences than ranks: homes repeat
    ("qwen3-235b-a22b", 800, 5, 1, 3),    # MoE: experts on every chip, homes on three
    ("deepseek-v3", 1024, 8, 1, 1),       # MLA absorbed, full depth
    ("deepseek-v3", 1024, 3, 2, 3),
]


@pytest.mark.parametrize(("name", "S", "nd", "tp", "batch"), DECODE_CASES)
def test_decode_aggregation_structure(name: str, S: int, nd: int, tp: int, batch: int) -> None:
    m = model(name)
    cfg = config(m, "decode", S, nd, tp=tp, batch=batch)
    lay = cfg.layout()
    b = graph(cfg)
    counts = home_counts(batch, nd)
    homes = [h for h in range(nd) if counts[h]]
    assert homes == list(range(min(batch, nd)))  # round robin
    q = defaultdict(list)
    merge = defaultdict(list)
    partial: Counter[tuple[int, int]] = Counter()
    merges: Counter[tuple[int, int]] = Counter()
    for t, k in enumerate(b.kind):
        key = (b.layer[t], b.chip_of[t])
        if k == ops.PASS_Q_SEND:
            q[key].append(b.peer[t])           # keyed by the sender (the home)
        elif k == ops.MERGE_SEND:
            merge[(b.layer[t], b.peer[t])].append(b.chip_of[t])  # keyed by the receiver
        elif k == ops.PARTIAL_ATTN:
            partial[key] += 1
        elif k == ops.ATTN_MERGE:
            merges[key] += 1
    home_chips = {lay.chip(h, j) for h in homes for j in range(tp)}
    L = m.num_hidden_layers
    assert set(q) == set(merge) == {(layer, c) for layer in range(L) for c in home_chips}
    for (_layer, c), dsts in q.items():
        h, j = divmod(c, tp)
        others = sorted(lay.chip(i, j) for i in range(nd) if i != h)
        assert sorted(dsts) == others       # Nd - 1 pass-Q sends, one to each other shard
        assert sorted(merge[(_layer, c)]) == others  # Nd - 1 partial outputs gathered back
    # Every chip attends its shard once per layer; each home chip merges once per layer.
    assert partial == {(layer, c): 1 for layer in range(L) for c in range(lay.n_chips)}
    assert merges == {(layer, c): 1 for layer in range(L) for c in home_chips}
    st = decode_structure(lay)
    per_layer = len(homes) * tp * (nd - 1)
    assert (st.pass_q_sends_per_layer, st.merge_sends_per_layer) == (per_layer, per_layer)


def test_decode_merge_waits_for_every_shard() -> None:
    m = model("llama3.1-8b")
    cfg = config(m, "decode", 4096, 4, tp=2, batch=2)
    b = graph(cfg)
    for t, k in enumerate(b.kind):
        if k != ops.ATTN_MERGE:
            continue
        deps = b.graph.deps[t]
        senders = sorted(b.chip_of[d] for d in deps
                         if b.kind[d] == ops.MERGE_SEND and b.peer[d] == b.chip_of[t])
        assert len(senders) == 3 and b.chip_of[t] not in senders
        own = [d for d in deps if b.kind[d] == ops.PARTIAL_ATTN]
        assert [b.chip_of[d] for d in own] == [b.chip_of[t]]


@pytest.mark.parametrize(("name", "tp"), [("llama3.1-8b", 1), ("llama3.1-8b", 2),
                                          ("deepseek-v3", 1), ("qwen3-235b-a22b", 2)])
def test_phases_emit_different_op_types(name: str, tp: int) -> None:
    """Same S, same N: prefill emits pass-KV and no pass-Q / merge; decode the reverse. Every
    transfer's kind is a communication kind and no compute op's is."""
    m = model(name)
    S, n = 1024, 4
    kinds = {}
    for phase in ("prefill", "decode"):
        b = graph(config(m, phase, S, n, tp=tp))
        for t, k in enumerate(b.kind):
            assert (k in ops.COMM_KINDS) == (b.peer[t] >= 0), (k, b.peer[t])
        kinds[phase] = set(b.kind)
    pre, dec = kinds["prefill"], kinds["decode"]
    assert pre != dec
    assert ops.PASS_KV_SEND in pre and not pre & set(ops.DECODE_CP_KINDS)
    assert {ops.PASS_Q_SEND, ops.MERGE_SEND} <= dec and not dec & set(ops.PREFILL_CP_KINDS)
    assert {ops.PASS_KV_ATTN, ops.QKV_PROJ} <= pre - dec
    assert {ops.PARTIAL_ATTN, ops.ATTN_MERGE, ops.Q_PROJ} <= dec - pre


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_one_rank_emits_no_cp_traffic(phase: str) -> None:
    b = graph(config(model("llama3.1-8b"), phase, 2048, 1, tp=2))
    assert not set(b.kind) & (set(ops.PREFILL_CP_KINDS) | set(ops.DECODE_CP_KINDS))
