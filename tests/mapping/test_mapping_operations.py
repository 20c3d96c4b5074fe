"""Communication operations as NCCL-like libraries run them (docs/mapping.md, "Operations").

Every collective (TP all-reduce / reduce-scatter / all-gather, MoE dispatch / combine, the
pass-Q broadcast, the All2All of partial outputs) and every SendRecv (a pass-KV or pass-Q ring
step) costs, on each chip taking part, one fixed-cost task: it holds no resource, lasts the
level's point-to-point or collective cost (the costliest level the chip talks over in that
operation) and waits for the chip's input; every transfer of the operation waits for the
fixed-cost tasks of both its ends. Meta's pass-Q ring and the one-shot broadcast are checked
task by task, and absorbed MLA's weight reads.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

from ctxplan.config.hardware_presets import load_cluster
from ctxplan.mapping import ops
from ctxplan.mapping.attention import attention_shapes
from ctxplan.mapping.builder import GraphBuilder
from ctxplan.mapping.decode_base import home_counts
from ctxplan.mapping.kinds.full_decode import decode_structure
from ctxplan.model.dtypes import bytes_per_param
from ctxplan.model.linear import attention_linears
from ctxplan.model.spec import FULL_ATTENTION
from tests.mapping.mapping_helpers import config, graph, model, truncated

COLLECTIVE = {ops.TP_ALLREDUCE, ops.TP_REDUCESCATTER, ops.TP_ALLGATHER, ops.MOE_DISPATCH,
              ops.MOE_COMBINE, ops.MERGE_SEND, ops.PREFILL_OUT_SEND, ops.DSA_CAND_SEND,
              ops.DSA_SELECT_SEND}
# Point-to-point operations whose fixed cost is paid per step (a ring step, a state hop).
STEPPED = {ops.PASS_KV_SEND, ops.PASS_Q_SEND, ops.PREFILL_Q_SEND, ops.STATE_SEND}
RINGS = {ops.TP_ALLREDUCE, ops.TP_REDUCESCATTER, ops.TP_ALLGATHER}


def _ops_and_sends(b: GraphBuilder) -> tuple[list[int], list[int]]:
    kinds = b.kind
    op_tasks = [t for t, k in enumerate(kinds) if k in ops.OP_KINDS]
    sends = [t for t, k in enumerate(kinds) if k in ops.COMM_KINDS]
    return op_tasks, sends


CASES = [
    # (model, phase, S, cp, tp, batch, pass_q, cluster, cached, prefill ring)
    ("llama3.1-8b", "prefill", 4096, 3, 8, 1, "broadcast", "grand-teton-rdma", 0, "pass-kv"),
    ("llama3.1-8b", "decode", 4096, 3, 8, 1, "ring", "grand-teton-rdma", 0, "pass-kv"),
    ("llama3.1-8b", "decode", 4096, 3, 8, 4, "broadcast", "grand-teton-rdma", 0, "pass-kv"),
    ("qwen3-235b-a22b", "decode", 800, 3, 4, 2, "ring", None, 0, "pass-kv"),     # MoE
    ("deepseek-v3", "prefill", 600, 3, 1, 1, "broadcast", None, 0, "pass-kv"),   # full mesh
    # the kinds' prefill paths: halo, prefill pass-Q with its all-to-all, state chain + conv
    # halo, the DSA ring
    ("gpt-oss-20b", "prefill", 3000, 3, 2, 1, "broadcast", "hgx-h100-ib", 0, "pass-kv"),
    ("gpt-oss-20b", "prefill", 3000, 3, 1, 1, "broadcast", "hgx-h100-ib", 2000, "pass-q"),
    ("qwen3-next-80b-a3b", "prefill", 3000, 3, 2, 1, "broadcast", "hgx-h100-ib", 0,
     "pass-kv"),
    ("deepseek-v3.2", "prefill", 3000, 3, 1, 1, "broadcast", None, 500, "pass-kv"),
    # the kinds' decode paths: windows on the homes beside pass-Q; DSA's exact top-k
    ("gpt-oss-20b", "decode", 3000, 3, 2, 2, "ring", "hgx-h100-ib", 0, "pass-kv"),
    ("deepseek-v3.2", "decode", 9000, 4, 2, 3, "broadcast", "hgx-h200-ib", 0, "pass-kv"),
]


SPECIAL = {ops.MOE_DISPATCH: "dispatch", ops.MOE_COMBINE: "combine"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[6]}-{c[9]}")
def test_one_fixed_cost_per_chip_per_operation_and_both_ends_wait(case) -> None:
    name, phase, S, cp, tp, batch, pass_q, cluster_name, cached, ring = case
    m = truncated(model(name), 5)
    cluster = load_cluster(cluster_name) if cluster_name else None
    cfg = config(m, phase, S, cp, tp=tp, batch=batch, pass_q=pass_q, cluster=cluster,
                 cached=cached, prefill_ring=ring)
    b = graph(cfg)
    g = b.graph
    levels = cfg.cluster.levels
    op_tasks, sends = _ops_and_sends(b)
    assert op_tasks and sends
    kinds, chip, layer, step = b.kind, b.chip_of, b.layer, b.step
    for t in op_tasks:
        assert not g.resources[t] and g.nbytes[t] == 0 and b.peer[t] == -1
        assert g.duration_ns[t] > 0
    # Every transfer waits for the fixed cost of its own end and of the other end, of the same
    # operation (same kind, layer and, for ring steps, step).
    used: set[int] = set()
    for t in sends:
        k = kinds[t]
        deps = set(g.deps[t])
        if k in RINGS and step[t] > 0:
            # Later steps of a ring collective run inside the same operation: they wait for
            # the previous step's sends (which waited for the fixed costs); a two-shot
            # all-reduce's second round for its first (the fixed costs and the sends).
            assert deps and all(kinds[d] in (k, ops.op_kind(k)) and step[d] in (-1, step[t] - 1)
                                for d in deps)
            continue
        ends = [d for d in deps if kinds[d] == ops.op_kind(k)]
        assert sorted(int(chip[d]) for d in ends) == sorted((int(chip[t]), int(b.peer[t])))
        assert all(layer[d] == layer[t] for d in ends)
        if k in STEPPED:
            assert all(step[d] == step[t] for d in ends)
        # The operation's cost: its class's figure at the costliest level the chip talks over
        # (a MoE dispatch / combine the level's own; an all-reduce its algorithm's).
        level = levels[cfg.cluster.level_of(int(chip[t]), int(b.peer[t]))]
        collective = k in COLLECTIVE or (k == ops.PASS_Q_SEND and pass_q == "broadcast")
        floor = level.overhead_ns(collective, SPECIAL.get(k))
        if k == ops.TP_ALLREDUCE:
            floor = min([floor, *(a.ns(tp) for a in level.allreduce.values())])
        assert all(g.duration_ns[d] >= floor for d in ends)
        used.update(ends)
    assert used == set(op_tasks)   # no operation without traffic


def test_tp_all_reduce_is_one_collective_per_chip_at_the_host_level() -> None:
    """TP8 decode on one Grand Teton host: two all-reduces per layer, one fixed cost per chip
    each, at the NVLink level's collective cost; 14 ring steps after it."""
    m = truncated(model("llama3.1-8b"), 3)
    cfg = config(m, "decode", 2048, 1, tp=8, cluster=load_cluster("grand-teton-rdma"))
    b = graph(cfg)
    host = cfg.cluster.levels[0]
    for layer in range(3):
        op_t = [t for t, k in enumerate(b.kind)
                if k == ops.op_kind(ops.TP_ALLREDUCE) and b.layer[t] == layer]
        assert len(op_t) == 2 * 8
        assert {int(b.graph.duration_ns[t]) for t in op_t} == {host.collective_ns}
        steps = Counter(int(b.step[t]) for t, k in enumerate(b.kind)
                        if k == ops.TP_ALLREDUCE and b.layer[t] == layer)
        assert steps == dict.fromkeys(range(14), 2 * 8)
    # One rank: no pass-Q, no All2All, no merge.
    assert not {ops.PASS_Q_SEND, ops.MERGE_SEND, ops.ATTN_MERGE} & set(b.kind)


@pytest.mark.parametrize(("nd", "tp", "batch"), [(2, 8, 1), (4, 2, 1), (3, 2, 5), (4, 1, 2)])
def test_meta_pass_q_ring_task_by_task(nd: int, tp: int, batch: int) -> None:
    """Meta's pass-Q (arXiv:2411.01783 section 3.3): Nd steps; at step s rank r attends the
    queries of home r - s (if it has any) and, for s < Nd - 1, every rank passes them to r + 1
    in a SendRecv that waits for the previous step's send and receive; then every rank returns
    the partial output + LSE of each other home's queries to that home (the All2All) and each
    home merges its Nd partials."""
    m = truncated(model("llama3.1-8b"), 2)
    cluster = load_cluster("grand-teton-rdma")
    cfg = config(m, "decode", 4000, nd, tp=tp, batch=batch, pass_q="ring", cluster=cluster)
    lay = cfg.layout()
    b = graph(cfg)
    g = b.graph
    counts = home_counts(batch, nd)
    q_per_token = (m.num_attention_heads // tp) * m.head_dim * 2
    kinds = b.kind
    for layer in range(2):
        sends = [t for t, k in enumerate(kinds) if k == ops.PASS_Q_SEND and b.layer[t] == layer]
        attn = [t for t, k in enumerate(kinds) if k == ops.PARTIAL_ATTN and b.layer[t] == layer]
        back = [t for t, k in enumerate(kinds) if k == ops.MERGE_SEND and b.layer[t] == layer]
        merges = [t for t, k in enumerate(kinds) if k == ops.ATTN_MERGE and b.layer[t] == layer]
        by_step = {(int(b.chip_of[t]), int(b.step[t])): t for t in sends}
        assert len(by_step) == len(sends) == lay.n_chips * (nd - 1)
        for (c, s), t in by_step.items():
            r, j = divmod(c, tp)
            assert b.peer[t] == lay.chip((r + 1) % nd, j)
            assert g.nbytes[t] == counts[(r - s) % nd] * q_per_token
            if s > 0:   # waits (through its operation) for its previous send and receive
                (op,) = [d for d in g.deps[t] if kinds[d] == ops.op_kind(ops.PASS_Q_SEND)
                         and b.chip_of[d] == c]
                prev = {by_step[(c, s - 1)], by_step[(lay.chip((r - 1) % nd, j), s - 1)]}
                assert prev <= set(g.deps[op])
        # Attention steps: one per chip per home with queries, at step (r - home) mod Nd.
        got = Counter((int(b.chip_of[t]), int(b.step[t])) for t in attn)
        want = Counter((c, (c // tp - h) % nd) for c in range(lay.n_chips)
                       for h in range(nd) if counts[h])
        assert got == want
        # The All2All: each chip returns every other home's partial to that home's chip.
        got_back = Counter((int(b.chip_of[t]), int(b.peer[t])) for t in back)
        want_back = Counter((c, lay.chip(h, c % tp)) for c in range(lay.n_chips)
                            for h in range(nd) if counts[h] and h != c // tp)
        assert got_back == want_back
        home_chips = {lay.chip(h, j) for h in range(nd) if counts[h] for j in range(tp)}
        assert {int(b.chip_of[t]) for t in merges} == home_chips and len(merges) == len(
            home_chips)
        for t in merges:
            incoming = [d for d in g.deps[t] if kinds[d] == ops.MERGE_SEND
                        and b.peer[d] == b.chip_of[t]]
            assert len(incoming) == nd - 1
    st = decode_structure(lay)
    assert st.pass_q_sends_per_layer == lay.n_chips * (nd - 1)


def test_ring_and_broadcast_move_the_same_bytes() -> None:
    m = truncated(model("llama3.1-8b"), 2)
    totals = {}
    for pq in ("ring", "broadcast"):
        b = graph(config(m, "decode", 3000, 4, tp=2, batch=3, pass_q=pq))
        mask = b.mask_of(list(ops.DECODE_CP_KINDS))
        totals[pq] = int(b.graph.nbytes[mask].sum())
    assert totals["ring"] == totals["broadcast"] > 0


@pytest.mark.parametrize("tp", [1, 8])
def test_absorbed_mla_reads_its_kv_b_weights_every_step(tp: int) -> None:
    """DeepSeek-V3 absorbed decode: W_UK (on q_nope, before attention) and W_UV (on the latent
    output, after it) are the two halves of kv_b_proj, 16.8 M parameters per layer, read in the
    attention weight dtype and split over the TP group."""
    m = model("deepseek-v3")
    cfg = config(m, "decode", 4096, 1, tp=tp)
    lay = cfg.layout()
    att = attention_shapes(m, lay, FULL_ATTENTION)
    (kv_b,) = [x for x in attention_linears(m) if x.name == "kv_b_proj"]
    assert kv_b.params == 512 * 128 * (128 + 128) == 16_777_216
    assert att.absorb_k is not None and att.absorb_v is not None
    wb = bytes_per_param(lay.precision.attention_weights)
    halves = [att.absorb_k.work(1, lay), att.absorb_v.work(1, lay)]
    weight_params = sum(h.heads * h.in_dim * h.out_dim for h in (att.absorb_k, att.absorb_v))
    assert weight_params == kv_b.params // tp
    assert sum(w.mem_bytes for w in halves) >= kv_b.params / tp * wb
    assert sum(w.flops for w in halves) == pytest.approx(2 * kv_b.params / tp)
    # W_UK rides in the query projection op, W_UV in the output projection op.
    q_parts = att.projection(m, 1, lay)
    o_parts = att.output(1, lay)
    assert any(w.mem_bytes == halves[0].mem_bytes for w in q_parts)
    assert o_parts[0].mem_bytes == halves[1].mem_bytes
    # Standard MLA has no absorption (kv_b_proj runs on the KV instead).
    std = attention_shapes(m, config(m, "decode", 4096, 1, tp=tp, mla_mode="standard")
                           .layout(), FULL_ATTENTION)
    assert std.absorb_k is None and std.absorb_v is None


def test_a_compute_op_pays_one_kernel_overhead_per_part() -> None:
    """Each part of a compute op is one kernel: 1 us more per kernel makes the dense BF16 FFN
    (norm, gate_up, SwiGLU, down) 4 us longer, the GQA query projection (norm, the fused qkv
    GEMM, RoPE, the KV-cache write) 4 us, the decode attention (one kernel) 1 us, and
    communication operations not at all (docs/mapping.md, "What a layer launches")."""
    m = truncated(model("llama3.1-8b"), 1)
    cfg = config(m, "decode", 2048, 2, tp=2)
    floors = {c: v + 1000 for c, v in cfg.chip.kernel_floor_ns.items()}
    slower = dataclasses.replace(cfg, chip=dataclasses.replace(
        cfg.chip, op_overhead_ns=cfg.chip.op_overhead_ns + 1000, kernel_floor_ns=floors))
    base, more = graph(cfg), graph(slower)
    delta = more.graph.duration_ns - base.graph.duration_ns
    kinds = base.kind
    parts = {ops.FFN: 4, ops.PARTIAL_ATTN: 1, ops.ATTN_MERGE: 1, ops.O_PROJ: 1, ops.Q_PROJ: 4}
    for t, k in enumerate(kinds):
        if k in parts:
            assert delta[t] == 1000 * parts[k], k
        elif k in ops.COMM_KINDS or k in ops.OP_KINDS:
            assert delta[t] == 0, k


# -- all-to-all: a window of peers in flight (docs/mapping.md, "All-to-all: peers in flight") --

def _dispatch_schedule(window: int) -> tuple[GraphBuilder, object]:
    m = truncated(model("deepseek-v3"), 5)
    k = dataclasses.replace(load_cluster("sg2262-c2c"), all_to_all_peers_in_flight=window)
    b = graph(config(m, "prefill", 1200, 12, cluster=k))
    return b, b.run()


@pytest.mark.parametrize("window", [1, 3, 8])
def test_a_rank_has_at_most_w_transfers_in_flight_in_an_all_to_all(window: int) -> None:
    b, res = _dispatch_schedule(window)
    start, end = res.start_ns, res.end_ns
    sends = b.mask_of([ops.MOE_DISPATCH, ops.MOE_COMBINE])
    chip, layer, code = b.chip_of, b.layer, b.kind_code
    deps = b.graph.deps
    checked = 0
    for key in sorted({(int(code[t]), int(layer[t]), int(chip[t]))
                       for t in np.flatnonzero(sends)}):
        mine = [int(t) for t in np.flatnonzero(sends & (code == key[0]) & (layer == key[1])
                                               & (chip == key[2]))]
        assert len(mine) == 11            # every other rank of the pool, in issue order
        for k, t in enumerate(mine):
            # the k-th waits for the (k - w)-th to arrive, and for nothing else of its rank
            own = [d for d in deps[t] if d in mine]
            assert own == ([mine[k - window]] if k >= window else []), (key, k)
            assert k < window or start[t] >= end[mine[k - window]]
        # never more than w of them between start and arrival at once
        for t in mine:
            flying = sum(1 for u in mine if start[u] <= start[t] < end[u])
            assert flying <= window
        checked += 1
    assert checked >= 4 * 12


def test_no_window_posts_every_transfer_at_once() -> None:
    b, _ = _dispatch_schedule(0)
    sends = set(np.flatnonzero(b.mask_of([ops.MOE_DISPATCH])).tolist())
    deps = b.graph.deps
    assert sends and all(not sends.intersection(deps[t]) for t in sends)


def test_the_window_changes_nothing_below_w_peers() -> None:
    # a pool of 8 (7 peers) with w = 8: the schedule is the one without a window
    m = truncated(model("deepseek-v3"), 5)
    ends = []
    for window in (0, 8):
        k = dataclasses.replace(load_cluster("sg2262-c2c"), all_to_all_peers_in_flight=window)
        ends.append(graph(config(m, "prefill", 1200, 8, cluster=k)).run().end_ns.tolist())
    assert ends[0] == ends[1]
