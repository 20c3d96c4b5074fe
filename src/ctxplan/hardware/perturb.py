"""Perturbation: a chip or cluster with one named figure scaled, everything else unchanged.

The machinery behind sensitivity studies ("how much does this result move when HBM bandwidth
is 10% higher?"): ``ctxplan validate --sensitivity`` uses it for the account of fitted figures
(docs/validation.md), and any other study can. Figures are named by a path:

chip (``chip.<name>``):
  ``peak.<dtype>``                  dense peak FLOP/s of one dtype
  ``memory_bandwidth``              HBM bandwidth
  ``memory_capacity``               HBM capacity (the reserve is kept)
  ``op_overhead``                   the fixed device cost of a kernel: every class's floor
  ``kernel_floor.<class>``          the kernel floor of one op class
  ``launch_gap``                    the gap between two kernels (graph replay, eager)
  ``eager_dispatch``                the host's time to issue one kernel without a graph
  ``efficiency.memory``             achievable fraction of HBM bandwidth
  ``efficiency.<class>``            the large-block efficiency of an op class, in every dtype
  ``efficiency.<class>.ceiling``    a parameter of the efficiency model
  ``efficiency.<class>.balance``    (balance_bytes_per_flop)
  ``efficiency.<class>.half``       (half_shape: rows for matmul, KV tokens for attention)
  ``efficiency.<class>.tile``       (tile_rows: rows of one tensor-core tile)
  ``efficiency.<class>.depth``      (depth_half: matmul, K steps of a tile's fixed work)
  ``efficiency.<class>.ramp``       (stream_ramp_ns: per piece streamed, before it runs at rate)

cluster (``cluster.<level>.<name>``, the level by its name):
  ``bandwidth``, ``efficiency``, ``latency``, ``op_overhead`` (a point-to-point operation),
  ``collective_overhead`` (a collective operation; scaling it when the level gives none scales
  the point-to-point figure it defaults to, and sets it)

Scaling an integer figure (bytes, ns) rounds to the nearest integer. A scaled figure outside its
valid range (an efficiency above 1, a capacity below the reserve) raises ``ValueError``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster, Level
from ctxplan.hardware.efficiency import EfficiencyModel

_CHIP_SCALARS = {
    "memory_bandwidth": "memory_bandwidth_bytes_per_s",
    "memory_capacity": "memory_bytes",
    "op_overhead": "op_overhead_ns",
    "launch_gap": "launch_gap_ns",
    "eager_dispatch": "eager_dispatch_ns",
}
_CLASS_PARAMS = {"ceiling": "ceiling", "balance": "balance_bytes_per_flop", "half": "half_shape",
                 "tile": "tile_rows", "depth": "depth_half", "overlap": "overlap",
                 "half_per_intensity": "half_per_intensity", "ramp": "stream_ramp_ns"}
_LEVEL_FIELDS = {
    "bandwidth": "bandwidth_bytes_per_s",
    "efficiency": "efficiency",
    "latency": "latency_ns",
    "op_overhead": "op_overhead_ns",
    "collective_overhead": "collective_overhead_ns",
}
_INT_FIELDS = {"memory_bytes", "op_overhead_ns", "latency_ns", "collective_overhead_ns",
               "launch_gap_ns", "eager_dispatch_ns"}


def chip_figures(chip: Chip) -> tuple[str, ...]:
    """Every figure of ``chip`` that :func:`scale_chip` can scale, in a stable order."""
    names = [f"peak.{dtype}" for dtype in sorted(chip.peak_flops_per_s)]
    names += list(_CHIP_SCALARS)
    names += [f"kernel_floor.{c}" for c in sorted(chip.kernel_floor_ns)]
    names.append("efficiency.memory")
    for op_class in sorted(chip.efficiency_model.compute):
        names.append(f"efficiency.{op_class}")
        names += [f"efficiency.{op_class}.{p}" for p in _CLASS_PARAMS]
    return tuple(names)


def cluster_figures(cluster: Cluster) -> tuple[str, ...]:
    """Every figure of ``cluster`` that :func:`scale_cluster` can scale, in a stable order."""
    return tuple(f"{level.name}.{f}" for level in cluster.levels for f in _LEVEL_FIELDS)


def chip_figure(chip: Chip, figure: str) -> float:
    """The current value of a chip figure (in the dataclass's units: FLOP/s, bytes, ns)."""
    kind, key = _parse_chip(chip, figure)
    model = chip.efficiency_model
    if kind == "peak":
        return chip.peak_flops_per_s[key]
    if kind == "scalar":
        return float(getattr(chip, key))
    if kind == "floor":
        return float(chip.kernel_floor_ns[key])
    if kind == "memory":
        return model.memory
    if kind == "large":
        return chip.efficiency[key]
    op_class, param = key.split(".")
    return float(getattr(model.compute[op_class], _CLASS_PARAMS[param]))


def scale_chip(chip: Chip, figure: str, factor: float) -> Chip:
    """``chip`` with one figure multiplied by ``factor`` (see the module docstring)."""
    _check_factor(factor)
    kind, key = _parse_chip(chip, figure)
    model = chip.efficiency_model
    if kind == "peak":
        peaks = dict(chip.peak_flops_per_s)
        peaks[key] *= factor
        return replace(chip, peak_flops_per_s=peaks)
    if kind == "scalar":
        changes: dict[str, Any] = {key: _scaled(key, getattr(chip, key), factor)}
        if key == "op_overhead_ns":
            # The per-kernel fixed cost: every class's floor moves with it.
            changes["kernel_floor_ns"] = {c: round(v * factor)
                                          for c, v in chip.kernel_floor_ns.items()}
        return replace(chip, **changes)
    if kind == "floor":
        floors = dict(chip.kernel_floor_ns)
        floors[key] = round(floors[key] * factor)
        return replace(chip, kernel_floor_ns=floors)
    if kind == "memory":
        return replace(chip, efficiency_model=EfficiencyModel(model.compute,
                                                              model.memory * factor))
    params = model.compute[key.split(".")[0]]
    if kind == "large":
        # 1 / large = 1 / ceiling + balance * P / B: scaling ceiling by f and balance by 1 / f
        # scales the large-block efficiency by exactly f in every dtype.
        new = model.with_class(key, ceiling=params.ceiling * factor,
                               balance_bytes_per_flop=params.balance_bytes_per_flop / factor)
        return replace(chip, efficiency_model=new)
    op_class, param = key.split(".")
    field_name = _CLASS_PARAMS[param]
    new = model.with_class(op_class, **{field_name: getattr(params, field_name) * factor})
    return replace(chip, efficiency_model=new)


def cluster_figure(cluster: Cluster, figure: str) -> float:
    """The current value of a cluster figure (bytes/s, fraction, ns)."""
    index, field_name = _parse_cluster(cluster, figure)
    return float(_level_value(cluster.levels[index], field_name))


def scale_cluster(cluster: Cluster, figure: str, factor: float) -> Cluster:
    """``cluster`` with one figure of one level multiplied by ``factor``."""
    _check_factor(factor)
    index, field_name = _parse_cluster(cluster, figure)
    levels = list(cluster.levels)
    old = _level_value(levels[index], field_name)
    new = _scaled(field_name, old, factor)
    if field_name == "collective_overhead_ns" and levels[index].collective_overhead_ns is None \
            and new == old:
        return cluster   # still the point-to-point figure it defaults to: nothing changed
    changes: dict[str, Any] = {field_name: new}
    levels[index] = replace(levels[index], **changes)
    return replace(cluster, levels=tuple(levels))


def scale(chip: Chip, cluster: Cluster, figure: str, factor: float) -> tuple[Chip, Cluster]:
    """Scale ``chip.<figure>`` or ``cluster.<level>.<figure>``; the other one is unchanged."""
    target, _, rest = figure.partition(".")
    if target == "chip":
        return scale_chip(chip, rest, factor), cluster
    if target == "cluster":
        return chip, scale_cluster(cluster, rest, factor)
    raise ValueError(f"figure {figure!r} must start with 'chip.' or 'cluster.'")


def figures(chip: Chip, cluster: Cluster) -> tuple[str, ...]:
    """Every figure :func:`scale` accepts for this chip and cluster."""
    return (tuple(f"chip.{f}" for f in chip_figures(chip))
            + tuple(f"cluster.{f}" for f in cluster_figures(cluster)))


def figure_value(chip: Chip, cluster: Cluster, figure: str) -> float:
    """The current value of a figure named as :func:`scale` takes it."""
    target, _, rest = figure.partition(".")
    if target == "chip":
        return chip_figure(chip, rest)
    if target == "cluster":
        return cluster_figure(cluster, rest)
    raise ValueError(f"figure {figure!r} must start with 'chip.' or 'cluster.'")


# ------------------------------------------------------------------------------------ parsing


def _parse_chip(chip: Chip, figure: str) -> tuple[str, str]:
    parts = figure.split(".")
    if parts[0] == "peak" and len(parts) == 2 and parts[1] in chip.peak_flops_per_s:
        return "peak", parts[1]
    if len(parts) == 1 and figure in _CHIP_SCALARS:
        return "scalar", _CHIP_SCALARS[figure]
    if parts[0] == "kernel_floor" and len(parts) == 2 and parts[1] in chip.kernel_floor_ns:
        return "floor", parts[1]
    if parts[0] == "efficiency" and len(parts) >= 2:
        if parts[1:] == ["memory"]:
            return "memory", ""
        if parts[1] in chip.efficiency_model.compute:
            if len(parts) == 2:
                return "large", parts[1]
            if len(parts) == 3 and parts[2] in _CLASS_PARAMS:
                return "param", f"{parts[1]}.{parts[2]}"
    known = ", ".join(chip_figures(chip))
    raise ValueError(f"chip {chip.name} has no figure {figure!r} (known: {known})")


def _parse_cluster(cluster: Cluster, figure: str) -> tuple[int, str]:
    level_name, _, field = figure.rpartition(".")
    for index, level in enumerate(cluster.levels):
        if level.name == level_name and field in _LEVEL_FIELDS:
            return index, _LEVEL_FIELDS[field]
    known = ", ".join(cluster_figures(cluster))
    raise ValueError(f"cluster {cluster.name} has no figure {figure!r} (known: {known})")


def _level_value(level: Level, field_name: str) -> float:
    if field_name == "collective_overhead_ns":
        return level.collective_ns   # the point-to-point figure when the level gives none
    return float(getattr(level, field_name))


def _scaled(field_name: str, value: float, factor: float) -> float:
    return round(value * factor) if field_name in _INT_FIELDS else value * factor


def _check_factor(factor: float) -> None:
    if not (factor > 0 and factor < float("inf")):
        raise ValueError(f"factor must be a finite number > 0, got {factor!r}")


__all__ = ["chip_figure", "chip_figures", "cluster_figure", "cluster_figures", "figure_value",
           "figures", "scale", "scale_chip", "scale_cluster"]
