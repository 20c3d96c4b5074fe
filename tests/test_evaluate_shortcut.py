"""The opt-in periodic-layer shortcut against the full simulation (the default).

The shortcut simulates a few layers and extrapolates only if every task of the compared periods
started and ended exactly one period after its counterpart. These tests hold it to the full
simulation (latency, CP bytes, busy time per op kind, utilisation) on the configurations where
an earlier, weaker check went wrong, on MoE with TP and across hosts, and on a fuzzed matrix.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from ctxplan import api
from ctxplan.errors import UserInputError
from ctxplan.evaluate import EvalResult, evaluate
from ctxplan.evaluate.simulate import _shift_of
from ctxplan.sim import SimResult

# model, chip, cluster, context, phase, cp, extra
REPROS = [
    # Issue 10's three repros: the last-completion check said "periodic", the schedule was not.
    ("deepseek-v3", "h200", None, 55509, "prefill", 2, {"tp": 8, "batch": 2}),
    ("deepseek-v3", "sg2262", "hgx-h100-ib", 24973, "prefill", 2, {"tp": 8, "batch": 3}),
    ("qwen3-235b-a22b", "h200", None, 1, "prefill", 5, {"tp": 2}),
]
CASES = [
    ("deepseek-v3", "sg2262", None, "128K", "prefill", 8, {}),
    ("deepseek-v3", "sg2262", None, "1M", "decode", 16, {}),
    ("deepseek-v3", "sg2262", None, "8K", "decode", 8, {"batch": 3, "kv_tier": "mla-fp8"}),
    ("deepseek-v3", "h100-gt500", "grand-teton-rdma", "32K", "prefill", 3, {"tp": 8}),
    ("qwen3-235b-a22b", "h100-sxm", None, "32K", "decode", 8, {"tp": 4, "batch": 3}),
    ("llama3.1-70b", "h100-sxm", None, "128K", "prefill", 4, {"tp": 8}),
    ("llama3.1-8b", "h100-sxm", None, "100000", "decode", 3, {"tp": 2, "batch": 5}),
    # 32 ranks, 8 slots a token spread over the pool (SIM_VERSION 13): the schedule does not
    # settle into a pure shift in the layers tried, so the shortcut simulates in full
    ("deepseek-v3", "sg2262", None, "8K", "decode", 32, {"batch": 3, "kv_tier": "mla-fp8"}),
    # DP attention: four DP ranks of TP 2, the experts over all eight chips
    ("deepseek-v3", "h200", None, "8K", "decode", 1,
     {"tp": 2, "dp": 4, "batch": 8, "kv_tier": "mla-fp8"}),
]


def _pair(model, chip, cluster, context, phase, cp, extra) -> tuple[EvalResult, EvalResult]:
    cfg = api.eval_config(model, chip, context, phase, cp, cluster=cluster, **extra)
    full, _ = evaluate(cfg)
    short, _ = evaluate(cfg.with_policy(periodic_shortcut=True))
    return full, short


def _assert_same(full: EvalResult, short: EvalResult) -> None:
    assert short.latency_s == full.latency_s
    assert short.comm == full.comm
    assert short.busy_s_by_kind == pytest.approx(full.busy_s_by_kind, rel=1e-12)
    assert short.max_compute_utilisation == pytest.approx(full.max_compute_utilisation,
                                                          abs=2e-6)
    assert short.max_link_utilisation == pytest.approx(full.max_link_utilisation, abs=2e-6)


@pytest.mark.parametrize(("model", "chip", "cluster", "context", "phase", "cp", "extra"),
                         REPROS + CASES)
def test_shortcut_equals_full_simulation(model, chip, cluster, context, phase, cp, extra):
    full, short = _pair(model, chip, cluster, context, phase, cp, extra)
    m = api.resolve_model(model)
    assert full.layers_simulated == m.num_hidden_layers   # the default simulates every layer
    _assert_same(full, short)


def test_the_shortcut_is_taken_where_it_can_be():
    """Otherwise the comparisons above would compare the full simulation with itself."""
    taken = [_pair(*case)[1].layers_simulated < api.resolve_model(case[0]).num_hidden_layers
             for case in CASES[:3]]
    assert all(taken)


def test_shortcut_fuzz_moe_tp_cross_host():
    rng = random.Random(20261130)
    layouts = [("deepseek-v3", "sg2262", None), ("deepseek-v3", "h200", None),
               ("deepseek-v3", "sg2262", "hgx-h100-ib"), ("qwen3-235b-a22b", "h200", None),
               ("qwen3-235b-a22b", "h100-gt500", "grand-teton-rdma")]
    for _ in range(12):
        model, chip, cluster = rng.choice(layouts)
        phase = rng.choice(["prefill", "decode"])
        tp = rng.choice([1, 2, 4, 8])
        cp = rng.choice([1, 2, 3, 5]) if phase == "prefill" else rng.choice([2, 3, 7, 16])
        context = rng.choice([1, 999, 4096, 24973, 55509])
        extra = {"tp": tp, "batch": rng.choice([1, 2, 3])}
        try:
            full, short = _pair(model, chip, cluster, context, phase, cp, extra)
        except UserInputError:
            continue  # a layout the model or cluster refuses
        if full.simulated:
            _assert_same(full, short)


def _result(start: list[int], end: list[int]) -> SimResult:
    end_a = np.array(end, np.int64)
    dur = np.array(end, np.int64) - np.array(start, np.int64)
    return SimResult(int(end_a.max()), end_a, np.zeros(0, np.int64), np.zeros(0, np.int64), 0,
                     dur, np.zeros(len(end), np.int32), np.full(len(end), -1, np.int32))


def test_shift_check_looks_at_every_task_not_only_the_last():
    # Three periods of two tasks; the second task of each ends last and is exactly periodic.
    start = [0, 0, 10, 10, 20, 20]
    end = [5, 9, 15, 19, 25, 29]
    assert _shift_of(_result(start, end), 4, 2, 2) == 10
    drift = list(end)
    drift[2] = 16   # a task that is not the last of its period drifts by 1 ns
    start_d = list(start)
    start_d[2] = 11
    assert _shift_of(_result(start_d, drift), 4, 2, 2) is None
