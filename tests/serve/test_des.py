"""The request-level simulation: the prefill queue and the decode pool's continuous batching,
against hand-worked cases and a token-by-token reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxplan.serve.des import run_decode, run_prefill
from tests.serve.reference import reference_decode


@dataclass
class LinearSteps:
    """A synthetic decode instance: step = base + per_token * (batch x context); memory holds
    ``capacity_tokens`` tokens of KV."""

    base_s: float
    per_token_s: float
    capacity_tokens: int

    def step_s(self, batch: int, context_length: int) -> float:
        return self.base_s + self.per_token_s * batch * context_length

    def fits(self, batch: int, context_length: int) -> bool:
        return batch * context_length <= self.capacity_tokens


def test_prefill_is_first_come_first_served_on_the_instance_that_frees_first() -> None:
    arrivals = np.array([0.0, 1.0, 2.0, 2.5])
    service = np.array([10.0, 3.0, 4.0, 1.0])
    run = run_prefill(arrivals, service, 2)
    # r0 on A [0, 10]; r1 on B [1, 4]; r2 on B [4, 8]; r3 waits for B: [8, 9].
    assert run.done_s.tolist() == [10.0, 4.0, 8.0, 9.0]
    assert run.busy_s == 18.0 and run.span_s == 10.0


def test_a_lone_request_decodes_at_the_simulated_step_of_batch_one() -> None:
    steps = LinearSteps(0.01, 0.0, 10**9)
    run = run_decode(np.array([5.0]), np.array([1000]), 1, 99, 1.0, (1000,), steps)
    assert run.done_s[0] == pytest.approx(5.0 + 99 * 0.01)
    assert run.mean_batch == 1.0 and run.steps == 99


def test_a_request_joins_at_the_next_step_boundary_and_slows_the_batch() -> None:
    steps = LinearSteps(0.0, 0.001, 10**9)   # step = batch x 1 ms at context 1
    ready = np.array([0.0, 0.0025])          # the second arrives mid-step
    run = run_decode(ready, np.array([1, 1]), 1, 4, 1.0, (1,), steps)
    # r0 alone: steps end at 1, 2, 3 ms; r1 joins at 3 ms; then 2 ms steps: r0's 4th step ends
    # at 5 ms; r1 alone again after it: 7, 8, 9 ms... r1 has 4 steps: 5, 6 (alone: 1 ms), 7, 8.
    assert run.done_s[0] == pytest.approx(0.005)
    assert run.done_s[1] == pytest.approx(0.008)


def test_memory_and_the_tpot_target_limit_the_batch() -> None:
    ready = np.zeros(6)
    lengths = np.full(6, 100)
    # Memory holds 3 sequences: the other three wait for a slot.
    run = run_decode(ready, lengths, 1, 10, 1.0, (100,), LinearSteps(0.0, 1e-4, 300))
    assert run.mean_batch <= 3 and np.sum(run.done_s == run.done_s.min()) == 3
    # The target allows batches whose step is <= 0.02 s: two sequences (0.02), not three.
    run = run_decode(ready, lengths, 1, 10, 0.02, (100,), LinearSteps(0.0, 1e-4, 10**9))
    assert run.mean_batch <= 2


def test_requests_go_to_the_instance_with_the_fewest_sequences() -> None:
    steps = LinearSteps(0.01, 0.0, 10**9)
    run = run_decode(np.array([0.0, 0.001, 0.002]), np.array([1, 1, 1]), 3, 10, 1.0, (1,),
                     steps)
    # Three instances, three requests: each decodes alone.
    assert np.allclose(run.done_s - np.array([0.0, 0.001, 0.002]), 0.1)


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(1, 40),
    instances=st.integers(1, 4),
    steps_per_request=st.integers(1, 30),
    base=st.floats(1e-3, 2e-2),
    per_token=st.floats(1e-7, 1e-5),
    capacity=st.integers(1000, 12000),
    limit=st.floats(5e-3, 0.2),
    gaps=st.lists(st.floats(1e-4, 0.5), min_size=40, max_size=40),
    classes=st.lists(st.integers(0, 2), min_size=40, max_size=40),
)
def test_jumping_between_batch_changes_equals_stepping_token_by_token(
        n: int, instances: int, steps_per_request: int, base: float, per_token: float,
        capacity: int, limit: float, gaps: list[float], classes: list[int]) -> None:
    lengths_of = (300, 700, 1000)
    grid = (300, 400, 500, 700, 850, 1000)
    ready = np.cumsum(np.array(gaps[:n]))
    lengths = np.array([lengths_of[c] for c in classes[:n]], np.int64)
    steps = LinearSteps(base, per_token, capacity)
    fast = run_decode(ready, lengths, instances, steps_per_request, limit, grid, steps)
    slow = reference_decode(ready.tolist(), lengths.tolist(), instances, steps_per_request,
                            limit, grid, steps)
    np.testing.assert_allclose(fast.done_s, slow, rtol=1e-9)
