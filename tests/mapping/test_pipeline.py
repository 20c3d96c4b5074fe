"""Pipeline parallelism (mapping/stages.py, mapping/pipeline.py, the pipelined schedules of
mapping/prefill.py and mapping/decode.py): stages, bytes between them, the schedule."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxplan import api
from ctxplan.evaluate import build_graph, evaluate
from ctxplan.mapping import ops
from ctxplan.mapping.memory import weight_bytes_per_chip
from ctxplan.mapping.stages import balanced_split


def _cfg(phase="prefill", *, pp=1, name="llama3.1-8b", chip="h100-sxm", S=16_384, cp=1, tp=1,
         chunk="off", batch=1, **kw):
    return api.eval_config(name, chip, S, phase, cp, tp=tp, pp=pp, batch=batch,
                           prefill_chunk=chunk, **kw)


@given(st.lists(st.integers(1, 50), min_size=1, max_size=24), st.integers(1, 8))
@settings(max_examples=60, deadline=None)
def test_stages_are_contiguous_non_empty_and_cover_every_layer(costs, pp):
    pp = min(pp, len(costs))
    stages = balanced_split(tuple(costs), pp)
    assert len(stages) == pp and stages[0][0] == 0 and stages[-1][1] == len(costs) - 1
    assert all(a <= b for a, b in stages)
    assert all(stages[i][1] + 1 == stages[i + 1][0] for i in range(pp - 1))


@given(st.lists(st.integers(1, 50), min_size=2, max_size=16), st.integers(2, 6))
@settings(max_examples=40, deadline=None)
def test_the_split_minimises_the_costliest_stage(costs, pp):
    """Against every split into pp contiguous stages (brute force over the cut points)."""
    import itertools

    pp = min(pp, len(costs))
    stages = balanced_split(tuple(costs), pp)
    got = max(sum(costs[a:b + 1]) for a, b in stages)
    best = min(max(sum(costs[i:j]) for i, j in zip((0, *cuts), (*cuts, len(costs)),
                                                      strict=True))
               for cuts in itertools.combinations(range(1, len(costs)), pp - 1))
    assert got == best


def _reference_split(costs: tuple[int, ...], pp: int) -> tuple[tuple[int, int], ...]:
    """balanced_split's dynamic programme without its early stop: every start of the last
    stage weighed."""
    n = len(costs)
    prefix = [0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    inf = (float("inf"), float("inf"))
    best = [[inf] * (n + 1) for _ in range(pp + 1)]
    choice = [[0] * (n + 1) for _ in range(pp + 1)]
    best[0][0] = (0, 0)
    for s in range(1, pp + 1):
        for j in range(s, n - (pp - s) + 1):
            top, pick = inf, 0
            for i in range(j - 1, s - 2, -1):
                if best[s - 1][i] == inf:
                    continue
                c = prefix[j] - prefix[i]
                cand = (max(best[s - 1][i][0], c), best[s - 1][i][1] + c * c)
                if cand < top:
                    top, pick = cand, i
            best[s][j], choice[s][j] = top, pick
    out, j = [], n
    for s in range(pp, 0, -1):
        out.append((choice[s][j], j - 1))
        j = choice[s][j]
    return tuple(reversed(out))


@given(st.lists(st.integers(1, 5), min_size=1, max_size=40), st.integers(1, 8))
@settings(max_examples=80, deadline=None)
@example([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], 4)
def test_the_early_stop_gives_the_full_programmes_split(costs, pp):
    """The split with its early stop is the full dynamic programme's, ties included (small
    costs make many ties)."""
    pp = min(pp, len(costs))
    assert balanced_split(tuple(costs), pp) == _reference_split(tuple(costs), pp)


def test_equal_layers_split_with_the_larger_stages_first():
    """61 equal layers over 4 stages: 16/15/15/15, as engines split DeepSeek-V3."""
    stages = balanced_split((7,) * 61, 4)
    assert [b - a + 1 for a, b in stages] == [16, 15, 15, 15]


def test_pp1_is_todays_graph_task_for_task():
    for phase, kw in (("prefill", dict(chunk=4096, cp=2, tp=2)), ("decode", dict(batch=3, cp=2))):
        a = build_graph(_cfg(phase, **kw))
        b = build_graph(replace(_cfg(phase, **kw), pp=1))
        for name in ("duration_ns", "nbytes"):
            assert np.array_equal(getattr(a.graph, name), getattr(b.graph, name))
        assert a.kind == b.kind


@pytest.mark.parametrize("phase,kw", [
    ("prefill", dict(chunk=4096)),
    ("prefill", dict(chunk=3000, cp=2, tp=2)),
    ("prefill", dict(name="deepseek-v3", chip="h200", S=8192, tp=8, chunk=2048)),
    ("decode", dict(batch=4, cp=2)),
    ("decode", dict(name="deepseek-v3", chip="h200", S=8192, tp=8, batch=3)),
])
@pytest.mark.parametrize("pp", [2, 3])
def test_stage_bytes_are_conserved(phase, kw, pp):
    """What moves between stages equals the closed form: each TP chip's 1 / TP share of its
    rank's tokens x residual width x activation bytes, and the ring all-gather of the shares,
    (pp - 1) times per chunk or micro-batch."""
    got, _ = evaluate(_cfg(phase, pp=pp, **kw))
    assert got.pp_comm is not None
    assert got.pp_comm.simulated_bytes == got.pp_comm.analytic_bytes > 0
    assert len(got.stages) == pp


def test_a_pipeline_of_one_chunk_is_no_faster_than_pp1():
    one, _ = evaluate(_cfg(pp=1))
    for pp in (2, 4):
        piped, _ = evaluate(_cfg(pp=pp))
        assert piped.latency_s >= one.latency_s


def test_chunks_flowing_through_stages_overlap():
    """Stage s works on chunk k while stage s + 1 works on chunk k - 1: with 16 chunks over 4
    stages the prefill is much faster than one stage doing all of it, and the stages' spans of
    consecutive chunks overlap in time."""
    flat, _ = evaluate(_cfg(pp=1, chunk=1024))
    got, tr = evaluate(_cfg(pp=4, chunk=1024), trace=True)
    assert got.latency_s < 0.5 * flat.latency_s
    b, res = tr.builder, tr.result
    span = {(k, s): (res.start_ns[a:e].min(), res.end_ns[a:e].max())
            for k, s, a, e in b.pipeline_spans}
    assert span[(1, 0)][0] < span[(0, 1)][1]          # stage 0 on chunk 1 while stage 1 on 0
    for (k, s), (start, _) in span.items():
        if k:
            assert start >= span[(k - 1, s)][1]       # a stage finishes chunk k - 1 first
        if s:
            assert start >= span[(k, s - 1)][0]


def test_more_stages_never_increase_a_chips_weight_bytes():
    for name, chip, tp in (("llama3.1-8b", "h100-sxm", 1), ("deepseek-v3", "h200", 8)):
        last = None
        for pp in (1, 2, 3, 4, 8):
            cfg = _cfg("decode", name=name, chip=chip, tp=tp, pp=pp)
            w = weight_bytes_per_chip(cfg.model, cfg.layout())
            assert last is None or w <= last
            last = w


def test_decode_micro_batches_interleave_and_tpot_is_one_micro_batchs_span():
    """With batch > 1 the micro-batches keep the stages busy: the step of the whole batch ends
    before pp one-micro-batch steps in a row would, and a sequence's TPOT (its micro-batch's
    span) is at least one micro-batch through every stage."""
    cfg = _cfg("decode", pp=2, batch=4, cp=1)
    got, tr = evaluate(cfg, trace=True)
    single, _ = evaluate(replace(cfg, batch=2))
    assert got.pp_comm.micro_batches == 2
    assert got.latency_s >= single.latency_s * 0.999
    assert tr.result.makespan_ns < 2 * single.latency_s * 1e9


def test_dynamic_chunks_even_the_stage_times():
    """Equal chunks: later ones attend to more context and take longer on a stage; dynamic
    chunks (decreasing sizes) bring the stage times of the chunks closer together."""
    def spread(chunk: str | int) -> float:
        _, tr = evaluate(_cfg(pp=2, S=65_536, chunk=chunk), trace=True)
        res = tr.result
        times = [res.end_ns[a:e].max() - res.start_ns[a:e].min()
                 for k, s, a, e in tr.builder.pipeline_spans if s == 0]
        return max(times) / min(times)

    n = _cfg(pp=2, S=65_536, chunk="dynamic").dynamic_chunks()
    assert spread("dynamic") < spread(-(-65_536 // n))


def test_the_handoff_maps_each_layer_to_the_stage_that_keeps_it():
    cfg = replace(_cfg(pp=2, chunk=4096, handoff_to=1), handoff_pp=3)
    got, tr = evaluate(cfg, trace=True)
    assert got.handoff.bytes_moved == got.handoff.decode_kv_bytes
    b = tr.builder
    lay_p, lay_d = cfg.layout(), cfg.handoff_layout()
    moving = b.mask_of(["kv_handoff"])
    for t in np.flatnonzero(moving):
        layer = int(b.layer[t])
        src, dst = int(b.chip_of[t]), int(b.peer[t]) - got.handoff.first_decode_chip
        assert any(a <= layer <= e and src == s for s, (a, e) in enumerate(lay_p.stages))
        assert any(a <= layer <= e and dst == s for s, (a, e) in enumerate(lay_d.stages))


def test_memory_of_a_pipeline_is_the_fullest_stages_and_fits_by_the_simulated_peak():
    got, _ = evaluate(_cfg(pp=2, chunk=4096))
    one, _ = evaluate(_cfg(pp=1, chunk=4096))
    assert got.memory.activation_source == "simulated"
    assert got.memory.weights_bytes < one.memory.weights_bytes
    assert got.memory.kv_bytes < one.memory.kv_bytes


def test_auto_chunks_at_least_four_per_stage():
    got, _ = evaluate(_cfg(pp=4, chunk="auto"))
    assert got.prefill_chunk.chunks >= 16


def test_a_pipeline_kind_of_transfer_is_comm():
    assert ops.PP_SEND in ops.COMM_KINDS and ops.PP_ALLGATHER in ops.COMM_KINDS
