"""Memory from the schedule (mapping/buffers.py): the peak of live bytes per chip after a run,
the buffers the emitters declare, and the capacity wall's lower bound under it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxplan import api
from ctxplan.config.hardware_presets import load_chip, load_cluster
from ctxplan.evaluate import check_memory, evaluate
from ctxplan.mapping.buffers import BufferLog
from ctxplan.mapping.builder import GraphBuilder, Work
from tests.mapping.test_mapping_tiling import CONFIGS, _build, _name


def _tiny() -> GraphBuilder:
    chip = load_chip("h100-sxm")
    return GraphBuilder(chip, load_cluster(chip.default_cluster), 2)


def test_the_peak_of_a_small_graph_equals_a_hand_count():
    b = _tiny()
    work = [Work("memory", 0.0, 3.0e9, "bf16")]          # ~1 ms each on an H100
    a = b.compute([0], "a", work)                         # chip 0: a, then c
    s = b.send([0], [1], 10_000_000, "x", a)              # a's output to chip 1
    c = b.compute([0], "c", work, a)
    d = b.compute([1], "d", work, s)                      # chip 1 uses what arrived
    b.buffer([0], 100, a, c)          # a's output lives until c is done (and the send)
    b.buffer([0], 40, c, c)           # c's scratch
    b.buffer([1], 70, s, d)           # the received message, on the receiver
    b.buffer([1], 5, d, kv=True)      # KV written by d: to the phase's end
    res = b.run()
    peaks = b.buffers.peaks(res.start_ns, res.end_ns, res.makespan_ns)
    # chip 0: 100 during a and c, 40 more during c; chip 1: 70 during s and d, plus 5 of KV
    # from d's start
    assert peaks.total.tolist() == [140, 75]
    assert peaks.transient.tolist() == [140, 70]
    assert peaks.kv_end.tolist() == [0, 5]


def test_a_release_before_an_allocation_at_the_same_instant_reuses_the_space():
    log = BufferLog(1)
    log.add(0, [0], 10, [0], [0])      # task 0: [0, 5]
    log.add(0, [0], 10, [1], [1])      # task 1: [5, 9]
    start, end = np.array([0, 5]), np.array([5, 9])
    assert log.peaks(start, end, 9).total.tolist() == [10]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(1, 1000), st.integers(0, 50),
                          st.integers(0, 50), st.booleans()), min_size=1, max_size=30))
def test_the_peak_equals_a_brute_force_sweep(spans):
    """Buffers over random intervals, some of them KV: the sorted sweep's peaks per chip (all
    bytes, and the transient ones alone, from one sort) equal the most bytes live at any
    instant, counted by brute force (half-open [alloc, release))."""
    log = BufferLog(3)
    start, end = [], []
    for i, (chip, size, t0, length, kv) in enumerate(spans):
        start.append(t0)
        end.append(t0 + length)
        log.add(0, [chip], size, [i], [i], kv=kv)
    start_a, end_a = np.array(start), np.array(end)
    peaks = log.peaks(start_a, end_a, int(end_a.max()))
    for chip in range(3):
        for kinds, got in (((False, True), peaks.total), ((False,), peaks.transient)):
            live = [sum(size for (c, size, t0, length, kv) in spans
                        if c == chip and kv in kinds and t0 <= t < t0 + length)
                    for t in range(0, 101)]
            assert got[chip] == max(live)


@pytest.mark.parametrize("case", CONFIGS, ids=_name)
def test_tiled_buffers_equal_written_out_buffers(case):
    tiled, written = _build(case, True), _build(case, False)
    r1, r2 = tiled.run(), written.run()
    p1 = tiled.buffers.peaks(r1.start_ns, r1.end_ns, r1.makespan_ns)
    p2 = written.buffers.peaks(r2.start_ns, r2.end_ns, r2.makespan_ns)
    assert p1.total.tolist() == p2.total.tolist()
    assert p1.transient.tolist() == p2.transient.tolist()
    assert p1.kv_end.tolist() == p2.kv_end.tolist()


BOUND_CASES = [
    # model, chip, cluster, context, phase, cp, tp, batch, cached, chunk
    ("deepseek-v3", "sg2262", None, 20_000, "prefill", 8, 1, 1, 0, "off"),        # MoE EP
    ("deepseek-v3", "sg2262", None, 20_000, "prefill", 8, 1, 1, 0, 4096),         # chunked
    ("deepseek-v3", "h200", "hgx-h200-ib", 9000, "prefill", 2, 8, 1, 0, "off"),   # TP, hosts
    ("llama3.1-8b", "h100-sxm", None, 30_000, "prefill", 3, 2, 2, 10_000, 8192),  # cached
    ("qwen3-235b-a22b", "h100-sxm", None, 9000, "decode", 3, 4, 3, 0, "off"),
    ("gpt-oss-20b", "h100-sxm", None, 9000, "prefill", 3, 2, 1, 0, 2048),         # windows
    ("qwen3-next-80b-a3b", "h100-sxm", None, 6000, "prefill", 2, 2, 1, 0, 2000),  # states
]


@pytest.mark.parametrize("case", BOUND_CASES, ids=lambda c: f"{c[0]}-{c[4]}-cp{c[5]}-"
                         f"tp{c[6]}-chunk{c[9]}")
def test_the_capacity_wall_never_exceeds_the_simulated_peak(case):
    model, chip, cluster, S, phase, cp, tp, batch, cached, chunk = case
    cfg = api.eval_config(model, chip, S, phase, cp, cluster=cluster, tp=tp, batch=batch,
                          cached=cached, prefill_chunk=chunk)
    bound = check_memory(cfg)
    got, _ = evaluate(cfg)
    assert got.memory.activation_source == "simulated"
    assert bound.per_chip_bytes <= got.memory.per_chip_bytes
    assert bound.kv_bytes <= got.memory.kv_bytes
    assert got.memory.transient_peak_bytes > 0
