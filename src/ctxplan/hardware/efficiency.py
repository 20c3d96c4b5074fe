"""Achievable efficiency of an op as a function of its shape and of the chip's balance.

The figures (ceilings, balance costs, half-shapes, the memory fraction) are data: they live in
``config/presets/efficiency-model.yaml`` (the defaults, with their sources) and in chip files
(a calibrated chip overrides some). This module holds only the formulas; docs/hardware.md
("The efficiency model") derives them and lists the measurements behind every figure.

For a compute op class (``matmul``, ``attention``) running dtype ``d`` on a chip with dense peak
``P_d`` FLOP/s and HBM bandwidth ``B`` bytes/s, the efficiency (fraction of ``P_d``) is

    e = large(P_d / B) * shape(block)
    large(I) = 1 / (1 / ceiling + balance_bytes_per_flop * I)

* ``large`` is the efficiency of a large block. A kernel does work besides its tensor-core
  FLOPs (softmax, rescaling, tile loads, epilogues) whose throughput scales with the chip's
  non-tensor resources, for which HBM bandwidth is the spec-sheet proxy; the part of it that is
  not hidden costs ``balance_bytes_per_flop`` bytes at ``B`` per FLOP. A chip whose compute is
  light against its bandwidth (small ``P_d / B``) approaches ``ceiling``; doubling the tensor
  rate alone (FP8 against BF16 on the same chip) lowers the fraction, as measured.
* ``shape`` is the loss of a small block, 1 for a large one and for an unknown shape (0):
  - matmul, on the GEMM's rows ``m``: ``m / (m + min(m, half))``. A GEMM costs as if it had
    ``half`` more rows (tile padding, the last partial wave of tiles, pipeline fill), capped at
    twice its own rows: a GEMM that small is bound by streaming its weights anyway. It is
    computed as ``1 / (1 + min(m, half) / m)``, the same fraction, because each rounded step of
    that form moves one way as ``m`` grows (``min(m, half) / m`` never rises, so neither does
    ``1 + ...``), so the rounded factor never falls as the block grows; ``m / (m + half)`` could
    (499.70 rows gave 0.9999999999999979, 518.93 rows 0.9999999999999978, half = 1.1e-12).
  - attention, on the KV tokens ``k`` of the block: ``1 / (1 + (half / k)^2)`` for ``k >= half``
    and ``k / (2 half)`` below. The square is what the FlashAttention-3 timings show (a knee,
    not a hyperbola); below ``half`` the time per query row stays that of ``half`` keys, so a
    smaller block is never slower.

Every formula uses only +, -, *, / and min / comparisons, so the numpy version
(:func:`shape_factor_array`) gives the same bits as the scalar one element by element.
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

    def __post_init__(self) -> None:
        if not (math.isfinite(self.ceiling) and self.ceiling > 0):
            raise ValueError(f"ceiling = {self.ceiling!r} must be a finite number > 0")
        for what, value in (("balance_bytes_per_flop", self.balance_bytes_per_flop),
                            ("half_shape", self.half_shape)):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{what} = {value!r} must be a finite number >= 0")

    def large(self, peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
        """Efficiency of a large block on a chip of this peak and HBM bandwidth."""
        if self.balance_bytes_per_flop == 0.0:
            return self.ceiling  # exactly the given fraction (1 / (1 / c) may differ by an ulp)
        balance = peak_flops_per_s / bandwidth_bytes_per_s
        return 1.0 / (1.0 / self.ceiling + self.balance_bytes_per_flop * balance)


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

    def with_class(self, op_class: str, **changes: float) -> EfficiencyModel:
        """A copy with some parameters of one op class changed."""
        compute = dict(self.compute)
        compute[op_class] = replace(compute[op_class], **changes)
        return EfficiencyModel(compute, self.memory)


# ---------------------------------------------------------------------------------- shape


def shape_factor(op_class: str, half_shape: float, m_rows: float, kv_tokens: float) -> float:
    """The small-block factor in (0, 1] (1 for an unknown shape, 0 rows / 0 tokens)."""
    if op_class == MATMUL:
        if m_rows <= 0.0:
            return 1.0
        return 1.0 / (1.0 + min(m_rows, half_shape) / m_rows)   # monotone after rounding
    if op_class == ATTENTION:
        if kv_tokens <= 0.0:
            return 1.0
        if kv_tokens >= half_shape:
            ratio = half_shape / kv_tokens
            return 1.0 / (1.0 + ratio * ratio)
        return kv_tokens / (half_shape + half_shape)
    return 1.0


def shape_factor_array(op_class: str, half_shape: float, m_rows: FloatArray,
                       kv_tokens: FloatArray) -> FloatArray:
    """:func:`shape_factor` element by element, with the same float operations in the same
    order (so the same bits). ``m_rows`` and ``kv_tokens`` are float64 arrays of one shape."""
    import numpy as np  # imported here: commands that simulate nothing never load numpy

    ones = np.ones_like(m_rows)
    if op_class == MATMUL:
        known = m_rows > 0.0
        ratio = np.divide(np.minimum(m_rows, half_shape), m_rows,
                          out=np.zeros_like(m_rows), where=known)
        return np.divide(1.0, 1.0 + ratio, out=ones, where=known)
    if op_class == ATTENTION:
        known = kv_tokens > 0.0
        large = known & (kv_tokens >= half_shape)
        small = known & ~large
        ratio = np.divide(half_shape, kv_tokens, out=np.zeros_like(kv_tokens), where=large)
        out = np.divide(1.0, 1.0 + ratio * ratio, out=ones, where=large)
        return np.divide(kv_tokens, half_shape + half_shape, out=out, where=small)
    return ones


__all__ = ["ATTENTION", "MATMUL", "MEMORY", "ClassEfficiency", "EfficiencyModel", "shape_factor",
           "shape_factor_array"]
