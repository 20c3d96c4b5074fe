"""The compiled kernel sizes its lanes and wait-queue pool up front and reruns with twice the
room when one overflows (its main loop never reallocates). With the room made tiny, every
overflow, compaction and rerun path runs, and the schedules still equal the reference's."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from ctxplan.sim import TaskGraph, compiled
from tests.sim.graphs import pass_kv_ring, random_spec

STATUSES: Counter[int] = Counter()


@pytest.fixture
def tiny_room(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(TaskGraph, "initial_lane_cap", 1)
    monkeypatch.setattr(TaskGraph, "initial_pool_cap_per_resource", 0)
    monkeypatch.setattr(TaskGraph, "initial_pool_extra", 0)
    monkeypatch.setattr(TaskGraph, "initial_pool_tasks_per_slot", 10**9)
    real = compiled.run_compiled

    def counting(*args: Any) -> Any:
        out = real(*args)
        STATUSES[int(out[0])] += 1
        return out

    monkeypatch.setattr(compiled, "run_compiled", counting)
    yield


@pytest.mark.usefixtures("tiny_room")
def test_overflowing_room_gives_the_reference_schedule() -> None:
    rng = random.Random(77)
    for _ in range(300):
        spec = random_spec(rng)
        assert spec.run() == spec.run("reference")


@pytest.mark.usefixtures("tiny_room")
def test_contended_rings_with_tiny_room() -> None:
    rng = random.Random(5)
    for p in (3, 8):
        comp = [[rng.randint(0, 50) for _ in range(12)] for _ in range(p)]
        xfer = [[rng.randint(0, 50) for _ in range(12)] for _ in range(p)]
        spec, _ = pass_kv_ring(comp, xfer, tail=rng.randint(1, 20))
        assert spec.run() == spec.run("reference")


def test_the_regrowth_paths_ran() -> None:
    """Both overflows happened above (else those tests would test the easy path only)."""
    assert STATUSES[compiled.LANE_FULL] > 0
    assert STATUSES[compiled.POOL_FULL] > 0
