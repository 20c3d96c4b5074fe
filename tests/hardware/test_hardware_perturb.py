"""Perturbation: scaling one named figure scales exactly that figure, nothing else."""

from __future__ import annotations

import pytest

from ctxplan.hardware import ClassEfficiency, EfficiencyModel
from ctxplan.hardware.perturb import (
    chip_figures,
    figure_value,
    figures,
    scale,
    scale_chip,
    scale_cluster,
)

from ._builders import make_chip, three_level_cluster

CHIP = make_chip(efficiency_model=EfficiencyModel(
    {"matmul": ClassEfficiency(0.8, 4e-4, 128.0), "attention": ClassEfficiency(0.9, 1e-3, 1e3)},
    0.8))
CLUSTER = three_level_cluster()
INT_FIGURES = ("memory_capacity", "op_overhead", "latency")


def _large(name: str) -> bool:
    parts = name.split(".")
    return parts[:2] == ["chip", "efficiency"] and len(parts) == 3 and parts[2] != "memory"


def _moves_with(name: str, other: str) -> bool:
    """Whether ``other`` may change when ``name`` is scaled. "chip.efficiency.<class>" is the
    large-block efficiency, a function of the class's ceiling and balance and of the chip's
    peaks and bandwidth: it moves with them, and scaling it moves its ceiling and balance."""
    if _large(other):
        return True
    return _large(name) and other in (f"{name}.ceiling", f"{name}.balance")


@pytest.mark.parametrize("name", figures(CHIP, CLUSTER))
@pytest.mark.parametrize("factor", [0.9, 1.1])
def test_scaling_a_figure_scales_it_and_leaves_every_other_figure_alone(
        name: str, factor: float) -> None:
    before = figure_value(CHIP, CLUSTER, name)
    try:
        chip, cluster = scale(CHIP, CLUSTER, name, factor)
    except ValueError:
        # Only a fraction pushed above 1 may be refused (this cluster has efficiency 1.0).
        assert name.endswith("efficiency") and before * factor > 1
        return
    after = figure_value(chip, cluster, name)
    if name.endswith(INT_FIGURES):
        assert after == round(before * factor)
    else:
        assert after == pytest.approx(before * factor, rel=1e-12)
    for other in figures(CHIP, CLUSTER):
        if other != name and not _moves_with(name, other):
            assert figure_value(chip, cluster, other) == figure_value(CHIP, CLUSTER, other), other
    # The identity, the name, the source and the flags are the preset's.
    assert (chip.name, chip.source, chip.verified, chip.calibrated) == (
        CHIP.name, CHIP.source, CHIP.verified, CHIP.calibrated)
    assert cluster.name == CLUSTER.name


@pytest.mark.parametrize("op_class", ["matmul", "attention"])
def test_scaling_the_large_block_efficiency_scales_it_in_every_dtype(op_class: str) -> None:
    chip = scale_chip(CHIP, f"efficiency.{op_class}", 0.9)
    for dtype in ("bf16", "fp8"):
        assert chip.large_block_efficiency(op_class, dtype) == pytest.approx(
            0.9 * CHIP.large_block_efficiency(op_class, dtype), rel=1e-12)
    assert (chip.efficiency_model.compute[op_class].half_shape
            == CHIP.efficiency_model.compute[op_class].half_shape)


def test_more_bandwidth_makes_memory_bound_ops_faster_and_scaling_by_one_changes_nothing() -> None:
    fast = scale_chip(CHIP, "memory_bandwidth", 2.0)
    assert fast.compute_ns("matmul", 0, 1e9, "bf16") < CHIP.compute_ns("matmul", 0, 1e9, "bf16")
    for name in figures(CHIP, CLUSTER):
        assert scale(CHIP, CLUSTER, name, 1.0) == (CHIP, CLUSTER)


def test_out_of_range_results_and_bad_names_are_value_errors() -> None:
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        scale_chip(CHIP, "efficiency.memory", 1.5)            # 0.8 x 1.5 > 1
    with pytest.raises(ValueError, match="reserved_memory_bytes"):
        scale_chip(CHIP, "memory_capacity", 0.01)             # below the reserve
    with pytest.raises(ValueError, match="efficiency"):
        scale_cluster(CLUSTER, "board.efficiency", 2.0)       # 1.0 x 2 > 1
    with pytest.raises(ValueError, match=r"known: .*memory_bandwidth"):
        scale_chip(CHIP, "hbm", 1.1)
    with pytest.raises(ValueError, match=r"known: .*board\.latency"):
        scale_cluster(CLUSTER, "rack.latency", 1.1)
    with pytest.raises(ValueError, match="must start with"):
        scale(CHIP, CLUSTER, "memory_bandwidth", 1.1)
    for factor in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="factor"):
            scale_chip(CHIP, "memory_bandwidth", factor)


def test_every_peak_and_every_class_parameter_is_a_figure() -> None:
    names = chip_figures(CHIP)
    assert {"peak.bf16", "peak.fp8", "efficiency.matmul.half", "efficiency.attention.balance",
            "efficiency.attention.ceiling", "efficiency.memory"} <= set(names)
    assert len(names) == len(set(names))
