"""One accelerator: peak rates, memory, achievable efficiencies, and the roofline time of an op."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxplan.hardware.frozen_map import FrozenMap
from ctxplan.hardware.units import ceil_ns, ceil_ns_array

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# The op class whose efficiency is a fraction of HBM bandwidth, not of peak FLOP/s. It is also a
# valid op class of its own (elementwise ops, norms, copies): its FLOPs are timed at the full
# peak, because such an op is memory-bound by definition and has no compute efficiency to apply.
MEMORY = "memory"


@dataclass(frozen=True)
class Chip:
    """A chip as the simulator sees it. Built from a validated preset; every figure has a source.

    ``efficiency[op_class]`` is the achievable fraction of ``peak_flops_per_s`` for that class of
    op, except ``efficiency["memory"]``, the achievable fraction of HBM bandwidth.
    """

    name: str
    peak_flops_per_s: Mapping[str, float]   # dtype -> dense FLOP/s (no 2:4 sparsity)
    memory_bytes: int                       # HBM / DRAM capacity
    memory_bandwidth_bytes_per_s: float
    efficiency: Mapping[str, float]         # op class -> achievable fraction of peak (see above)
    op_overhead_ns: int                     # fixed launch/sync cost added to every compute op
    reserved_memory_bytes: int              # runtime / framework reserve, not for weights or KV
    default_cluster: str
    source: str
    verified: bool

    def __post_init__(self) -> None:
        # Freeze the mappings so a Chip is truly immutable, hashable and safe to share.
        object.__setattr__(self, "peak_flops_per_s", FrozenMap(self.peak_flops_per_s))
        object.__setattr__(self, "efficiency", FrozenMap(self.efficiency))
        if not self.peak_flops_per_s:
            raise ValueError(f"chip {self.name}: peak_flops_per_s needs at least one dtype")
        for dtype, flops_per_s in self.peak_flops_per_s.items():
            _check_positive(f"chip {self.name}: peak_flops_per_s[{dtype!r}]", flops_per_s)
        if MEMORY not in self.efficiency:
            raise ValueError(f"chip {self.name}: efficiency needs a {MEMORY!r} entry")
        for op_class, fraction in self.efficiency.items():
            if not (math.isfinite(fraction) and 0 < fraction <= 1):
                raise ValueError(
                    f"chip {self.name}: efficiency[{op_class!r}] = {fraction!r} must be in (0, 1]"
                )
        _check_positive(f"chip {self.name}: memory_bytes", self.memory_bytes)
        _check_positive(
            f"chip {self.name}: memory_bandwidth_bytes_per_s", self.memory_bandwidth_bytes_per_s
        )
        if self.op_overhead_ns < 0:
            raise ValueError(f"chip {self.name}: op_overhead_ns must be >= 0")
        if not 0 <= self.reserved_memory_bytes < self.memory_bytes:
            raise ValueError(
                f"chip {self.name}: reserved_memory_bytes must be >= 0 and below memory_bytes"
            )

    @property
    def usable_memory_bytes(self) -> int:
        """Capacity left for weights, KV and activations after the runtime reserve."""
        return self.memory_bytes - self.reserved_memory_bytes

    def compute_ns(self, op_class: str, flops: float, mem_bytes: float, dtype: str) -> int:
        """Roofline time of one op, in whole ns (rounded up), overhead included.

        max(flops / (peak[dtype] * eff[op_class]), mem_bytes / (bw * eff["memory"])) plus
        ``op_overhead_ns``. An op of 0 FLOPs and 0 bytes costs the overhead alone.
        """
        peak = self.peak_flops_per_s.get(dtype)
        if peak is None:
            known = ", ".join(sorted(self.peak_flops_per_s))
            raise ValueError(f"chip {self.name} has no peak for dtype {dtype!r} (known: {known})")
        eff = self.efficiency.get(op_class)
        if eff is None:
            known = ", ".join(sorted(self.efficiency))
            raise ValueError(f"chip {self.name} has no efficiency for op class {op_class!r} "
                             f"(known: {known})")
        if not (math.isfinite(flops) and flops >= 0):
            raise ValueError(f"flops must be a finite number >= 0, got {flops!r}")
        if not (math.isfinite(mem_bytes) and mem_bytes >= 0):
            raise ValueError(f"mem_bytes must be a finite number >= 0, got {mem_bytes!r}")
        flop_eff = 1.0 if op_class == MEMORY else eff
        compute_time_ns = flops * 1e9 / (peak * flop_eff)
        memory_time_ns = mem_bytes * 1e9 / (
            self.memory_bandwidth_bytes_per_s * self.efficiency[MEMORY]
        )
        return ceil_ns(max(compute_time_ns, memory_time_ns)) + self.op_overhead_ns

    def compute_ns_array(self, op_class: str, flops: Any, mem_bytes: Any, dtype: str, *,
                         m_rows: Any = 0.0, kv_tokens: Any = 0.0) -> npt.NDArray[np.int64]:
        """:meth:`compute_ns` over arrays of FLOPs and bytes (scalars broadcast): the same float
        operations in the same order, so each element equals the scalar result. ``m_rows`` and
        ``kv_tokens`` (the op's shape) are accepted for shape-dependent efficiency models."""
        import numpy as np

        peak = self.peak_flops_per_s.get(dtype)
        if peak is None:
            known = ", ".join(sorted(self.peak_flops_per_s))
            raise ValueError(f"chip {self.name} has no peak for dtype {dtype!r} (known: {known})")
        eff = self.efficiency.get(op_class)
        if eff is None:
            known = ", ".join(sorted(self.efficiency))
            raise ValueError(f"chip {self.name} has no efficiency for op class {op_class!r} "
                             f"(known: {known})")
        f = np.asarray(flops, np.float64)
        b = np.asarray(mem_bytes, np.float64)
        if f.size and not (np.isfinite(f).all() and f.min() >= 0):
            raise ValueError("flops must be finite numbers >= 0")
        if b.size and not (np.isfinite(b).all() and b.min() >= 0):
            raise ValueError("mem_bytes must be finite numbers >= 0")
        flop_eff = 1.0 if op_class == MEMORY else eff
        compute_time_ns = f * 1e9 / (peak * flop_eff)
        memory_time_ns = b * 1e9 / (self.memory_bandwidth_bytes_per_s * self.efficiency[MEMORY])
        return ceil_ns_array(np.maximum(compute_time_ns, memory_time_ns)) + self.op_overhead_ns


def _check_positive(what: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{what} = {value!r} must be a finite number > 0")
