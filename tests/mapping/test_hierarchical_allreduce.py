"""The hierarchical all-reduce across hosts (issue 26 item 4): its bytes in closed form, chosen
only for groups that span hosts, and never slower with more bandwidth."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxplan.config.hardware_presets import load_chip, load_cluster
from ctxplan.hardware.cluster import HIERARCHICAL, RING, Cluster
from ctxplan.mapping import collectives as coll
from ctxplan.mapping import ops
from ctxplan.mapping.builder import NONE, GraphBuilder

CHIP = load_chip("h20-96")
CLUSTER = load_cluster("hgx-h20-ib")      # 8 GPUs per host, one NIC per GPU
PER_HOST = CLUSTER.levels[0].chips_per_group


def _groups(g: int, hosts: int, m: int) -> np.ndarray:
    """G groups, each of the first m ranks of ``hosts`` hosts (group k on hosts k*hosts...)."""
    host = np.arange(g * hosts).reshape(g, hosts)
    return (host[:, :, None] * PER_HOST + np.arange(m)[None, None, :]).reshape(g, hosts * m)


def _run(cluster: Cluster, groups: np.ndarray, size: int) -> GraphBuilder:
    n_chips = int(groups.max()) + 1
    b = GraphBuilder(CHIP, cluster, n_chips)
    ready = np.full((groups.size, 0), NONE, np.int64)
    coll.all_reduce(b, groups, ready, size, 0)
    return b


@given(g=st.integers(1, 2), hosts=st.integers(2, 4), m=st.integers(2, 8),
       size=st.integers(1, 1 << 26))
@example(g=1, hosts=2, m=8, size=8)
@example(g=2, hosts=3, m=5, size=1_000_003)
@settings(max_examples=25, deadline=None)
def test_the_hierarchical_all_reduce_moves_its_bytes(g: int, hosts: int, m: int,
                                                     size: int) -> None:
    """Per rank: 2 (m - 1) shards of ceil(S / m) inside its host, 2 (h - 1) pieces of
    ceil(ceil(S / m) / h) over its own NIC; one operation per rank, at the inter-host figure."""
    groups = _groups(g, hosts, m)
    b = GraphBuilder(CHIP, CLUSTER, int(groups.max()) + 1)
    assert coll.allreduce_algorithm(b, groups, size)[0] == HIERARCHICAL
    b = _run(CLUSTER, groups, size)
    graph = b.graph
    sends = np.array(b.kind) == ops.TP_ALLREDUCE
    shard = -(-size // m)
    piece = -(-shard // hosts)
    ranks = g * hosts * m
    assert int(graph.nbytes[sends].sum()) == ranks * (2 * (m - 1) * shard
                                                     + 2 * (hosts - 1) * piece)
    across = sends & (graph.tail_ns == CLUSTER.levels[1].latency_ns)
    assert int(graph.nbytes[across].sum()) == ranks * 2 * (hosts - 1) * piece
    paid = [t for t, k in enumerate(b.kind) if k == ops.op_kind(ops.TP_ALLREDUCE)]
    assert len(paid) == ranks
    assert {int(graph.duration_ns[t]) for t in paid} == {CLUSTER.levels[1].collective_ns}


def test_a_group_in_any_order_splits_by_host() -> None:
    """Ranks interleaved across hosts (0, 8, 1, 9, ...) still reduce inside each host first."""
    groups = np.stack([np.arange(4), 8 + np.arange(4)], axis=1).reshape(1, 8)
    b = GraphBuilder(CHIP, CLUSTER, 12)
    split = coll.hierarchy(b, groups)
    assert split is not None
    _, intra, inter = split
    chips = groups.ravel()
    assert sorted(map(sorted, chips[intra].tolist())) == [[0, 1, 2, 3], [8, 9, 10, 11]]
    assert all(len({c // PER_HOST for c in ring}) == 2 for ring in chips[inter].tolist())
    a = _run(CLUSTER, groups, 1 << 20).run().makespan_ns
    assert a == _run(CLUSTER, _groups(1, 2, 4), 1 << 20).run().makespan_ns


@given(n=st.integers(2, 8), size=st.integers(1, 1 << 28))
@settings(max_examples=30, deadline=None)
def test_the_hierarchical_all_reduce_is_chosen_only_across_hosts(n: int, size: int) -> None:
    """Inside one host never (the ring or the custom kernels); one rank per host: the ring."""
    b = GraphBuilder(CHIP, CLUSTER, 8 * PER_HOST)
    for first in (0, PER_HOST - n):
        assert coll.allreduce_algorithm(b, np.arange(first, first + n)[None, :],
                                        size)[0] != HIERARCHICAL
    spread = (np.arange(n) * PER_HOST)[None, :]
    assert coll.allreduce_algorithm(b, spread, size)[0] == RING
    uneven = np.r_[np.arange(n), PER_HOST][None, :]   # n ranks on one host, 1 on another
    if n > 1:
        assert coll.allreduce_algorithm(b, uneven, size)[0] == RING


def _scaled(level: int, factor: float) -> Cluster:
    lv = CLUSTER.levels[level]
    lv = dataclasses.replace(lv, bandwidth_bytes_per_s=lv.bandwidth_bytes_per_s * factor)
    levels = list(CLUSTER.levels)
    levels[level] = lv
    return dataclasses.replace(CLUSTER, levels=tuple(levels))


@pytest.mark.parametrize("level", [0, 1])
@given(hosts=st.integers(2, 3), m=st.integers(2, 8), size=st.integers(1, 1 << 28),
       factor=st.floats(1.0, 8.0))
@example(hosts=2, m=8, size=268435456, factor=2.0)
@example(hosts=2, m=8, size=8, factor=8.0)
@settings(max_examples=20, deadline=None)
def test_more_bandwidth_is_never_slower(level: int, hosts: int, m: int, size: int,
                                        factor: float) -> None:
    """A cross-host all-reduce on faster links (inside the host or across) never takes longer,
    whichever algorithm the estimate picks."""
    groups = _groups(1, hosts, m)
    slow = _run(CLUSTER, groups, size).run().makespan_ns
    fast = _run(_scaled(level, factor), groups, size).run().makespan_ns
    assert fast <= slow


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_a_tp_group_over_two_hosts_runs_it_in_a_layer(phase: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """TP 16 on hgx-h100-ib (two hosts): the FFN's all-reduces go hierarchical, every rank's
    NIC carries its share, and the step is faster than with the flat ring forced."""
    from tests.mapping.mapping_helpers import config, graph, model, truncated

    cfg = config(truncated(model("llama3.1-8b"), 2), phase, 4096, 1, tp=16)
    b = graph(cfg)
    sends = np.array(b.kind) == ops.TP_ALLREDUCE
    per_host = cfg.cluster.levels[0].chips_per_group
    across = sends & (b.chip_of // per_host != b.peer // per_host)
    assert set(b.chip_of[across].tolist()) == set(range(16))   # every rank's own NIC
    new = b.run().makespan_ns
    monkeypatch.setattr(coll, "allreduce_algorithm", lambda b, g, n: (RING, None, 1.0))
    assert new < graph(cfg).run().makespan_ns
