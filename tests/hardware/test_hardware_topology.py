"""Topology: routes, the link / port resources they hold, laziness and determinism."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxplan.errors import UserInputError
from ctxplan.hardware import Topology
from ctxplan.sim import TaskGraph
from tests.hardware._builders import RecordingSink, three_level_cluster


def _topology(n_chips: int = 1024, **fabrics: str) -> tuple[Topology, RecordingSink]:
    sink = RecordingSink()
    return Topology(three_level_cluster(**fabrics), n_chips, sink), sink


def _names(topo: Topology, sink: RecordingSink, src: int, dst: int) -> list[str]:
    return [sink.names[rid] for rid in topo.route(src, dst).resources]


def test_full_mesh_pair_has_its_own_link_with_a_share_of_the_bandwidth() -> None:
    topo, sink = _topology()
    route = topo.route(0, 1)
    assert route.level == 0
    assert _names(topo, sink, 0, 1) == ["chip0->chip1.L0"]
    # 700 GB/s per chip split over 7 peers, efficiency 1.0.
    assert route.bandwidth_bytes_per_s == pytest.approx(100e9)
    assert route.latency_ns == 200


def test_full_mesh_distinct_pairs_have_distinct_links() -> None:
    topo, _ = _topology()
    pairs = [(a, b) for a in range(8) for b in range(8) if a != b]
    links = [topo.route(a, b).resources for a, b in pairs]
    assert all(len(link) == 1 for link in links)
    assert len(set(links)) == len(pairs)      # (0,1) and (1,0) differ too: links are directional


def test_switch_routes_out_of_one_chip_share_its_tx_port() -> None:
    topo, sink = _topology()
    first, second = topo.route(0, 8), topo.route(0, 16)
    assert first.level == second.level == 1
    assert _names(topo, sink, 0, 8) == ["chip0.L1.tx", "chip8.L1.rx"]
    assert first.resources[0] == second.resources[0]
    assert first.resources[1] != second.resources[1]
    # 400 GB/s at efficiency 0.5: the port is not split between peers.
    assert first.bandwidth_bytes_per_s == pytest.approx(200e9)
    assert first.latency_ns == 1000


def test_switch_routes_into_one_chip_share_its_rx_port() -> None:
    topo, _ = _topology()
    assert topo.route(8, 0).resources[1] == topo.route(16, 0).resources[1]
    assert topo.route(8, 0).resources[0] != topo.route(16, 0).resources[0]


def test_each_level_has_its_own_ports() -> None:
    topo, sink = _topology()
    assert _names(topo, sink, 0, 32) == ["chip0.L2.tx", "chip32.L2.rx"]
    assert topo.route(0, 32).level == 2
    assert set(topo.route(0, 32).resources).isdisjoint(topo.route(0, 8).resources)


def test_full_mesh_above_level_zero_links_a_chip_to_each_other_unit() -> None:
    topo, sink = _topology(fabric1="full_mesh")
    assert _names(topo, sink, 0, 8) == ["chip0->board1.L1"]
    assert topo.route(0, 8).resources == topo.route(0, 9).resources   # same board: same link
    assert topo.route(0, 8).resources != topo.route(0, 16).resources
    assert topo.route(0, 8).resources != topo.route(1, 8).resources   # each chip has its own
    # 400 GB/s x 0.5 split over the 3 other boards of the cluster.
    assert topo.route(0, 8).bandwidth_bytes_per_s == pytest.approx(200e9 / 3)


def test_switch_at_level_zero() -> None:
    topo, sink = _topology(fabric0="switch")
    assert _names(topo, sink, 2, 3) == ["chip2.L0.tx", "chip3.L0.rx"]
    assert topo.route(2, 3).bandwidth_bytes_per_s == pytest.approx(700e9)


def test_resources_are_created_lazily_and_routes_are_cached() -> None:
    topo, sink = _topology()
    assert sink.names == []
    topo.route(0, 8)
    assert sink.names == ["chip0.L1.tx", "chip8.L1.rx"]
    assert topo.route(0, 8) is topo.route(0, 8)
    topo.route(0, 16)                      # reuses chip0's tx port
    assert sink.names == ["chip0.L1.tx", "chip8.L1.rx", "chip16.L1.rx"]
    assert topo.resource_ids == {name: i for i, name in enumerate(sink.names)}


pairs = st.lists(
    st.tuples(st.integers(0, 63), st.integers(0, 63)).filter(lambda p: p[0] != p[1]), max_size=40
)


@given(calls=pairs)
def test_same_call_order_gives_same_resources(calls: list[tuple[int, int]]) -> None:
    results = []
    for _ in range(2):
        topo, sink = _topology(n_chips=64)
        routes = [topo.route(a, b) for a, b in calls]
        results.append((sink.names, routes))
    assert results[0] == results[1]
    names = results[0][0]
    assert len(names) == len(set(names))      # never the same resource twice


def test_too_many_chips_is_a_user_error_naming_the_field() -> None:
    with pytest.raises(UserInputError) as info:
        Topology(three_level_cluster(), 1025, RecordingSink())
    message = str(info.value)
    assert "n_chips" in message and "1024" in message and "\n" not in message
    with pytest.raises(UserInputError):
        Topology(three_level_cluster(), 0, RecordingSink())


def test_routing_to_self_or_outside_the_topology_is_refused() -> None:
    topo, _ = _topology(n_chips=16)
    with pytest.raises(ValueError, match="itself"):
        topo.route(3, 3)
    with pytest.raises(ValueError):
        topo.route(0, 16)
    with pytest.raises(ValueError):
        topo.route(-1, 0)


def test_transfer_time_is_bytes_over_effective_bandwidth_rounded_up() -> None:
    topo, _ = _topology()
    route = topo.route(0, 1)                  # 100 GB/s = 100 bytes per ns
    assert topo.transfer_ns(route, 10**9) == 10_000_000
    assert topo.transfer_ns(route, 1) == 1
    assert topo.transfer_ns(route, 101) == 2
    assert topo.transfer_ns(route, 0) == 0
    with pytest.raises(ValueError):
        topo.transfer_ns(route, -1)


@given(nbytes=st.integers(0, 10**12), extra=st.integers(0, 10**12))
def test_transfer_time_is_monotone_in_bytes(nbytes: int, extra: int) -> None:
    topo, _ = _topology()
    route = topo.route(0, 8)
    assert topo.transfer_ns(route, nbytes + extra) >= topo.transfer_ns(route, nbytes)


def test_two_flows_on_one_port_take_twice_as_long_in_the_kernel() -> None:
    graph = TaskGraph()

    class Sink:
        def add_resource(self, name: str, chip: int, role: str) -> int:
            return graph.add_resource(name)

    topo = Topology(three_level_cluster(), 64, Sink())
    nbytes = 2 * 10**9                       # 10 ms at 200 GB/s
    one = topo.transfer_ns(topo.route(0, 8), nbytes)
    for dst in (8, 16):                      # both leave chip 0 through its L1 tx port
        route = topo.route(0, dst)
        graph.add_task(
            f"send0->{dst}", topo.transfer_ns(route, nbytes), route.resources,
            tail_ns=route.latency_ns, nbytes=nbytes,
        )
    assert graph.run().makespan_ns == 2 * one + 1000


@given(pairs=st.lists(st.tuples(st.integers(0, 63), st.integers(0, 63), st.integers(0, 10**10)),
                      max_size=40),
       fabrics=st.sampled_from([("full_mesh", "switch"), ("switch", "full_mesh"),
                                ("switch", "switch"), ("full_mesh", "full_mesh")]))
def test_vector_routes_equal_scalar_routes(pairs: list[tuple[int, int, int]],
                                           fabrics: tuple[str, str]) -> None:
    """routes() (arrays, as the graph builder uses it) gives every transfer the resources, hold
    time and latency that route() + transfer_ns() give it, on a topology shared by both."""
    import numpy as np

    pairs = [(a, b, n) for a, b, n in pairs if a != b]
    sink = RecordingSink()
    topo = Topology(three_level_cluster(*fabrics), 64, sink)
    src = np.array([p[0] for p in pairs], np.int64)
    dst = np.array([p[1] for p in pairs], np.int64)
    nbytes = np.array([p[2] for p in pairs], np.int64)
    res, hold, latency = topo.routes(src, dst, nbytes)
    for i, (a, b, n) in enumerate(pairs):
        route = topo.route(a, b)
        assert tuple(r for r in res[i].tolist() if r >= 0) == route.resources
        assert hold[i] == topo.transfer_ns(route, n)
        assert latency[i] == route.latency_ns
    # Every resource belongs to the chip that uses it and says what it is.
    assert all(owner >= 0 for owner in sink.owners)
    assert set(sink.roles) <= {"tx", "rx", "link"}
