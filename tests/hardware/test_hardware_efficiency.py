"""The efficiency model: shape and chip balance, and the array form of the roofline."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ctxplan.hardware import ClassEfficiency, EfficiencyModel
from ctxplan.hardware.efficiency import shape_factor

from ._builders import make_chip

OP_CLASSES = ("matmul", "attention", "memory")


def model_chip(ceiling: float = 0.9, balance: float = 1e-3, half_rows: float = 128.0,
               half_kv: float = 1000.0, memory: float = 0.8, **overrides: object) -> object:
    model = EfficiencyModel({"matmul": ClassEfficiency(ceiling, balance, half_rows),
                             "attention": ClassEfficiency(ceiling, balance, half_kv)}, memory)
    return make_chip(efficiency_model=model, **overrides)


# Shapes as the mapping gives them: 0 (unknown) or at least one row / token.
shapes = st.one_of(st.just(0.0), st.floats(min_value=1.0, max_value=1e7))
positive_shapes = st.floats(min_value=1.0, max_value=1e7, allow_nan=False)


# ------------------------------------------------------------------------------------- shape


@pytest.mark.parametrize("op_class", ["matmul", "attention"])
@given(a=positive_shapes, b=positive_shapes, half=st.floats(min_value=0.0, max_value=1e5))
# m / (m + half) fell here after rounding (0.9999999999999979 at 499.70 rows, ...978 at 518.93):
# the formula is written so that every rounded step is monotone (hardware/efficiency.py).
@example(a=499.6958680264877, b=518.926323244249, half=1.0959116875718715e-12)
def test_efficiency_never_falls_as_the_block_grows(op_class: str, a: float, b: float,
                                                   half: float) -> None:
    small, large = sorted((a, b))
    assert (shape_factor(op_class, half, small, small)
            <= shape_factor(op_class, half, large, large))


@given(q=positive_shapes, a=positive_shapes, b=positive_shapes)
def test_a_smaller_block_is_never_slower(q: float, a: float, b: float) -> None:
    # Work proportional to the shape (attention: q x kv pairs; matmul: rows): fewer keys or rows
    # never take longer, even where the efficiency drops (below the half-shape).
    chip = model_chip(op_overhead_ns=0)
    small, large = sorted((a, b))
    pair_flops = 4096.0
    assert (chip.compute_ns("attention", q * small * pair_flops, 0.0, "bf16", m_rows=q,
                            kv_tokens=small)
            <= chip.compute_ns("attention", q * large * pair_flops, 0.0, "bf16", m_rows=q,
                               kv_tokens=large))
    params = 1e8
    assert (chip.compute_ns("matmul", 2 * params * small, params, "bf16", m_rows=small)
            <= chip.compute_ns("matmul", 2 * params * large, params, "bf16", m_rows=large))


def test_unknown_shape_is_a_large_block_and_the_half_shape_halves_efficiency() -> None:
    # ceiling 0.5 of 1e15 and no balance term: 5e14 FLOP/s, so 5e11 FLOP take exactly 1 ms.
    chip = model_chip(op_overhead_ns=0, ceiling=0.5, balance=0.0, half_rows=100.0,
                      half_kv=1000.0)
    flops = 5e11
    assert chip.compute_ns("attention", flops, 0.0, "bf16") == 10**6
    assert chip.compute_ns("attention", flops, 0.0, "bf16", kv_tokens=1e12) == 10**6
    assert chip.compute_ns("attention", flops, 0.0, "bf16", kv_tokens=1000.0) == 2 * 10**6
    assert chip.compute_ns("matmul", flops, 0.0, "bf16", m_rows=100.0) == 2 * 10**6
    # The matmul loss is capped at 2x: a tiny GEMM is streaming-bound anyway.
    assert chip.compute_ns("matmul", flops, 0.0, "bf16", m_rows=1.0) == 2 * 10**6
    # Memory ops have no shape loss.
    assert chip.compute_ns("memory", flops, 1e9, "bf16", m_rows=1.0, kv_tokens=1.0) == \
        chip.compute_ns("memory", flops, 1e9, "bf16")


# ----------------------------------------------------------------------------- chip balance


def test_a_compute_light_chip_reaches_a_larger_fraction_of_its_peak() -> None:
    heavy = model_chip(peak_flops_per_s={"bf16": 1e15, "fp8": 2e15})
    light = model_chip(peak_flops_per_s={"bf16": 1e14, "fp8": 2e14})
    for op_class in ("matmul", "attention"):
        assert (light.large_block_efficiency(op_class, "bf16")
                > heavy.large_block_efficiency(op_class, "bf16"))
        # Doubling the tensor rate alone (FP8 on the same chip) lowers the fraction, as FA3's
        # BF16 / FP8 peaks show, but the FP8 op is still faster.
        assert (heavy.large_block_efficiency(op_class, "fp8")
                < heavy.large_block_efficiency(op_class, "bf16"))
        assert (heavy.compute_ns(op_class, 1e12, 0, "fp8")
                < heavy.compute_ns(op_class, 1e12, 0, "bf16"))
        # More bandwidth makes the chip lighter too, and no efficiency passes the ceiling.
        faster_hbm = model_chip(memory_bandwidth_bytes_per_s=4e12)
        assert (faster_hbm.large_block_efficiency(op_class, "bf16")
                > heavy.large_block_efficiency(op_class, "bf16"))
        assert light.large_block_efficiency(op_class, "bf16") < 0.9


def test_without_a_balance_term_the_fraction_is_the_ceiling_in_every_dtype() -> None:
    chip = make_chip(efficiency={"matmul": 0.7, "attention": 0.6, "memory": 0.85})
    for dtype in ("bf16", "fp8"):
        assert chip.large_block_efficiency("matmul", dtype) == 0.7
        assert chip.large_block_efficiency("attention", dtype) == 0.6
    assert chip.efficiency == {"matmul": 0.7, "attention": 0.6, "memory": 0.85}


def test_a_realised_efficiency_above_one_is_refused() -> None:
    model = EfficiencyModel({"matmul": ClassEfficiency(1.5, 0.0, 0.0)}, 0.8)
    with pytest.raises(ValueError, match="efficiency of 'matmul'"):
        make_chip(efficiency_model=model)
    with pytest.raises(ValueError):
        ClassEfficiency(0.8, -1e-3, 0.0)
    with pytest.raises(ValueError):
        EfficiencyModel({}, 1.2)


# --------------------------------------------------------------------- array == scalar, bit by bit


amounts = st.floats(min_value=0.0, max_value=1e16, allow_nan=False)


@given(
    op_class=st.sampled_from(OP_CLASSES),
    dtype=st.sampled_from(["bf16", "fp8"]),
    rows=st.lists(st.tuples(amounts, amounts, shapes, shapes), min_size=1, max_size=12),
    ceiling=st.floats(min_value=0.05, max_value=1.0),
    balance=st.floats(min_value=0.0, max_value=3e-3),
    half_rows=st.floats(min_value=0.0, max_value=1e4),
    half_kv=st.floats(min_value=0.0, max_value=1e4),
    peak=st.floats(min_value=1e12, max_value=1e16),
    bandwidth=st.floats(min_value=1e11, max_value=1e13),
)
def test_the_array_form_equals_the_scalar_form_element_by_element(
        op_class: str, dtype: str, rows: list[tuple[float, float, float, float]],
        ceiling: float, balance: float, half_rows: float, half_kv: float, peak: float,
        bandwidth: float) -> None:
    model = EfficiencyModel({"matmul": ClassEfficiency(ceiling, balance, half_rows),
                             "attention": ClassEfficiency(ceiling, balance, half_kv)}, 0.83)
    try:
        chip = make_chip(efficiency_model=model, memory_bandwidth_bytes_per_s=bandwidth,
                         peak_flops_per_s={"bf16": peak, "fp8": 2 * peak})
    except ValueError:
        return  # a realised efficiency above 1: not a chip
    flops, mem, m_rows, kv = (np.array(col) for col in zip(*rows, strict=True))
    got = chip.compute_ns_array(op_class, flops, mem, dtype, m_rows=m_rows, kv_tokens=kv)
    want = [chip.compute_ns(op_class, f, b, dtype, m_rows=m, kv_tokens=k)
            for f, b, m, k in rows]
    assert got.dtype == np.int64
    assert got.tolist() == want


def test_the_array_form_broadcasts_scalars() -> None:
    chip = model_chip()
    kv = np.array([0.0, 10.0, 1000.0, 1e6])
    got = chip.compute_ns_array("attention", 1e12, 1e6, "bf16", m_rows=8.0, kv_tokens=kv)
    assert got.tolist() == [chip.compute_ns("attention", 1e12, 1e6, "bf16", m_rows=8.0,
                                            kv_tokens=k) for k in kv]
    assert chip.compute_ns_array("matmul", np.zeros(0), 0.0, "bf16").shape == (0,)


@pytest.mark.parametrize(("what", "kwargs"), [
    ("flops", {"flops": np.array([1.0, -1.0])}),
    ("mem_bytes", {"mem_bytes": np.array([np.nan])}),
    ("m_rows", {"m_rows": np.array([-2.0])}),
    ("kv_tokens", {"kv_tokens": np.array([np.inf])}),
])
def test_the_array_form_rejects_bad_amounts_naming_them(what: str,
                                                         kwargs: dict[str, object]) -> None:
    chip = model_chip()
    args: dict[str, object] = {"flops": 1.0, "mem_bytes": 1.0, **kwargs}
    flops, mem_bytes = args.pop("flops"), args.pop("mem_bytes")
    with pytest.raises(ValueError, match=what):
        chip.compute_ns_array("attention", flops, mem_bytes, "bf16", **args)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'int4'"):
        chip.compute_ns_array("matmul", 1.0, 1.0, "int4")
    with pytest.raises(ValueError, match="'conv'"):
        chip.compute_ns_array("conv", 1.0, 1.0, "bf16")


def test_scalar_form_rejects_bad_shapes() -> None:
    chip = model_chip()
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="kv_tokens"):
            chip.compute_ns("attention", 1.0, 1.0, "bf16", kv_tokens=bad)
        with pytest.raises(ValueError, match="m_rows"):
            chip.compute_ns("matmul", 1.0, 1.0, "bf16", m_rows=bad)


def test_calibration_notice_only_on_uncalibrated_chips() -> None:
    assert model_chip(calibrated=True).calibration_notice() is None
    notice = model_chip(calibrated=False).calibration_notice()
    assert notice is not None and "toy" in notice and "not calibrated" in notice
