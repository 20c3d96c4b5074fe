"""Load chips and clusters from presets (by name), from files (by path), or from inline dicts.

Everything is validated by ``hardware_schema`` and converted to the frozen dataclasses of
:mod:`ctxplan.hardware`: GB -> bytes (1 GB = 1e9 bytes), GB/s -> bytes/s, us -> ns, TFLOP/s ->
FLOP/s. Every user mistake becomes one ``UserInputError`` line naming the field.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from ctxplan.config.hardware_schema import ChipSchema, ClusterSchema
from ctxplan.config.loader import read_mapping, validate
from ctxplan.errors import UserInputError
from ctxplan.hardware import Chip, Cluster, Level

T = TypeVar("T")

_PRESETS_DIR = Path(__file__).parent / "presets"
_FILE_SUFFIXES = (".yaml", ".yml", ".json")

_GB = 1e9
_TERA = 1e12
_NS_PER_US = 1e3


def chip_names() -> list[str]:
    """Names of the chip presets, sorted."""
    return _preset_names("chips")


def cluster_names() -> list[str]:
    """Names of the cluster presets, sorted."""
    return _preset_names("clusters")


def load_chip(name_or_path: str) -> Chip:
    """A chip preset by name (case-insensitive), or a chip file by path (.yaml/.yml/.json)."""
    return _load("chip", name_or_path, chip_names(), _chip_preset, chip_from_dict)


def load_cluster(name_or_path: str) -> Cluster:
    """A cluster preset by name (case-insensitive), or a cluster file by path."""
    return _load("cluster", name_or_path, cluster_names(), _cluster_preset, cluster_from_dict)


def chip_from_dict(d: dict[str, Any], where: str, name: str | None = None) -> Chip:
    """Validate an inline chip definition. ``name`` is used when ``d`` has no ``name`` key."""
    spec = validate(ChipSchema, d, where)
    return Chip(
        name=_name(spec.name, name, where),
        peak_flops_per_s={dtype: tflops * _TERA for dtype, tflops in spec.peak_tflops.items()},
        memory_bytes=round(spec.memory_gb * _GB),
        memory_bandwidth_bytes_per_s=spec.memory_bandwidth_gbps * _GB,
        efficiency=spec.efficiency.model_dump(),
        op_overhead_ns=round(spec.op_overhead_us * _NS_PER_US),
        reserved_memory_bytes=round(spec.reserved_memory_gb * _GB),
        default_cluster=spec.default_cluster,
        source=spec.source,
        verified=spec.verified,
    )


def cluster_from_dict(d: dict[str, Any], where: str, name: str | None = None) -> Cluster:
    """Validate an inline cluster definition. ``name`` is used when ``d`` has no ``name`` key."""
    spec = validate(ClusterSchema, d, where)
    levels = tuple(
        Level(
            name=level.name,
            chips_per_group=level.chips_per_group,
            fabric=level.fabric,
            bandwidth_bytes_per_s=level.bandwidth_gbps * _GB,
            latency_ns=round(level.latency_us * _NS_PER_US),
            efficiency=level.efficiency,
        )
        for level in spec.levels
    )
    return Cluster(
        name=_name(spec.name, name, where),
        chip=spec.chip,
        levels=levels,
        source=spec.source,
        verified=spec.verified,
    )


def _name(given: str | None, fallback: str | None, where: str) -> str:
    if given is not None:
        return given
    if fallback is None:
        raise UserInputError(
            f"{where}: name", None, "add 'name: <a name>'", "required field missing"
        )
    return fallback


def _preset_names(kind: str) -> list[str]:
    return sorted(path.stem for path in (_PRESETS_DIR / kind).glob("*.yaml"))


@cache
def _chip_preset(name: str) -> Chip:
    path = _PRESETS_DIR / "chips" / f"{name}.yaml"
    return chip_from_dict(read_mapping(path, f"chip {name}"), f"chip {name}", name=name)


@cache
def _cluster_preset(name: str) -> Cluster:
    path = _PRESETS_DIR / "clusters" / f"{name}.yaml"
    return cluster_from_dict(read_mapping(path, f"cluster {name}"), f"cluster {name}", name=name)


def _load(
    what: str,
    name_or_path: str,
    names: list[str],
    from_preset: Callable[[str], T],
    from_dict: Callable[..., T],
) -> T:
    key = name_or_path.strip().lower()
    if key in names:
        return from_preset(key)
    path = Path(name_or_path)
    if path.suffix.lower() in _FILE_SUFFIXES or "/" in name_or_path or "\\" in name_or_path:
        where = str(path)
        return from_dict(read_mapping(path, f"{what} file"), where, name=path.stem)
    raise UserInputError(
        what,
        name_or_path,
        f"use one of: {', '.join(names)}; or the path of a {what} file (.yaml/.yml/.json)",
        f"unknown {what} preset",
    )


def hardware_definition(kind: str, name_or_path: str) -> dict[str, Any]:
    """The inline definition (a mapping, as a study file holds it) that a ``kind`` ("chip" or
    "cluster") preset name or file stands for, its ``name`` filled in; the usual error for an
    unknown name or a bad file."""
    key = name_or_path.strip().lower()
    if key in _preset_names(f"{kind}s"):
        data = read_mapping(_PRESETS_DIR / f"{kind}s" / f"{key}.yaml", f"{kind} {key}")
        data.setdefault("name", key)
        return data
    (load_chip if kind == "chip" else load_cluster)(name_or_path)  # checks name and file
    data = read_mapping(Path(name_or_path), f"{kind} file")
    data.setdefault("name", Path(name_or_path).stem)
    return data
