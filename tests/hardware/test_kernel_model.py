"""The kernel model of issue 26: size terms monotone after rounding, the roofline never beaten,
kernel floors per class, the launch modes, and the files' compatibility (op_overhead_us)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxplan.config.hardware_presets import chip_from_dict, efficiency_defaults, load_chip
from ctxplan.hardware.chip import DEVICE, EAGER, GRAPH
from ctxplan.hardware.efficiency import (
    ATTENTION,
    MATMUL,
    ClassEfficiency,
    shape_factor,
    shape_factor_array,
)

sizes = st.floats(min_value=0.0, max_value=1e7, allow_nan=False, allow_infinity=False)
params = st.floats(min_value=0.0, max_value=4096.0, allow_nan=False, allow_infinity=False)


@given(a=sizes, b=sizes, half=params, tile=params, depth=params)
@example(a=63.0, b=64.0, half=128.0, tile=64.0, depth=340.0)
@example(a=1.0, b=1.0000000000000002, half=0.2, tile=16.0, depth=0.0)
@settings(max_examples=300, deadline=None)
def test_matmul_factor_never_rises_for_a_smaller_kernel(a: float, b: float, half: float,
                                                        tile: float, depth: float) -> None:
    """Fewer rows or a shorter K never run at a higher fraction of peak, bit for bit."""
    small, large = sorted((a, b))
    f = shape_factor
    # (0 is "unknown", not a size: sizes start at 1 row.)
    assert (f(MATMUL, half, small + 1, 0.0, tile_rows=tile, depth_half=depth, k_depth=4096.0)
            <= f(MATMUL, half, large + 1, 0.0, tile_rows=tile, depth_half=depth,
                 k_depth=4096.0))
    assert (f(MATMUL, half, 128.0, 0.0, tile_rows=tile, depth_half=depth, k_depth=small + 1)
            <= f(MATMUL, half, 128.0, 0.0, tile_rows=tile, depth_half=depth, k_depth=large + 1))


@given(a=sizes, b=sizes, half=params, tile=params, q=sizes)
@example(a=983.0, b=983.0000000000001, half=983.0, tile=64.0, q=16.0)
@settings(max_examples=300, deadline=None)
def test_attention_factor_never_rises_for_a_smaller_kernel(a: float, b: float, half: float,
                                                           tile: float, q: float) -> None:
    small, large = sorted((a, b))
    f = shape_factor
    assert (f(ATTENTION, half, 0.0, small + 1, tile_rows=tile, q_rows=q + 1)
            <= f(ATTENTION, half, 0.0, large + 1, tile_rows=tile, q_rows=q + 1))
    assert (f(ATTENTION, half, 0.0, 4096.0, tile_rows=tile, q_rows=small + 1)
            <= f(ATTENTION, half, 0.0, 4096.0, tile_rows=tile, q_rows=large + 1))


@given(rows=st.lists(sizes, min_size=1, max_size=20), kv=st.lists(sizes, min_size=1,
                                                                   max_size=20),
       half=params, tile=params, depth=params)
@settings(max_examples=100, deadline=None)
def test_the_array_factor_is_the_scalar_one_bit_for_bit(rows: list[float], kv: list[float],
                                                        half: float, tile: float,
                                                        depth: float) -> None:
    n = min(len(rows), len(kv))
    m, k = np.array(rows[:n]), np.array(kv[:n])
    depth_a = m + 1.0
    got = shape_factor_array(MATMUL, half, m, k, tile_rows=tile, depth_half=depth,
                             k_depth=depth_a)
    want = [shape_factor(MATMUL, half, x, y, tile_rows=tile, depth_half=depth, k_depth=d)
            for x, y, d in zip(m, k, depth_a, strict=True)]
    assert got.tolist() == want
    got = shape_factor_array(ATTENTION, half, m, k, tile_rows=tile, q_rows=m)
    want = [shape_factor(ATTENTION, half, x, y, tile_rows=tile, q_rows=x)
            for x, y in zip(m, k, strict=True)]
    assert got.tolist() == want


CHIPS = ["h100-sxm", "h20", "b200", "sg2262", "h100-gt500"]


@pytest.mark.parametrize("name", CHIPS)
@given(rows=st.integers(1, 100_000), extra=st.integers(1, 1000), k=st.integers(16, 65536))
@settings(max_examples=60, deadline=None)
def test_a_gemm_with_more_rows_never_takes_less_time(name: str, rows: int, extra: int,
                                                     k: int) -> None:
    """Time is monotone in the work, after the whole-ns rounding: a GEMM of m + d rows (its
    FLOPs and activations with it) never finishes before the one of m rows."""
    chip = load_chip(name)
    n = 4096

    def ns(m: int) -> int:
        return chip.compute_ns(MATMUL, 2.0 * m * n * k, n * k + 2.0 * m * (n + k), "fp8",
                               m_rows=m, k_depth=k)

    assert ns(rows) <= ns(rows + extra)


@pytest.mark.parametrize("name", CHIPS)
@given(flops=st.floats(0, 1e15), nbytes=st.floats(0, 1e11), rows=sizes, kv=sizes,
       q=sizes, depth=sizes, causal=st.booleans(), head=st.sampled_from([0.0, 64.0, 544.0]))
@settings(max_examples=60, deadline=None)
def test_the_roofline_is_never_beaten(name: str, flops: float, nbytes: float, rows: float,
                                      kv: float, q: float, depth: float, causal: bool,
                                      head: float) -> None:
    chip = load_chip(name)
    bw = chip.memory_bandwidth_bytes_per_s
    for op_class in (MATMUL, ATTENTION, "memory"):
        t = chip.compute_ns(op_class, flops, nbytes, "bf16", m_rows=rows, kv_tokens=kv,
                            k_depth=depth, q_rows=q, causal=causal, head_dim=head)
        bound = max(flops / chip.peak_flops_per_s["bf16"], nbytes / bw) * 1e9
        assert t >= math.floor(bound) + chip.kernel_floor(op_class)


def test_padding_makes_decode_on_a_compute_light_chip_compute_bound() -> None:
    """FlashMLA on H20: 16 query heads at one token cost as much as 64 (one 64-row Q tile);
    on H100, which reads the KV faster than it computes the padding, they do not matter."""
    def t(chip_name: str, heads: int) -> int:
        chip = load_chip(chip_name)
        b, kv = 128, 4096
        return chip.compute_ns(ATTENTION, 2.0 * b * kv * heads * 1088, b * kv * 576 * 2.0,
                               "bf16", m_rows=b, kv_tokens=kv, q_rows=heads, causal=False)

    assert t("h20", 16) == pytest.approx(t("h20", 64), rel=0.01)
    assert t("h20", 16) > 2 * t("h100-sxm", 16)
    assert t("h100-sxm", 64) == pytest.approx(t("h100-sxm", 16), rel=0.05)


def test_the_small_m_loss_scales_with_the_chips_balance() -> None:
    """A 64-row FP8 GEMM loses more rows to the pipeline fill on H800 (its tensor cores fast
    against its HBM) than on H20 (slow ones)."""
    d = efficiency_defaults().matmul
    assert d.half_rows_per_intensity
    def loss(name: str) -> float:
        chip = load_chip(name)
        p = chip.efficiency_model.compute[MATMUL]
        half = p.half_per_intensity * chip.peak_flops_per_s["fp8"] / \
            chip.memory_bandwidth_bytes_per_s
        return 1 - shape_factor(MATMUL, half, 64.0, 0.0, tile_rows=64.0)
    assert loss("h800") > 2 * loss("h20")


def test_kernel_floors_per_class_and_the_launch_modes() -> None:
    chip = load_chip("h100-sxm")
    floors = efficiency_defaults().kernel_floor_us
    assert chip.kernel_floor(MATMUL) == round(floors.matmul * 1000)
    assert chip.kernel_floor(ATTENTION) == round(floors.attention * 1000)
    device = np.array([1000, 50_000], np.int64)
    gap, issue = chip.launch_gap_ns, chip.eager_dispatch_ns
    assert gap > 0 and issue > 0
    assert chip.launched_ns(device, 3, DEVICE) is device
    assert list(chip.launched_ns(device, 3, GRAPH)) == [1000 + 3 * gap, 50_000 + 3 * gap]
    # Eager: a run of short kernels waits for the host; long ones hide it.
    assert list(chip.launched_ns(device, 3, EAGER)) == [max(1000 + 3 * gap, 3 * issue),
                                                         50_000 + 3 * gap]
    with pytest.raises(ValueError, match="launch mode"):
        chip.launched_ns(device, 1, "cuda")


def _file(**extra: object) -> dict[str, object]:
    return {"peak_tflops": {"bf16": 100, "fp8": 200}, "memory_gb": 80,
            "memory_bandwidth_gbps": 2000, **extra}


def test_op_overhead_us_is_read_as_every_class_floor_with_no_separate_gap() -> None:
    """A chip file of before issue 26 keeps its meaning: op_overhead_us, the one fixed cost of
    every kernel, is the floor of every class, launch included (no gap); kernel_floor_us
    overrides a class; a file with neither takes the model's floors and gap."""
    old = chip_from_dict(_file(op_overhead_us=5), "old.yaml", name="old")
    assert {old.kernel_floor(c) for c in (MATMUL, ATTENTION, "memory")} == {5000}
    assert old.launch_gap_ns == 0 and old.launched_ns(7000, 2, GRAPH) == 7000
    mixed = chip_from_dict(_file(op_overhead_us=5, kernel_floor_us={"attention": 12},
                                 launch_gap_us=1), "mixed.yaml", name="mixed")
    assert (mixed.kernel_floor(ATTENTION), mixed.kernel_floor(MATMUL)) == (12000, 5000)
    assert mixed.launch_gap_ns == 1000
    new = chip_from_dict(_file(), "new.yaml", name="new")
    d = efficiency_defaults()
    assert new.kernel_floor(MATMUL) == round(d.kernel_floor_us.matmul * 1000)
    assert new.launch_gap_ns == round(d.launch_gap_us * 1000)


def test_a_class_efficiency_refuses_an_overlap_outside_0_1() -> None:
    with pytest.raises(ValueError, match="overlap"):
        ClassEfficiency(0.8, 0.0, 0.0, overlap=1.5)


# -- the memory side's size term: the stream ramp per piece ------------------------------------


def _with_ramp(name: str, ramp_ns: float):  # type: ignore[no-untyped-def]
    chip = load_chip(name)
    return dataclasses.replace(chip, efficiency_model=chip.efficiency_model.with_class(
        MATMUL, stream_ramp_ns=ramp_ns))


RAMPS = st.sampled_from([0.0, 30.0, 800.0, 2500.0])


@pytest.mark.parametrize("name", ["h100-sxm", "h20", "b200"])
@given(nbytes=st.floats(0, 1e10), extra=st.floats(0, 1e9), pieces=st.floats(0, 512),
       more=st.floats(0, 64), ramp=RAMPS)
@example(nbytes=0.0, extra=1.0, pieces=8.0, more=0.0, ramp=800.0)
@settings(max_examples=80, deadline=None)
def test_more_bytes_or_more_pieces_never_take_less_time(name: str, nbytes: float, extra: float,
                                                        pieces: float, more: float,
                                                        ramp: float) -> None:
    chip = _with_ramp(name, ramp)

    def ns(b: float, p: float) -> int:
        return chip.compute_ns(MATMUL, 0.0, b, "fp8", pieces=p)

    assert ns(nbytes, pieces) <= ns(nbytes + extra, pieces)
    assert ns(nbytes, pieces) <= ns(nbytes, pieces + more)


@pytest.mark.parametrize("name", ["h100-sxm", "h20"])
@given(small=st.floats(1.0, 1e9), factor=st.floats(1.0, 1e3), ramp=RAMPS)
@example(small=3.1e6, factor=2.0, ramp=800.0)
@settings(max_examples=80, deadline=None)
def test_a_smaller_piece_never_streams_at_a_higher_rate(name: str, small: float, factor: float,
                                                        ramp: float) -> None:
    """The achieved bandwidth of one piece, bytes over its memory time (the floor left out),
    never rises for a smaller piece, up to the whole ns the time is rounded to."""
    chip = _with_ramp(name, ramp)
    floor = chip.kernel_floor(MATMUL)
    large = small * factor
    t_small = chip.compute_ns(MATMUL, 0.0, small, "fp8") - floor
    t_large = chip.compute_ns(MATMUL, 0.0, large, "fp8") - floor
    assert small * (t_large - 1) <= large * t_small
    # and the term vanishes for a large stream: a GB-sized piece within 1% of no ramp
    big = 1e9
    plain = _with_ramp(name, 0.0).compute_ns(MATMUL, 0.0, big, "fp8")
    assert chip.compute_ns(MATMUL, 0.0, big, "fp8") <= plain * 1.01


def test_the_ramp_is_paid_per_piece_on_the_memory_side_only() -> None:
    chip = _with_ramp("h100-sxm", 1000.0)
    plain = _with_ramp("h100-sxm", 0.0)
    nbytes = 8 * 3.1e6   # eight experts' gate_up weights, FP8 (Qwen3-30B-A3B)
    assert (chip.compute_ns(MATMUL, 0.0, nbytes, "fp8", pieces=8)
            - plain.compute_ns(MATMUL, 0.0, nbytes, "fp8", pieces=8)) in (8000, 8001)
    # 0 or 1 piece: one ramp
    assert (chip.compute_ns(MATMUL, 0.0, nbytes, "fp8")
            == chip.compute_ns(MATMUL, 0.0, nbytes, "fp8", pieces=1))
    # no bytes, no ramp; a compute-bound kernel hides it (but for its class's overlap share of
    # the shorter side, the memory time the ramp is part of)
    assert chip.compute_ns(MATMUL, 1e6, 0.0, "fp8", pieces=8) == plain.compute_ns(
        MATMUL, 1e6, 0.0, "fp8", pieces=8)
    flops = 2.0 * 8192 * 4096 * 7168
    overlap = chip.efficiency_model.compute[MATMUL].overlap
    hidden = (chip.compute_ns(MATMUL, flops, nbytes, "fp8", m_rows=8192, k_depth=7168,
                              pieces=8)
              - plain.compute_ns(MATMUL, flops, nbytes, "fp8", m_rows=8192, k_depth=7168,
                                 pieces=8))
    assert 0 <= hidden <= overlap * 8000 + 1
    # the memory class has none (its floor is its ramp)
    assert chip.compute_ns("memory", 0.0, nbytes, "bf16", pieces=8) == plain.compute_ns(
        "memory", 0.0, nbytes, "bf16", pieces=8)


@given(nbytes=st.lists(st.floats(0, 1e9), min_size=1, max_size=8),
       pieces=st.lists(st.floats(0, 300), min_size=1, max_size=8), ramp=RAMPS)
@settings(max_examples=60, deadline=None)
def test_the_array_time_with_pieces_is_the_scalar_one(nbytes: list[float], pieces: list[float],
                                                      ramp: float) -> None:
    chip = _with_ramp("h20", ramp)
    n = min(len(nbytes), len(pieces))
    b, p = np.array(nbytes[:n]), np.array(pieces[:n])
    got = chip.compute_ns_array(MATMUL, b * 2.0, b, "fp8", m_rows=16.0, pieces=p)
    want = [chip.compute_ns(MATMUL, x * 2.0, x, "fp8", m_rows=16.0, pieces=y)
            for x, y in zip(b, p, strict=True)]
    assert got.tolist() == want


def test_the_presets_carry_no_ramp_the_kernel_data_do_not_support() -> None:
    """Fitted (validation/fit.py kernels): the calibration tables put the ramp at ~0 (docs/
    validation.md); every preset chip inherits it, so the term moves no simulated number."""
    assert efficiency_defaults().matmul.stream_ramp_us == 0
    for name in CHIPS:
        assert load_chip(name).efficiency_model.compute[MATMUL].stream_ramp_ns == 0.0


def test_a_negative_ramp_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="stream_ramp_ns"):
        ClassEfficiency(0.8, 0.0, 0.0, stream_ramp_ns=-1.0)
