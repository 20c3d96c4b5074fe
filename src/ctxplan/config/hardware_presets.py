"""Load chips and clusters from presets (by name), from files (by path), or from inline dicts.

Everything is validated by ``hardware_schema`` and converted to the frozen dataclasses of
:mod:`ctxplan.hardware`: GB -> bytes (1 GB = 1e9 bytes), GB/s -> bytes/s, us -> ns, TFLOP/s ->
FLOP/s. Every user mistake becomes one ``UserInputError`` line naming the field.

What a chip file omits (efficiencies, overhead, reserve) comes from the efficiency model's
defaults, ``presets/efficiency-model.yaml``, which carry their sources (docs/hardware.md).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from ctxplan.config.hardware_schema import (
    AttentionEfficiencySchema,
    ChipSchema,
    ClusterSchema,
    EfficiencyDefaultsSchema,
    EfficiencySchema,
    MatmulEfficiencySchema,
)
from ctxplan.config.loader import read_mapping, validate
from ctxplan.errors import UserInputError, did_you_mean
from ctxplan.hardware import Chip, Cluster, Level
from ctxplan.hardware.cluster import AlgorithmCost
from ctxplan.hardware.efficiency import (
    ATTENTION,
    MATMUL,
    MEMORY,
    ClassEfficiency,
    EfficiencyModel,
)

T = TypeVar("T")

_PRESETS_DIR = Path(__file__).parent / "presets"
EFFICIENCY_DEFAULTS_PATH = _PRESETS_DIR / "efficiency-model.yaml"
_FILE_SUFFIXES = (".yaml", ".yml", ".json")

# Other names of chip presets: the name a part went by before its variants had presets of their
# own (issue 27: the 96 GB H20 was "h20" before the 141 GB part joined it).
CHIP_ALIASES: dict[str, str] = {"h20": "h20-96"}

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
    """A chip preset by name (case-insensitive; aliases in :data:`CHIP_ALIASES`, so "h20" is
    "h20-96"), or a chip file by path (.yaml/.yml/.json)."""
    return _load("chip", name_or_path, chip_names(), _chip_preset, chip_from_dict,
                 CHIP_ALIASES)


def load_cluster(name_or_path: str) -> Cluster:
    """A cluster preset by name (case-insensitive), or a cluster file by path."""
    return _load("cluster", name_or_path, cluster_names(), _cluster_preset, cluster_from_dict)


def chip_from_dict(d: dict[str, Any], where: str, name: str | None = None) -> Chip:
    """Validate an inline chip definition. ``name`` is used when ``d`` has no ``name`` key."""
    spec = validate(ChipSchema, d, where)
    defaults = efficiency_defaults()
    memory_gb = spec.memory_gb
    if spec.reserved_memory_gb is not None:
        reserved_gb = spec.reserved_memory_gb
    else:
        reserved_gb = (defaults.reserved_memory_gb if memory_gb < defaults.large_memory_gb
                       else defaults.reserved_memory_gb_large)
        if reserved_gb >= memory_gb:
            raise UserInputError(f"{where}: reserved_memory_gb", None,
                                 f"give a reserve below memory_gb ({memory_gb})",
                                 f"the default reserve of {reserved_gb} GB does not fit")
    floors_us = _kernel_floors_us(spec, defaults)
    legacy = spec.op_overhead_us is not None
    gap_us = (spec.launch_gap_us if spec.launch_gap_us is not None
              else 0.0 if legacy else defaults.launch_gap_us)
    dispatch_us = (spec.eager_dispatch_us if spec.eager_dispatch_us is not None
                   else defaults.eager_dispatch_us)
    return Chip(
        name=_name(spec.name, name, where),
        peak_flops_per_s={dtype: tflops * _TERA for dtype, tflops in spec.peak_tflops.items()},
        memory_bytes=round(memory_gb * _GB),
        memory_bandwidth_bytes_per_s=spec.memory_bandwidth_gbps * _GB,
        efficiency_model=efficiency_model(spec.efficiency, defaults),
        op_overhead_ns=round(floors_us[MEMORY] * _NS_PER_US),
        kernel_floor_ns={k: round(v * _NS_PER_US) for k, v in floors_us.items()},
        launch_gap_ns=round(gap_us * _NS_PER_US),
        eager_dispatch_ns=round(dispatch_us * _NS_PER_US),
        reserved_memory_bytes=round(reserved_gb * _GB),
        default_cluster=spec.default_cluster or "",
        source=spec.source or f"chip file {where}: figures given by the user (no source stated)",
        verified=spec.verified,
        calibrated=spec.calibrated,
        tdp_w=spec.tdp_w,
    )


def _kernel_floors_us(spec: ChipSchema, defaults: EfficiencyDefaultsSchema) -> dict[str, float]:
    """Per op class, the kernel floor in us: the file's ``kernel_floor_us``, else its
    ``op_overhead_us`` (the one per-kernel cost of files before issue 26, read as the floor of
    every class), else the model's default. The memory class's is also the chip's
    ``op_overhead_ns`` (the floor of any other class)."""
    given = spec.kernel_floor_us.model_dump()
    default = defaults.kernel_floor_us.model_dump()
    out = {}
    for op_class in (MATMUL, ATTENTION, MEMORY):
        value = given[op_class]
        if value is None:
            value = spec.op_overhead_us if spec.op_overhead_us is not None else default[op_class]
        out[op_class] = float(value)
    return out


@cache
def efficiency_defaults() -> EfficiencyDefaultsSchema:
    """The efficiency model's default parameters (``presets/efficiency-model.yaml``)."""
    where = "efficiency model defaults"
    return validate(EfficiencyDefaultsSchema, read_mapping(EFFICIENCY_DEFAULTS_PATH, where), where)


def efficiency_model(given: EfficiencySchema,
                     defaults: EfficiencyDefaultsSchema | None = None) -> EfficiencyModel:
    """A chip file's efficiencies over the model's defaults: a number for ``matmul`` /
    ``attention`` is a fixed large-block fraction (no balance term; the shape losses stay), a
    mapping overrides parameters, an omission takes the defaults."""
    d = defaults or efficiency_defaults()
    matmul = _class_efficiency(given.matmul, d.matmul, "half_rows", "tile_rows")
    attention = _class_efficiency(given.attention, d.attention, "half_kv_tokens", "tile_q_rows")
    memory = given.memory if given.memory is not None else d.memory
    return EfficiencyModel({MATMUL: matmul, ATTENTION: attention}, memory)


def _class_efficiency(given: float | MatmulEfficiencySchema | AttentionEfficiencySchema | None,
                      default: MatmulEfficiencySchema | AttentionEfficiencySchema,
                      half_key: str, tile_key: str) -> ClassEfficiency:
    base = default.model_dump()
    if isinstance(given, float | int):
        # The form of chip files before the model: one fraction for every dtype (the size terms
        # stay the model's).
        base.update(ceiling=float(given), balance_bytes_per_flop=0.0)
    elif given is not None:
        base.update({k: v for k, v in given.model_dump().items() if v is not None})
    return ClassEfficiency(base["ceiling"], base["balance_bytes_per_flop"], base[half_key],
                           tile_rows=base[tile_key], depth_half=base.get("depth_half") or 0.0,
                           half_full=base.get("half_kv_tokens_full"),
                           overlap=base.get("overlap") or 0.0,
                           half_per_intensity=base.get("half_rows_per_intensity") or 0.0,
                           balance_head_dim=base.get("balance_head_dim") or 0.0,
                           stream_ramp_ns=(base.get("stream_ramp_us") or 0.0) * _NS_PER_US)


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
            op_overhead_ns=round(level.op_overhead_us * _NS_PER_US),
            collective_overhead_ns=_ns_or_none(level.collective_overhead_us),
            allreduce={name: AlgorithmCost(round(a.overhead_us * _NS_PER_US),
                                           round(a.per_peer_us * _NS_PER_US), a.efficiency)
                       for name, a in (level.allreduce.model_dump(exclude_none=True).items()
                                       if level.allreduce else ())
                       for a in [getattr(level.allreduce, name)]},
            dispatch_overhead_ns=_ns_or_none(level.dispatch_overhead_us),
            combine_overhead_ns=_ns_or_none(level.combine_overhead_us),
        )
        for level in spec.levels
    )
    return Cluster(
        name=_name(spec.name, name, where),
        chip=spec.chip,
        levels=levels,
        source=spec.source,
        verified=spec.verified,
        all_to_all_peers_in_flight=spec.all_to_all_peers_in_flight,
        tp_max=spec.tp_max,
        prefill_chunk_tokens=spec.prefill_chunk_tokens,
        group_size=spec.group_size,
        host_chips=next((level.chips_per_group for level in spec.levels if level.host),
                        spec.host_chips),
    )


def _ns_or_none(us: float | None) -> int | None:
    return None if us is None else round(us * _NS_PER_US)


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
    aliases: dict[str, str] | None = None,
) -> T:
    key = name_or_path.strip().lower()
    key = (aliases or {}).get(key, key)
    if not key:
        raise UserInputError(what, name_or_path,
                             f"name a {what} preset ({', '.join(names)}) or file; a chip file "
                             "without default_cluster needs the cluster given explicitly",
                             f"no {what} given")
    if key in names:
        return from_preset(key)
    path = Path(name_or_path)
    if path.suffix.lower() in _FILE_SUFFIXES or "/" in name_or_path or "\\" in name_or_path:
        where = str(path)
        return from_dict(read_mapping(path, f"{what} file"), where, name=path.stem)
    raise UserInputError(
        what,
        name_or_path,
        f"{did_you_mean(name_or_path, names)}use one of: {', '.join(names)}; or the path of a "
        f"{what} file (.yaml/.yml/.json)",
        f"unknown {what} preset",
    )


def hardware_definition(kind: str, name_or_path: str) -> dict[str, Any]:
    """The inline definition (a mapping, as a study file holds it) that a ``kind`` ("chip" or
    "cluster") preset name or file stands for, its ``name`` filled in; the usual error for an
    unknown name or a bad file."""
    key = name_or_path.strip().lower()
    if kind == "chip":
        key = CHIP_ALIASES.get(key, key)
    if key in _preset_names(f"{kind}s"):
        data = read_mapping(_PRESETS_DIR / f"{kind}s" / f"{key}.yaml", f"{kind} {key}")
        data.setdefault("name", key)
        return data
    (load_chip if kind == "chip" else load_cluster)(name_or_path)  # checks name and file
    data = read_mapping(Path(name_or_path), f"{kind} file")
    data.setdefault("name", Path(name_or_path).stem)
    return data
