"""Study files (``ctxplan solve --config``) and point files (``ctxplan eval --config``).

A study holds everything the ``solve`` / ``sweep`` flags hold; a point everything the ``eval``
flags hold (docs/study-files.md). Loading goes:

1. read the file safely (:func:`ctxplan.config.loader.read_mapping`: no aliases, no tags that
   construct objects, size / binary / UTF-8 checks); paths to model / chip / cluster files are
   taken relative to the study file's directory;
2. overlay the flags given on the command line (they override the file);
3. apply the ``--set path=value`` overrides in order (:mod:`ctxplan.config.overrides`);
4. the version rule (:mod:`ctxplan.config.migration`);
5. validate with the schemas (:mod:`ctxplan.config.study_schema`, derived from the option
   declarations in :mod:`ctxplan.config.options`), then resolve model / chip / cluster (preset
   name, path, or inline definition) into the frozen dataclasses.

Every failure is a :class:`ctxplan.errors.UserInputError` (one line, field and fix).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ctxplan.config.hardware_presets import (
    chip_from_dict,
    chip_names,
    cluster_from_dict,
    cluster_names,
    load_chip,
    load_cluster,
)
from ctxplan.config.json_schema import json_schema
from ctxplan.config.loader import read_mapping, unknown_key_fix, validate
from ctxplan.config.migration import STUDY_VERSION, VERSIONS, check_version
from ctxplan.config.model_presets import is_model_preset, load_model, model_from_dict
from ctxplan.config.options import (
    CANDIDATE_SET_NAMES,
    STRATEGY_NAMES,
    SensitivityOptions,
    ServingOptions,
    SolveOptions,
    declared,
)
from ctxplan.config.overrides import apply_sets, assign, parse_set, scalar
from ctxplan.config.study_schema import KINDS, SCHEMAS, file_values
from ctxplan.config.values import DEFAULT_TIERS
from ctxplan.errors import UserInputError
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.model.spec import ModelSpec

__all__ = ["CANDIDATE_SET_NAMES", "KINDS", "STRATEGY_NAMES", "STUDY_VERSION", "Point", "Study",
           "json_schema", "load_point", "load_study", "parse_set"]


@dataclass(frozen=True)
class _Loaded:
    """A validated file, model / chip / cluster resolved; its other options by name, as the
    API takes them (also readable as attributes: ``study.batch``)."""

    source: str
    model: ModelSpec
    chip: Chip
    cluster: Cluster | None
    options: Mapping[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        options = self.__dict__.get("options", {})
        if name in options:
            return options[name]
        raise AttributeError(f"{type(self).__name__} has no field {name!r}")


@dataclass(frozen=True)
class Study(_Loaded):
    """A validated study: solve at each of ``contexts`` (for each of ``models``: a study may
    list several; ``model`` is the first)."""

    contexts: tuple[int, ...] = ()
    models: tuple[ModelSpec, ...] = ()

    def solve_options(self) -> dict[str, Any]:
        """Keyword arguments of :func:`ctxplan.api.solve_request` (besides model, chip, S)."""
        names = declared(SolveOptions)
        return {**{k: v for k, v in self.options.items() if k in names},
                "cluster": self.cluster}

    def sensitivity_options(self) -> dict[str, Any]:
        """The ``sensitivity`` section: what ``ctxplan sensitivity`` moves."""
        names = declared(SensitivityOptions)
        return {k: v for k, v in self.options.items() if k in names}

    def serving_options(self) -> dict[str, Any]:
        """The ``serving`` section: the traffic of ``ctxplan capacity`` (docs/serving.md)."""
        names = declared(ServingOptions)
        return {k: v for k, v in self.options.items() if k in names}


@dataclass(frozen=True)
class Point(_Loaded):
    """A validated point: one configuration to simulate."""

    context_length: int = 0
    phase: str = ""
    cp: int = 0

    def eval_options(self) -> dict[str, Any]:
        """Keyword arguments of :func:`ctxplan.api.evaluate` (besides the positional ones)."""
        return {**self.options, "cluster": self.cluster}


def load_study(path: str | Path | None = None, *, sets: Sequence[str] = (),
               flags: Mapping[str, Any] | None = None) -> Study:
    """A study from a file, command-line flags (``{"sla.tpot_max": "30ms", ...}``, overriding
    the file) and ``--set path=value`` overrides (applied last, in order)."""
    spec, where = _load("study", path, sets, flags)
    chip, cluster = _resolve_hardware(spec, where)
    listed = spec.model if isinstance(spec.model, list) else [spec.model]
    models: dict[str, ModelSpec] = {}
    for i, item in enumerate(listed):
        m = _resolve_model(item, f"{where}: model" + (f".{i}" if len(listed) > 1 else ""))
        models.setdefault(m.name, m)
    options = file_values("study", spec)
    contexts = options.pop("contexts")
    for name in ("model", "chip", "cluster"):
        del options[name]
    _resolve_pool_systems(options, where, "decode")
    first = next(iter(models.values()))
    return Study(source=where, model=first, chip=chip, cluster=cluster, options=options,
                 contexts=tuple(int(c) for c in contexts), models=tuple(models.values()))


def load_point(path: str | Path | None = None, *, sets: Sequence[str] = (),
               flags: Mapping[str, Any] | None = None) -> Point:
    """A point from a file, command-line flags (overriding the file) and ``--set`` overrides."""
    spec, where = _load("point", path, sets, flags)
    model, chip, cluster = _resolve(spec, where)
    options = file_values("point", spec)
    subject = {name: options.pop(name) for name in ("context", "phase", "cp")}
    for name in ("model", "chip", "cluster"):
        del options[name]
    _resolve_pool_systems(options, where, "handoff")
    return Point(source=where, model=model, chip=chip, cluster=cluster, options=options,
                 context_length=int(subject["context"]), phase=subject["phase"],
                 cp=subject["cp"])


def _load(kind: str, path: str | Path | None, sets: Sequence[str],
          flags: Mapping[str, Any] | None) -> tuple[Any, str]:
    schema = SCHEMAS[kind]
    if path is not None:
        where = str(path)
        data = read_mapping(path, "config")
        _rebase_paths(data, Path(path).parent)
    else:
        # No file: the flags are the whole configuration. They carry no version and may leave
        # the KV tier(s) to the model, as the flags always have.
        where = "command line"
        tier_key = "kv_tiers" if kind == "study" else "kv_tier"
        data = {"version": VERSIONS[kind], tier_key: DEFAULT_TIERS}
    for key, value in (flags or {}).items():
        if value is not None:
            assign(data, key, value, kind, origin="flag")
    apply_sets(data, tuple(sets), kind)
    if path is None:
        for name, info in schema.model_fields.items():
            if info.is_required() and name not in data:
                flag = "--" + name.replace("_", "-")
                flag = "--context" if name == "contexts" else flag
                raise UserInputError(flag, None, f"give {flag} (or a {kind} file with "
                                     "--config FILE)", "required option missing")
    check_version(kind, data, where)
    return validate_file(schema, data, where), where


def validate_file(schema: type[BaseModel], data: dict[str, Any], where: str) -> Any:
    """Pydantic validation; an unknown top-level key also gets a "did you mean" hint."""
    for key in data:
        if key not in schema.model_fields:
            raise UserInputError(
                f"{where}: {key}", data[key] if scalar(data[key]) else type(data[key]).__name__,
                unknown_key_fix(schema, (key,)), "unknown key")
    return validate(schema, data, where)


def _resolve_pool_systems(options: dict[str, Any], where: str, pool: str) -> None:
    """A pool's own chip / cluster (``handoff_chip`` in a point, ``decode_chip`` in a study,
    and their clusters): an inline one built here, a preset or path left for the API to
    resolve as it resolves a flag."""
    chip_key, cluster_key = f"{pool}_chip", f"{pool}_cluster"
    if isinstance(options.get(chip_key), dict):
        options[chip_key] = chip_from_dict(options[chip_key], f"{where}: {chip_key}",
                                           name="custom-chip")
    if isinstance(options.get(cluster_key), dict):
        options[cluster_key] = cluster_from_dict(options[cluster_key],
                                                 f"{where}: {cluster_key}",
                                                 name="custom-cluster")


def _resolve(spec: Any, where: str) -> tuple[ModelSpec, Chip, Cluster | None]:
    return (_resolve_model(spec.model, f"{where}: model"), *_resolve_hardware(spec, where))


def _resolve_model(value: Any, where: str) -> ModelSpec:
    return model_from_dict(value, where) if isinstance(value, dict) else load_model(value)


def _resolve_hardware(spec: Any, where: str) -> tuple[Chip, Cluster | None]:
    chip = (chip_from_dict(spec.chip, f"{where}: chip", name="custom-chip")
            if isinstance(spec.chip, dict) else load_chip(spec.chip))
    cluster: Cluster | None = None
    if isinstance(spec.cluster, dict):
        cluster = cluster_from_dict(spec.cluster, f"{where}: cluster", name="custom-cluster")
    elif isinstance(spec.cluster, str):
        cluster = load_cluster(spec.cluster)
    else:
        cluster = load_cluster(chip.default_cluster)
    return chip, cluster


def _is_preset(kind: str, value: str) -> bool:
    if kind == "model":
        return is_model_preset(value)
    return value.strip().lower() in (chip_names() if kind == "chip" else cluster_names())


def _rebase_paths(data: dict[str, Any], base: Path) -> None:
    """Paths in a file are relative to the file's directory (when that path exists)."""
    for key, kind in (("model", "model"), ("chip", "chip"), ("cluster", "cluster"),
                      ("handoff_chip", "chip"), ("handoff_cluster", "cluster"),
                      ("decode_chip", "chip"), ("decode_cluster", "cluster")):
        if data.get(key) is None:
            continue
        value = data[key]
        if kind == "model" and isinstance(value, list):
            data[key] = [_rebased(kind, v, base) for v in value]
        else:
            data[key] = _rebased(kind, value, base)


def _rebased(kind: str, value: Any, base: Path) -> Any:
    if not isinstance(value, str) or not value.strip() or _is_preset(kind, value):
        return value
    p = Path(value).expanduser()
    if not p.is_absolute() and (base / p).exists():
        return str(base / p)
    return value
