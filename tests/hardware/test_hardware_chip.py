"""Chip: the roofline time of an op, memory reserve, validation, immutability."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxplan.hardware import Chip, FrozenMap
from tests.hardware._builders import make_chip

# bf16 peak 1e15 FLOP/s at matmul efficiency 0.5 -> 5e14 FLOP/s achieved: 5e5 FLOP per ns.
# HBM 2e12 B/s at memory efficiency 0.5 -> 1e12 B/s achieved: 1000 B per ns.
finite_amounts = st.floats(min_value=0, max_value=1e18, allow_nan=False, allow_infinity=False)


def test_compute_bound_op_takes_flop_time_plus_overhead() -> None:
    chip = make_chip()
    # 5e11 FLOP = 1_000_000 ns of compute; 1000 bytes = 1 ns of memory: compute wins.
    assert chip.compute_ns("matmul", 5e11, 1000, "bf16") == 1_000_000 + 1000


def test_memory_bound_op_takes_memory_time_plus_overhead() -> None:
    chip = make_chip()
    # 1e9 bytes = 1_000_000 ns of memory; 5e5 FLOP = 1 ns of compute: memory wins.
    assert chip.compute_ns("matmul", 5e5, 1e9, "bf16") == 1_000_000 + 1000


def test_efficiency_and_dtype_select_the_rate() -> None:
    chip = make_chip()
    # attention runs at 0.25 of peak: half the matmul rate; fp8 peak is twice bf16.
    assert chip.compute_ns("attention", 5e11, 0, "bf16") == 2_000_000 + 1000
    assert chip.compute_ns("matmul", 5e11, 0, "fp8") == 500_000 + 1000


def test_memory_op_class_times_flops_at_peak() -> None:
    chip = make_chip()
    # bf16 peak 1e15 FLOP/s = 1e6 FLOP per ns, with no efficiency applied.
    assert chip.compute_ns("memory", 1e12, 0, "bf16") == 1_000_000 + 1000
    assert chip.compute_ns("memory", 0, 1e6, "bf16") == 1000 + 1000


def test_empty_op_costs_the_overhead_only() -> None:
    assert make_chip().compute_ns("matmul", 0, 0, "bf16") == 1000
    assert make_chip(op_overhead_ns=0).compute_ns("matmul", 0, 0, "bf16") == 0


def test_partial_nanoseconds_round_up() -> None:
    chip = make_chip(op_overhead_ns=0)
    assert chip.compute_ns("matmul", 1, 0, "bf16") == 1          # 2e-6 ns -> 1 ns
    assert chip.compute_ns("matmul", 5e5 * 3 + 1, 0, "bf16") == 4
    assert chip.compute_ns("matmul", 0, 1001, "bf16") == 2


def test_exact_durations_are_not_bumped_by_float_noise() -> None:
    # 393.2e12 * 0.7 is not exact in binary; an op sized for exactly 1 us must still take 1000 ns.
    chip = make_chip(
        peak_flops_per_s={"bf16": 393.2e12}, efficiency={"matmul": 0.7, "memory": 0.85},
        op_overhead_ns=0,
    )
    assert chip.compute_ns("matmul", 393.2e12 * 0.7 * 1e-6, 0, "bf16") == 1000


@given(flops=finite_amounts, extra=finite_amounts, mem_bytes=finite_amounts)
def test_more_flops_is_never_faster(flops: float, extra: float, mem_bytes: float) -> None:
    chip = make_chip()
    assert chip.compute_ns("matmul", flops + extra, mem_bytes, "bf16") >= chip.compute_ns(
        "matmul", flops, mem_bytes, "bf16"
    )


@given(mem_bytes=finite_amounts, extra=finite_amounts, flops=finite_amounts)
def test_more_bytes_is_never_faster(mem_bytes: float, extra: float, flops: float) -> None:
    chip = make_chip()
    assert chip.compute_ns("attention", flops, mem_bytes + extra, "fp8") >= chip.compute_ns(
        "attention", flops, mem_bytes, "fp8"
    )


@given(
    flops=finite_amounts,
    mem_bytes=finite_amounts,
    peak=st.floats(min_value=1e9, max_value=1e16),
    factor=st.floats(min_value=1, max_value=100),
)
def test_higher_peak_is_never_slower(
    flops: float, mem_bytes: float, peak: float, factor: float
) -> None:
    slow = make_chip(peak_flops_per_s={"bf16": peak, "fp8": peak})
    fast = make_chip(peak_flops_per_s={"bf16": peak * factor, "fp8": peak})
    assert fast.compute_ns("matmul", flops, mem_bytes, "bf16") <= slow.compute_ns(
        "matmul", flops, mem_bytes, "bf16"
    )


@given(flops=finite_amounts, mem_bytes=finite_amounts)
def test_time_is_at_least_overhead_and_each_bound(flops: float, mem_bytes: float) -> None:
    chip = make_chip()
    ns = chip.compute_ns("matmul", flops, mem_bytes, "bf16")
    assert ns >= 1000
    assert ns - 1000 >= flops / 5e5 * (1 - 1e-9)
    assert ns - 1000 >= mem_bytes / 1000 * (1 - 1e-9)


def test_unknown_dtype_or_op_class_is_a_value_error_naming_it() -> None:
    chip = make_chip()
    with pytest.raises(ValueError, match="'int4'"):
        chip.compute_ns("matmul", 1, 1, "int4")
    with pytest.raises(ValueError, match="'conv'"):
        chip.compute_ns("conv", 1, 1, "bf16")


@pytest.mark.parametrize(("flops", "mem_bytes"), [(-1, 0), (0, -1), (float("nan"), 0), (0, 1e400)])
def test_negative_or_non_finite_amounts_are_rejected(flops: float, mem_bytes: float) -> None:
    with pytest.raises(ValueError):
        make_chip().compute_ns("matmul", flops, mem_bytes, "bf16")


def test_usable_memory_subtracts_the_reserve() -> None:
    assert make_chip().usable_memory_bytes == 96 * 10**9


@pytest.mark.parametrize(
    "overrides",
    [
        {"peak_flops_per_s": {}},
        {"peak_flops_per_s": {"bf16": 0.0}},
        {"efficiency": {"matmul": 0.5}},                 # no memory efficiency
        {"efficiency": {"matmul": 1.5, "memory": 0.5}},
        {"efficiency": {"matmul": 0.0, "memory": 0.5}},
        {"memory_bytes": 0},
        {"memory_bandwidth_bytes_per_s": float("inf")},
        {"op_overhead_ns": -1},
        {"reserved_memory_bytes": 100 * 10**9},          # reserve eats all memory
        {"reserved_memory_bytes": -1},
    ],
)
def test_invalid_chips_are_refused(overrides: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        make_chip(**overrides)


def test_chip_is_immutable_hashable_and_picklable() -> None:
    peaks = {"bf16": 1e15, "fp8": 2e15}
    chip = make_chip(peak_flops_per_s=peaks)
    peaks["bf16"] = 1.0                       # the caller's dict is copied, not shared
    assert chip.peak_flops_per_s["bf16"] == 1e15
    with pytest.raises(TypeError):
        chip.peak_flops_per_s["bf16"] = 2.0  # type: ignore[index]
    with pytest.raises(TypeError):
        chip.efficiency.update({"matmul": 1.0})  # type: ignore[attr-defined]
    assert hash(chip) == hash(make_chip())
    assert chip == make_chip()
    clone = pickle.loads(pickle.dumps(chip))
    assert clone == chip and isinstance(clone.efficiency, FrozenMap)
    assert {chip: 1}[make_chip()] == 1
    assert isinstance(chip, Chip)
