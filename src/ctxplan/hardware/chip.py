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

__all__ = ["DEVICE", "EAGER", "GRAPH", "LAUNCH_MODES", "MEMORY", "Chip"]

# How the kernels of an op are launched (docs/hardware.md, "Kernel launch"): replayed from a
# CUDA graph (decode, as engines run it), issued one by one by the framework (prefill, eager),
# or not at all (a kernel's own time, as a profiler measures it: the kernel-level data).
GRAPH = "graph"
EAGER = "eager"
DEVICE = "device"
LAUNCH_MODES = (GRAPH, EAGER, DEVICE)


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
    # Fixed cost of one kernel on the device (ramp, tail: what a kernel with no work takes), for
    # every op class ``kernel_floor_ns`` does not name; what chip files call op_overhead_us.
    op_overhead_ns: int
    reserved_memory_bytes: int              # runtime / framework reserve, not for weights or KV
    default_cluster: str                    # "" when the chip file names none
    source: str
    verified: bool
    calibrated: bool = False
    # Per op class ("matmul", "attention", "memory"), the kernel floor where it differs from
    # op_overhead_ns (issue 26: fitted to the kernel data with the size terms).
    kernel_floor_ns: Mapping[str, int] = field(default_factory=dict)
    # The gap between two kernels on the device, paid per kernel when they are replayed from a
    # graph or issued by a host that runs ahead (the GPU front end, ~0.5-1 us per node).
    launch_gap_ns: int = 0
    # Host time to issue one kernel from the framework without a graph (eager PyTorch): a run of
    # kernels shorter than this waits for the host.
    eager_dispatch_ns: int = 0
    # Board power at full load (thermal design power), W; None where no figure is published.
    # A figure shown beside an answer, not an input of the simulation (not in a result's key).
    tdp_w: float | None = None
    # (op class, dtype) -> large-block efficiency on this chip; derived, not compared.
    _large: Mapping[tuple[str, str], float] = field(init=False, repr=False, compare=False)
    # (op class, dtype) -> the half-shape where the class scales it with the chip's balance.
    _half: Mapping[tuple[str, str], float] = field(init=False, repr=False, compare=False)
    _achieved_bandwidth: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Freeze the mappings so a Chip is truly immutable, hashable and safe to share.
        object.__setattr__(self, "peak_flops_per_s", FrozenMap(self.peak_flops_per_s))
        object.__setattr__(self, "kernel_floor_ns", FrozenMap(self.kernel_floor_ns))
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
        for what, ns in (("op_overhead_ns", self.op_overhead_ns),
                         ("launch_gap_ns", self.launch_gap_ns),
                         ("eager_dispatch_ns", self.eager_dispatch_ns),
                         *((f"kernel_floor_ns[{k!r}]", v)
                           for k, v in self.kernel_floor_ns.items())):
            if ns < 0:
                raise ValueError(f"chip {self.name}: {what} must be >= 0")
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
        halves = {}
        for op_class, params in self.efficiency_model.compute.items():
            if params.half_per_intensity > 0:
                for dtype, peak in self.peak_flops_per_s.items():
                    halves[(op_class, dtype)] = params.half_per_intensity * (peak / bandwidth)
        object.__setattr__(self, "_half", halves)
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

    def kernel_floor(self, op_class: str) -> int:
        """The fixed device cost of one kernel of ``op_class``, in ns."""
        return self.kernel_floor_ns.get(op_class, self.op_overhead_ns)

    def compute_ns(self, op_class: str, flops: float, mem_bytes: float, dtype: str, *,
                   m_rows: float = 0.0, kv_tokens: float = 0.0, k_depth: float = 0.0,
                   q_rows: float = 0.0, causal: bool = True, head_dim: float = 0.0,
                   pieces: float = 0.0) -> int:
        """Device time of one kernel, in whole ns (rounded up), its floor included.

        max(flops / (peak[dtype] * e), mem_bytes / (bw * e_memory)) plus the class's overlap
        times the shorter of the two, plus the class's kernel floor, where e is the efficiency
        of ``op_class`` in ``dtype`` for a kernel of ``m_rows`` rows (matmul: the GEMM's M) of
        depth ``k_depth`` (matmul: its K), over ``kv_tokens`` KV tokens (attention) with
        ``q_rows`` query rows sharing one KV head; 0 means unknown and takes the large-block
        efficiency; ``causal``: the block has a causal mask (attention); ``head_dim``: the
        attention kernel's head dim (0: the reference). An op of class ``memory`` times its
        FLOPs at the full peak. 0 FLOPs and 0 bytes cost the floor alone. A kernel that moves
        bytes streams them in ``pieces`` pieces (a grouped GEMM's groups; 0 or 1: one), each
        paying the class's ``stream_ramp_ns`` on the memory side (the achieved bandwidth of a
        small piece is lower; docs/hardware.md). How the kernel is launched is
        :meth:`launched_ns`'s.
        """
        peak = self._peak(dtype)
        for what, amount in (("flops", flops), ("mem_bytes", mem_bytes), ("m_rows", m_rows),
                             ("kv_tokens", kv_tokens), ("k_depth", k_depth),
                             ("q_rows", q_rows), ("pieces", pieces)):
            if not (math.isfinite(amount) and amount >= 0):
                raise ValueError(f"{what} must be a finite number >= 0, got {amount!r}")
        flop_eff, overlap, ramp = self._efficiency(op_class, dtype, causal, head_dim,
                                                   shape_factor, m_rows, kv_tokens, k_depth,
                                                   q_rows)
        compute_time_ns = flops * 1e9 / (peak * flop_eff)
        memory_time_ns = mem_bytes * 1e9 / self._achieved_bandwidth
        if ramp and mem_bytes > 0.0:
            memory_time_ns = memory_time_ns + max(pieces, 1.0) * ramp
        longer = max(compute_time_ns, memory_time_ns)
        if overlap:
            longer = longer + overlap * min(compute_time_ns, memory_time_ns)
        return ceil_ns(longer) + self.kernel_floor(op_class)

    def compute_ns_array(self, op_class: str, flops: ArrayLike, mem_bytes: ArrayLike,
                         dtype: str, *, m_rows: ArrayLike = 0.0, kv_tokens: ArrayLike = 0.0,
                         k_depth: ArrayLike = 0.0, q_rows: ArrayLike = 0.0,
                         causal: bool = True, head_dim: float = 0.0,
                         pieces: ArrayLike = 0.0) -> npt.NDArray[np.int64]:
        """:meth:`compute_ns` for a block of kernels of one class and dtype: numpy arrays (or
        scalars, broadcast together) in, an int64 array out, equal element by element to the
        scalar method (the same float operations in the same order)."""
        import numpy as np  # imported here: commands that simulate nothing never load numpy

        peak = self._peak(dtype)
        arrays = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64)
                                       for x in (flops, mem_bytes, m_rows, kv_tokens, k_depth,
                                                 q_rows, pieces)))
        flops_a, bytes_a, rows_a, kv_a, depth_a, q_a, pieces_a = arrays
        # One check over all seven (the graph build calls this for every op: one reduction,
        # not fourteen); the field is named only when one fails.
        stacked = np.stack(arrays)
        if not (np.isfinite(stacked).all() and (stacked >= 0).all()):
            for what, amounts in zip(("flops", "mem_bytes", "m_rows", "kv_tokens", "k_depth",
                                      "q_rows", "pieces"), arrays, strict=True):
                if not (np.all(np.isfinite(amounts)) and np.all(amounts >= 0)):
                    raise ValueError(f"{what} must be finite numbers >= 0")
        flop_eff, overlap, ramp = self._efficiency(op_class, dtype, causal, head_dim,
                                                   shape_factor_array, rows_a, kv_a, depth_a,
                                                   q_a)
        compute_time_ns = flops_a * 1e9 / (peak * flop_eff)
        memory_time_ns = bytes_a * 1e9 / self._achieved_bandwidth
        if ramp:
            memory_time_ns = np.where(bytes_a > 0.0,
                                      memory_time_ns + np.maximum(pieces_a, 1.0) * ramp,
                                      memory_time_ns)
        longer = np.maximum(compute_time_ns, memory_time_ns)
        if overlap:
            longer = longer + overlap * np.minimum(compute_time_ns, memory_time_ns)
        return ceil_ns_array(longer) + self.kernel_floor(op_class)

    def _efficiency(self, op_class: str, dtype: str, causal: bool, head_dim: float,
                    shape: Callable[..., Any], m_rows: Any, kv_tokens: Any, k_depth: Any,
                    q_rows: Any) -> tuple[Any, float, float]:
        """(the fraction of the peak a kernel reaches, its class's overlap, its class's stream
        ramp in ns): 1, 0 and 0 for a ``memory`` op (its floor is its ramp); else the
        large-block efficiency times ``shape`` (:func:`shape_factor`, or its array twin, of the
        kernel's sizes): one formula for the scalar and the array method, the same float
        operations in the same order."""
        if op_class == MEMORY:
            return 1.0, 0.0, 0.0
        large = self._large_of(op_class, dtype, head_dim)
        p = self.efficiency_model.compute[op_class]
        half = self._half.get((op_class, dtype), self.efficiency_model.half_of(op_class, causal))
        return large * shape(op_class, half, m_rows, kv_tokens, tile_rows=p.tile_rows,
                             depth_half=p.depth_half, k_depth=k_depth,
                             q_rows=q_rows), p.overlap, p.stream_ramp_ns

    def launched_ns(self, device_ns: int | npt.NDArray[np.int64], kernels: int,
                    mode: str) -> int | npt.NDArray[np.int64]:
        """The time of an op of ``kernels`` kernels whose device times sum to ``device_ns``
        (an int or an int64 array), launched in ``mode``:

        * ``graph``: replayed from a CUDA graph, each kernel after the launch gap:
          ``device + kernels * gap``;
        * ``eager``: issued one by one by the host, which runs ahead of the device while the
          kernels are long and makes it wait while they are short:
          ``max(device + kernels * gap, kernels * eager_dispatch)``;
        * ``device``: the kernels' own time (no launch; what a profiler reports).
        """
        if mode == DEVICE:
            return device_ns
        gapped = device_ns + kernels * self.launch_gap_ns
        if mode == GRAPH:
            return gapped
        if mode == EAGER:
            import numpy as np

            issued = kernels * self.eager_dispatch_ns
            if isinstance(gapped, int):
                return max(gapped, issued)
            return np.maximum(gapped, issued)
        raise ValueError(f"launch mode {mode!r} is not one of {LAUNCH_MODES}")

    # ------------------------------------------------------------------------------ lookups

    def _peak(self, dtype: str) -> float:
        peak = self.peak_flops_per_s.get(dtype)
        if peak is None:
            known = ", ".join(sorted(self.peak_flops_per_s))
            raise ValueError(f"chip {self.name} has no peak for dtype {dtype!r} (known: {known})")
        return peak

    def _large_of(self, op_class: str, dtype: str, head_dim: float = 0.0) -> float:
        if head_dim > 0.0:
            params = self.efficiency_model.compute.get(op_class)
            if params is not None and params.balance_head_dim > 0.0:
                return params.large(self._peak(dtype), self.memory_bandwidth_bytes_per_s,
                                    head_dim)
        large = self._large.get((op_class, dtype))
        if large is None:
            known = ", ".join(sorted([*self.efficiency_model.compute, MEMORY]))
            raise ValueError(f"chip {self.name} has no efficiency for op class {op_class!r} "
                             f"(known: {known})")
        return large


def _check_positive(what: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{what} = {value!r} must be a finite number > 0")
