"""Achievable efficiency of an op as a function of its shape and of the chip's balance.

The figures (ceilings, balance costs, half-shapes, the memory fraction) are data: they live in
``config/presets/efficiency-model.yaml`` (the defaults, with their sources) and in chip files
(a calibrated chip overrides some). This module holds only the formulas; docs/hardware.md
("The efficiency model") derives them and lists the measurements behind every figure.

For a compute op class (``matmul``, ``attention``) running dtype ``d`` on a chip with dense peak
``P_d`` FLOP/s and HBM bandwidth ``B`` bytes/s, the efficiency (fraction of ``P_d``) is

    e = large(P_d / B) * shape(block)
    large(I) = 1 / (1 / ceiling + balance_bytes_per_flop * I)   (attention: * d_ref / d)

* ``large`` is the efficiency of a large block. A kernel does work besides its tensor-core
  FLOPs (softmax, rescaling, tile loads, epilogues) whose throughput scales with the chip's
  non-tensor resources, for which HBM bandwidth is the spec-sheet proxy; the part of it that is
  not hidden costs ``balance_bytes_per_flop`` bytes at ``B`` per FLOP. A chip whose compute is
  light against its bandwidth (small ``P_d / B``) approaches ``ceiling``; doubling the tensor
  rate alone (FP8 against BF16 on the same chip) lowers the fraction, as measured.
* ``shape`` is the loss of a small kernel (issue 26: it falls with the work per tile), 1 for a
  large one and for an unknown shape (0):
  - matmul, on the GEMM's rows ``m`` and depth ``K``:
    ``(m / max(m, tile)) * 1 / (1 + min(p, half) / p) * 1 / (1 + depth_half / K)``, p = max(m,
    tile). Rows below one tensor-core tile (``tile_rows``) are padded to it (the MMA computes
    the whole tile); a GEMM costs as if it had ``half`` more rows (the pipeline fill, the last
    partial wave), capped at twice its padded rows, ``half = half_per_intensity * P_d / B``
    when that is given (the fill is tile loads: worth rows in proportion to the chip's
    balance); and a tile's fixed work (its prologue, the epilogue that writes it) costs
    ``depth_half`` steps of K: a short K (512) reaches half the rate of a long one (DeepGEMM's
    M = 4096 rows, validation/kernels).
  - attention, on the KV tokens ``k`` of the block and the query rows ``q`` sharing one KV
    head in it: ``1 / (1 + (half / k)^2)`` for ``k >= half``, ``k / (2 half)`` below, times
    ``q / max(q, tile)``, ``half`` being ``half_full`` for a block without a causal mask (every
    query tile does the same work: FlashAttention-3 and -4 lose less at 1K). The square is what
    the FlashAttention-3 timings show (a knee, not a hyperbola); below ``half`` the time per
    query row stays that of ``half`` keys, so a smaller block is never slower. Query rows
    below one tile (FlashMLA's and FlashAttention-3's 64-row Q tile) are padded: decode on a
    compute-light chip is compute-bound on the padding (FlashMLA on H20: the time is flat from
    16 to 64 rows).

A kernel's time is ``max(t_flops, t_bytes) + overlap * min(t_flops, t_bytes)`` (Chip.compute_ns):
near its ridge point a kernel hides its weight stream under its tensor work imperfectly
(DeepGEMM's masked GEMM at 256 rows per expert on H800 takes 1.5 times its roofline).

The memory-bound side has its size term too: ``t_bytes = bytes / (B * memory) + pieces *
stream_ramp`` for a kernel that moves bytes, ``pieces`` the streams it runs one after another
(a grouped GEMM: one per group, each expert's weights; any other kernel: one). A piece of ``x``
bytes so reaches ``B * memory / (1 + h / x)`` with ``h = stream_ramp * B * memory``: the
achieved bandwidth falls with the bytes a piece moves (issue 26), and the term vanishes for a
large stream. For a one-piece kernel it adds to the memory time what the kernel floor adds to
the whole (the two are fitted together); what it alone says is that each expert of a grouped
GEMM pays its own ramp, and that a compute-bound kernel hides it.

Every formula uses only +, -, *, / and min / max / comparisons, so the numpy version
(:func:`shape_factor_array`) gives the same bits as the scalar one element by element. And each is
written so that it stays monotone after rounding: every factor is a chain of correctly rounded
operations each monotone in the one size it depends on (``1 / (1 + h / x)`` rather than
``x / (x + h)``, whose numerator and denominator both move), so a smaller kernel never gets a
higher factor, bit for bit (tests/hardware/test_hardware_efficiency.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ctxplan.hardware.frozen_map import FrozenMap

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]


MATMUL = "matmul"
ATTENTION = "attention"
MEMORY = "memory"


@dataclass(frozen=True)
class ClassEfficiency:
    """Efficiency parameters of one compute op class (see the module docstring)."""

    # Large-block efficiency as P / B -> 0. Chip files keep it <= 1; a perturbation may push it
    # above (see hardware.perturb), so the bound checked is on what a chip realises: the Chip
    # refuses any efficiency above 1 in any dtype.
    ceiling: float
    balance_bytes_per_flop: float   # >= 0: unhidden non-tensor work per FLOP, in bytes at B
    half_shape: float               # >= 0: rows (matmul) or KV tokens (attention); 0 = no loss
    # >= 0: rows of one tensor-core tile (matmul: the GEMM's M; attention: the query rows that
    # share one KV head); fewer rows are padded to it. 0 = no padding.
    tile_rows: float = 0.0
    # >= 0 (matmul): the K steps a tile's fixed work costs (prologue, epilogue); 0 = no loss.
    depth_half: float = 0.0
    # >= 0 (matmul): when > 0, the half-shape in rows per FLOP/byte of the chip's P_d / B,
    # replacing half_shape: the pipeline fill is a fixed number of tile loads, worth more rows
    # of tensor work the faster the tensor cores are against HBM (H20: few; H800 FP8: many).
    half_per_intensity: float = 0.0
    # > 0 (attention): the head dim the balance term is given at; a kernel of head dim d pays
    # balance * balance_head_dim / d (its non-tensor work, the softmax, is per (query, key,
    # head) while its FLOPs are 4 d per pair: FlashAttention-3 at d = 64 reaches less than at
    # 128). 0: the balance does not depend on the head dim.
    balance_head_dim: float = 0.0
    # In [0, 1]: the share of the shorter of a kernel's tensor time and memory time that does
    # not hide under the longer (t = max + overlap * min; 0: the plain roofline).
    overlap: float = 0.0
    # >= 0 (attention): half_shape of a block without a causal mask (every query tile does the
    # same work, so short blocks lose less); None: the same as half_shape.
    half_full: float | None = None
    # >= 0, ns: per piece a kernel streams from HBM (a grouped GEMM: each group's weights), the
    # time before that stream runs at the achieved bandwidth (DRAM latency, the pipeline's first
    # loads): a piece of x bytes reaches B * memory * x / (x + ramp * B * memory) on its own, so
    # a small piece streams more slowly than a large one. Added to the memory time only (a
    # compute-bound kernel hides it). 0: no ramp.
    stream_ramp_ns: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.ceiling) and self.ceiling > 0):
            raise ValueError(f"ceiling = {self.ceiling!r} must be a finite number > 0")
        if not (math.isfinite(self.overlap) and 0 <= self.overlap <= 1):
            raise ValueError(f"overlap = {self.overlap!r} must be in [0, 1]")
        for what, value in (("balance_bytes_per_flop", self.balance_bytes_per_flop),
                            ("half_shape", self.half_shape), ("tile_rows", self.tile_rows),
                            ("depth_half", self.depth_half),
                            ("half_per_intensity", self.half_per_intensity),
                            ("balance_head_dim", self.balance_head_dim),
                            ("stream_ramp_ns", self.stream_ramp_ns),
                            ("half_full", 0.0 if self.half_full is None else self.half_full)):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{what} = {value!r} must be a finite number >= 0")

    def large(self, peak_flops_per_s: float, bandwidth_bytes_per_s: float,
              head_dim: float = 0.0) -> float:
        """Efficiency of a large block on a chip of this peak and HBM bandwidth (attention: of
        head dim ``head_dim``; 0: the reference)."""
        if self.balance_bytes_per_flop == 0.0:
            return self.ceiling  # exactly the given fraction (1 / (1 / c) may differ by an ulp)
        balance = peak_flops_per_s / bandwidth_bytes_per_s
        cost = self.balance_bytes_per_flop
        if head_dim > 0.0 and self.balance_head_dim > 0.0:
            cost = cost * (self.balance_head_dim / head_dim)
        return 1.0 / (1.0 / self.ceiling + cost * balance)


@dataclass(frozen=True)
class EfficiencyModel:
    """Per op class: how its efficiency follows shape and chip balance; and the HBM fraction.

    ``compute`` maps op classes to their parameters (presets have ``matmul`` and
    ``attention``); ``memory`` is the achievable fraction of HBM bandwidth, applied to the
    bytes of every op.
    """

    compute: Mapping[str, ClassEfficiency]
    memory: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "compute", FrozenMap(self.compute))
        if MEMORY in self.compute:
            raise ValueError(f"{MEMORY!r} is the HBM fraction, not a compute op class")
        if not (math.isfinite(self.memory) and 0 < self.memory <= 1):
            raise ValueError(f"memory = {self.memory!r} must be in (0, 1]")

    @classmethod
    def constant(cls, efficiency: Mapping[str, float]) -> EfficiencyModel:
        """Fixed fractions per op class, as chip files gave them before the model: no shape
        loss and no balance term (``{"matmul": 0.7, "attention": 0.6, "memory": 0.85}``)."""
        if MEMORY not in efficiency:
            raise ValueError(f"efficiency needs a {MEMORY!r} entry")
        compute = {}
        for op_class, fraction in efficiency.items():
            if op_class == MEMORY:
                continue
            try:
                compute[op_class] = ClassEfficiency(fraction, 0.0, 0.0)
            except ValueError as exc:
                raise ValueError(f"efficiency[{op_class!r}]: {exc}") from None
        return cls(compute, efficiency[MEMORY])

    def half_of(self, op_class: str, causal: bool) -> float:
        """The half-shape a block of ``op_class`` takes (attention: by its mask)."""
        p = self.compute[op_class]
        return p.half_shape if causal or p.half_full is None else p.half_full

    def with_class(self, op_class: str, **changes: float) -> EfficiencyModel:
        """A copy with some parameters of one op class changed."""
        compute = dict(self.compute)
        compute[op_class] = replace(compute[op_class], **changes)
        return EfficiencyModel(compute, self.memory)


# ---------------------------------------------------------------------------------- shape


def shape_factor(op_class: str, half_shape: float, m_rows: float, kv_tokens: float, *,
                 tile_rows: float = 0.0, depth_half: float = 0.0, k_depth: float = 0.0,
                 q_rows: float = 0.0) -> float:
    """The small-kernel factor in (0, 1] (1 for an unknown shape: 0 rows / tokens / depth; a
    known size below 1 counts as 1: a kernel has at least one row, key and step of K)."""
    if op_class == MATMUL:
        factor = 1.0
        if m_rows > 0.0:
            padded = max(m_rows, tile_rows, 1.0)
            factor = (max(m_rows, 1.0) / padded) * (1.0 / (1.0 + min(padded, half_shape)
                                                           / padded))
        if k_depth > 0.0:
            factor = factor * (1.0 / (1.0 + depth_half / max(k_depth, 1.0)))
        return factor
    if op_class == ATTENTION:
        factor = 1.0
        if kv_tokens > 0.0:
            kv = max(kv_tokens, 1.0)
            if kv >= half_shape:
                ratio = half_shape / kv
                factor = 1.0 / (1.0 + ratio * ratio)
            else:
                factor = kv / (half_shape + half_shape)
        if q_rows > 0.0:
            q = max(q_rows, 1.0)
            factor = factor * (q / max(q, tile_rows))
        return factor
    return 1.0


def shape_factor_array(op_class: str, half_shape: float, m_rows: FloatArray,
                       kv_tokens: FloatArray, *, tile_rows: float = 0.0,
                       depth_half: float = 0.0, k_depth: FloatArray | None = None,
                       q_rows: FloatArray | None = None) -> FloatArray:
    """:func:`shape_factor` element by element, with the same float operations in the same
    order (so the same bits). The sizes are float64 arrays of one shape."""
    import numpy as np  # imported here: commands that simulate nothing never load numpy

    ones = np.ones_like(m_rows)
    if op_class == MATMUL:
        known = m_rows > 0.0
        rows = np.maximum(m_rows, 1.0)
        padded = np.maximum(np.maximum(m_rows, tile_rows), 1.0)
        wave = 1.0 / (1.0 + np.minimum(padded, half_shape) / padded)
        factor = np.where(known, (rows / padded) * wave, 1.0)
        if k_depth is not None:
            deep = k_depth > 0.0
            depth = 1.0 / (1.0 + depth_half / np.maximum(k_depth, 1.0))
            factor = np.where(deep, factor * depth, factor)
        return factor
    if op_class == ATTENTION:
        known = kv_tokens > 0.0
        kv = np.maximum(kv_tokens, 1.0)
        large = known & (kv >= half_shape)
        small = known & ~large
        ratio = half_shape / kv
        out = np.where(large, 1.0 / (1.0 + ratio * ratio), 1.0)
        out = np.divide(kv, half_shape + half_shape, out=out, where=small)
        if q_rows is not None:
            rows_known = q_rows > 0.0
            q = np.maximum(q_rows, 1.0)
            out = np.where(rows_known, out * (q / np.maximum(q, tile_rows)), out)
        return out
    return ones


__all__ = ["ATTENTION", "MATMUL", "MEMORY", "ClassEfficiency", "EfficiencyModel", "shape_factor",
           "shape_factor_array"]
