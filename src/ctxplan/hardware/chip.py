"""One accelerator: peak rates, memory, achievable efficiencies, and the roofline time of an op."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ctxplan.hardware.efficiency import (
    MEMORY,
    EfficiencyModel,
    shape_factor,
    shape_factor_array,
)
from ctxplan.hardware.frozen_map import FrozenMap
from ctxplan.hardware.units import ceil_ns, ceil_ns_array

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


    ArrayLike = float | int | npt.ArrayLike

__all__ = ["MEMORY", "Chip"]


@dataclass(frozen=True)
class Chip:
    """A chip as the simulator sees it. Built from a validated preset; every figure has a source.

    ``efficiency_model`` gives, per op class and dtype, the achievable fraction of
    ``peak_flops_per_s`` as a function of the op's shape and of the chip's balance of compute to
    memory bandwidth, and the achievable fraction of HBM bandwidth (docs/hardware.md).
    ``calibrated`` says whether those figures were fitted to measurements on this chip;
    ``verified`` whether its spec-sheet figures come from a datasheet or a paper.
    """

    name: str
    peak_flops_per_s: Mapping[str, float]   # dtype -> dense FLOP/s (no 2:4 sparsity)
    memory_bytes: int                       # HBM / DRAM capacity
    memory_bandwidth_bytes_per_s: float
    efficiency_model: EfficiencyModel
    op_overhead_ns: int                     # fixed launch/sync cost added to every compute op
    reserved_memory_bytes: int              # runtime / framework reserve, not for weights or KV
    default_cluster: str                    # "" when the chip file names none
    source: str
    verified: bool
    calibrated: bool = False
    # Board power at full load (thermal design power), W; None where no figure is published.
    # A figure shown beside an answer, not an input of the simulation (not in a result's key).
    tdp_w: float | None = None
    # (op class, dtype) -> large-block efficiency on this chip; derived, not compared.
    _large: Mapping[tuple[str, str], float] = field(init=False, repr=False, compare=False)
    _achieved_bandwidth: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Freeze the mappings so a Chip is truly immutable, hashable and safe to share.
        object.__setattr__(self, "peak_flops_per_s", FrozenMap(self.peak_flops_per_s))
        if not isinstance(self.efficiency_model, EfficiencyModel):
            raise TypeError(f"chip {self.name}: efficiency_model must be an EfficiencyModel "
                            "(EfficiencyModel.constant({...}) for fixed fractions)")
        if not self.peak_flops_per_s:
            raise ValueError(f"chip {self.name}: peak_flops_per_s needs at least one dtype")
        for dtype, flops_per_s in self.peak_flops_per_s.items():
            _check_positive(f"chip {self.name}: peak_flops_per_s[{dtype!r}]", flops_per_s)
        _check_positive(f"chip {self.name}: memory_bytes", self.memory_bytes)
        _check_positive(
            f"chip {self.name}: memory_bandwidth_bytes_per_s", self.memory_bandwidth_bytes_per_s
        )
        if self.op_overhead_ns < 0:
            raise ValueError(f"chip {self.name}: op_overhead_ns must be >= 0")
        if self.tdp_w is not None:
            _check_positive(f"chip {self.name}: tdp_w", self.tdp_w)
        if not 0 <= self.reserved_memory_bytes < self.memory_bytes:
            raise ValueError(
                f"chip {self.name}: reserved_memory_bytes must be >= 0 and below memory_bytes"
            )
        bandwidth = self.memory_bandwidth_bytes_per_s
        large = {
            (op_class, dtype): params.large(peak, bandwidth)
            for op_class, params in self.efficiency_model.compute.items()
            for dtype, peak in self.peak_flops_per_s.items()
        }
        for (op_class, dtype), fraction in large.items():
            if not (math.isfinite(fraction) and 0 < fraction <= 1):
                raise ValueError(f"chip {self.name}: efficiency of {op_class!r} in {dtype} = "
                                 f"{fraction!r} must be in (0, 1]")
        object.__setattr__(self, "_large", large)
        object.__setattr__(self, "_achieved_bandwidth",
                           bandwidth * self.efficiency_model.memory)

    # ------------------------------------------------------------------------------ figures

    @property
    def usable_memory_bytes(self) -> int:
        """Capacity left for weights, KV and activations after the runtime reserve."""
        return self.memory_bytes - self.reserved_memory_bytes

    @property
    def efficiency(self) -> Mapping[str, float]:
        """Large-block efficiency per op class in BF16 (the reference dtype; another one if the
        chip has no BF16 peak), and ``memory``, the HBM fraction: the figures to show a user."""
        dtype = "bf16" if "bf16" in self.peak_flops_per_s else min(self.peak_flops_per_s)
        out = {op_class: self._large[(op_class, dtype)]
               for op_class in self.efficiency_model.compute}
        out[MEMORY] = self.efficiency_model.memory
        return FrozenMap(out)

    def large_block_efficiency(self, op_class: str, dtype: str) -> float:
        """Efficiency of a large block of ``op_class`` in ``dtype`` (1 for ``memory``)."""
        self._peak(dtype)
        return 1.0 if op_class == MEMORY else self._large_of(op_class, dtype)

    def calibration_notice(self) -> str | None:
        """None on a calibrated chip; else one line an answer should carry."""
        if self.calibrated:
            return None
        return (f"chip {self.name} is not calibrated: its efficiencies come from ctxplan's "
                "efficiency model (published kernel measurements on other chips, scaled by this "
                "chip's compute-to-bandwidth balance; docs/hardware.md), not from measurements "
                "on this chip, so expect larger errors than on a calibrated chip")

    # ----------------------------------------------------------------------------- roofline

    def compute_ns(self, op_class: str, flops: float, mem_bytes: float, dtype: str, *,
                   m_rows: float = 0.0, kv_tokens: float = 0.0) -> int:
        """Roofline time of one op, in whole ns (rounded up), overhead included.

        max(flops / (peak[dtype] * e), mem_bytes / (bw * e_memory)) plus ``op_overhead_ns``,
        where e is the efficiency of ``op_class`` in ``dtype`` for a block of ``m_rows`` rows
        (matmul: the GEMM's M; attention: query tokens) and ``kv_tokens`` KV tokens (attention);
        0 means unknown and takes the large-block efficiency. An op of class ``memory`` times its
        FLOPs at the full peak. 0 FLOPs and 0 bytes cost the overhead alone.
        """
        peak = self._peak(dtype)
        for what, amount in (("flops", flops), ("mem_bytes", mem_bytes), ("m_rows", m_rows),
                             ("kv_tokens", kv_tokens)):
            if not (math.isfinite(amount) and amount >= 0):
                raise ValueError(f"{what} must be a finite number >= 0, got {amount!r}")
        flop_eff = self._flop_efficiency(op_class, dtype, shape_factor, m_rows, kv_tokens)
        compute_time_ns = flops * 1e9 / (peak * flop_eff)
        memory_time_ns = mem_bytes * 1e9 / self._achieved_bandwidth
        return ceil_ns(max(compute_time_ns, memory_time_ns)) + self.op_overhead_ns

    def compute_ns_array(self, op_class: str, flops: ArrayLike, mem_bytes: ArrayLike,
                         dtype: str, *, m_rows: ArrayLike = 0.0,
                         kv_tokens: ArrayLike = 0.0) -> npt.NDArray[np.int64]:
        """:meth:`compute_ns` for a block of ops of one class and dtype: numpy arrays (or
        scalars, broadcast together) in, an int64 array out, equal element by element to the
        scalar method (the same float operations in the same order)."""
        import numpy as np  # imported here: commands that simulate nothing never load numpy

        peak = self._peak(dtype)
        arrays = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64)
                                       for x in (flops, mem_bytes, m_rows, kv_tokens)))
        flops_a, bytes_a, rows_a, kv_a = arrays
        for what, amounts in (("flops", flops_a), ("mem_bytes", bytes_a), ("m_rows", rows_a),
                              ("kv_tokens", kv_a)):
            if not (np.all(np.isfinite(amounts)) and np.all(amounts >= 0)):
                raise ValueError(f"{what} must be finite numbers >= 0")
        flop_eff = self._flop_efficiency(op_class, dtype, shape_factor_array, rows_a, kv_a)
        compute_time_ns = flops_a * 1e9 / (peak * flop_eff)
        memory_time_ns = bytes_a * 1e9 / self._achieved_bandwidth
        return ceil_ns_array(np.maximum(compute_time_ns, memory_time_ns)) + self.op_overhead_ns

    def _flop_efficiency(self, op_class: str, dtype: str, shape: Callable[..., Any],
                         m_rows: Any, kv_tokens: Any) -> Any:
        """The fraction of the peak an op of ``op_class`` reaches: 1 for ``memory`` ops, else
        the large-block efficiency times ``shape`` (:func:`shape_factor`, or its array twin)
        of the op's rows and KV tokens: one formula for the scalar and the array method."""
        if op_class == MEMORY:
            return 1.0
        large = self._large_of(op_class, dtype)   # refuses an unknown op class first
        half = self.efficiency_model.compute[op_class].half_shape
        return large * shape(op_class, half, m_rows, kv_tokens)

    # ------------------------------------------------------------------------------ lookups

    def _peak(self, dtype: str) -> float:
        peak = self.peak_flops_per_s.get(dtype)
        if peak is None:
            known = ", ".join(sorted(self.peak_flops_per_s))
            raise ValueError(f"chip {self.name} has no peak for dtype {dtype!r} (known: {known})")
        return peak

    def _large_of(self, op_class: str, dtype: str) -> float:
        large = self._large.get((op_class, dtype))
        if large is None:
            known = ", ".join(sorted([*self.efficiency_model.compute, MEMORY]))
            raise ValueError(f"chip {self.name} has no efficiency for op class {op_class!r} "
                             f"(known: {known})")
        return large


def _check_positive(what: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{what} = {value!r} must be a finite number > 0")
