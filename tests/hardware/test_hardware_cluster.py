"""Cluster and Level: nesting rules, max_chips, and which level a pair of chips talks at."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxplan.hardware import Cluster, Level
from tests.hardware._builders import three_level_cluster


def test_max_chips_is_the_outermost_group() -> None:
    assert three_level_cluster().max_chips == 1024


@pytest.mark.parametrize(
    ("a", "b", "level"),
    [
        (0, 1, 0),
        (0, 7, 0),
        (8, 15, 0),
        (7, 8, 1),      # neighbours across a board boundary
        (0, 31, 1),
        (31, 32, 2),    # across a cluster boundary
        (0, 1023, 2),
        (1016, 1023, 0),
    ],
)
def test_level_of_is_the_innermost_common_group(a: int, b: int, level: int) -> None:
    cluster = three_level_cluster()
    assert cluster.level_of(a, b) == level
    assert cluster.level_of(b, a) == level


@given(a=st.integers(0, 1023), b=st.integers(0, 1023))
def test_level_of_matches_group_membership(a: int, b: int) -> None:
    if a == b:
        return
    cluster = three_level_cluster()
    index = cluster.level_of(a, b)
    size = cluster.levels[index].chips_per_group
    assert a // size == b // size
    if index > 0:
        inner = cluster.levels[index - 1].chips_per_group
        assert a // inner != b // inner


def test_level_of_refuses_self_and_outside_chips() -> None:
    cluster = three_level_cluster()
    with pytest.raises(ValueError):
        cluster.level_of(3, 3)
    with pytest.raises(ValueError):
        cluster.level_of(0, 1024)
    with pytest.raises(ValueError):
        cluster.level_of(-1, 0)


def test_units_meeting_at_each_level() -> None:
    cluster = three_level_cluster()
    assert [cluster.units_meeting_at(i) for i in range(3)] == [8, 4, 32]


def _cluster(*sizes: int) -> Cluster:
    levels = tuple(Level(f"l{i}", size, "switch", 1e9, 10, 1.0) for i, size in enumerate(sizes))
    return Cluster("c", "toy", levels, "test", False)


@pytest.mark.parametrize("sizes", [(), (8, 8), (8, 4), (8, 12)])
def test_groups_must_nest(sizes: tuple[int, ...]) -> None:
    with pytest.raises(ValueError):
        _cluster(*sizes)


@pytest.mark.parametrize(
    "args",
    [
        ("x", 0, "switch", 1e9, 10, 1.0),
        ("x", 8, "ring", 1e9, 10, 1.0),
        ("x", 8, "switch", 0.0, 10, 1.0),
        ("x", 8, "switch", float("nan"), 10, 1.0),
        ("x", 8, "switch", 1e9, -1, 1.0),
        ("x", 8, "switch", 1e9, 10, 0.0),
        ("x", 8, "switch", 1e9, 10, 1.01),
    ],
)
def test_invalid_levels_are_refused(args: tuple[object, ...]) -> None:
    with pytest.raises(ValueError):
        Level(*args)  # type: ignore[arg-type]


def test_cluster_is_hashable_and_levels_are_a_tuple() -> None:
    levels = [Level("l0", 8, "switch", 1e9, 10, 1.0)]
    cluster = Cluster("c", "toy", levels, "test", False)  # type: ignore[arg-type]
    assert isinstance(cluster.levels, tuple)
    assert cluster == _cluster(8)
    assert hash(cluster) == hash(_cluster(8))
