"""Study files (``ctxplan solve --config``) and point files (``ctxplan eval --config``).

A study holds everything the ``solve`` / ``sweep`` flags hold; a point everything the ``eval``
flags hold (docs/study-files.md). Loading goes:

1. read the file safely (:func:`ctxplan.config.loader.read_mapping`: no aliases, no tags that
   construct objects, size / binary / UTF-8 checks); paths to model / chip / cluster files are
   taken relative to the study file's directory;
2. overlay the flags given on the command line (they override the file);
3. apply the ``--set path=value`` overrides in order (values parsed as YAML, safely); a dotted
   path that goes into a preset or file-named model / chip / cluster first expands it into its
   inline definition, so ``--set chip.memory_gb=96`` works on ``chip: sg2262``;
4. the migration rule: ``version`` is required, and a file without the fields version 1 added
   (``cp`` and ``kv_tier`` in a point, ``kv_tiers`` in a study) is refused with a message saying
   what to add: there is no silent default for them;
5. validate with the pydantic schemas below (unknown keys, wrong types, NaN / infinities and
   out-of-range numbers each give one line naming the field), then resolve model / chip /
   cluster (preset name, path, or inline definition) into the frozen dataclasses.

Every failure is a :class:`ctxplan.errors.UserInputError` (one line, field and fix).
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ctxplan.config.hardware_presets import (
    chip_from_dict,
    chip_names,
    cluster_from_dict,
    cluster_names,
    load_chip,
    load_cluster,
)
from ctxplan.config.hardware_schema import ChipSchema, ClusterSchema
from ctxplan.config.loader import NoAliasSafeLoader, read_mapping, validate
from ctxplan.config.model_presets import (
    is_model_preset,
    load_model,
    model_definition,
    model_from_dict,
)
from ctxplan.config.model_schema import ModelFile
from ctxplan.config.units import parse_seconds, parse_tokens
from ctxplan.errors import UserInputError
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.model.spec import ModelSpec

STUDY_VERSION = 1
KINDS = ("study", "point")
MAX_CONTEXT = 2**31          # the mapping layer's bound on S (mapping/layout.py)
MAX_CONTEXTS = 256           # context lengths in one study
MAX_SETS = 256               # --set overrides on one command line
DEFAULT_TIERS = "default"    # kv_tiers: default / kv_tier: default: the model's own choice
_HW_PRESET_DIR = Path(__file__).parent / "presets"
_DOCS = "docs/study-files.md"

# Values are checked by the schemas; these names are shared with the solver (a test checks).
STRATEGY_NAMES = ("galloping", "linear", "scan")
CANDIDATE_SET_NAMES = ("all", "group", "pow2")

PosInt = Annotated[int, Field(ge=1)]
Definition = str | dict[str, Any]          # preset name, path, or inline mapping
Time = str | float                         # "20ms", "1.5s" or seconds
Tokens = int | str                         # 8192 or "8K"

_NESTED = ("model", "chip", "cluster", "sla")   # fields a dotted --set path may go into
_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


# ------------------------------------------------------------------------------------ checks
# Unions are checked by "before" validators so a wrong value gets one readable message (not one
# per union member).


def _definition(value: Any, what: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if isinstance(value, str):
        if not value.strip():
            raise ValueError(f"give a {what} preset name, a path, or an inline definition")
        return value
    if isinstance(value, dict):
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise ValueError(f"inline {what} keys must be field names; {bad[0]!r} is not")
        return value
    raise ValueError(f"give a {what} preset name, the path of a {what} file, or an inline "
                     f"{what} definition (a mapping of its fields)")


def _check_tokens(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("give a token count such as 8K, 128K, 1M or 3000")
    try:
        n = parse_tokens(value)
    except UserInputError as exc:
        raise ValueError(exc.fix) from None
    if n > MAX_CONTEXT:
        raise ValueError("give a context length of at most 2G tokens (2^31)")
    return n


def _check_time(value: Any, optional: bool) -> Any:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("give a time such as 20ms, 1.5s or 800us")
    try:
        parse_seconds(value, "time")
    except UserInputError as exc:
        raise ValueError(exc.fix) from None
    return float(value) if isinstance(value, int) else value


def _check_tier(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | str) or (
            isinstance(value, str) and not value.strip()):
        raise ValueError("give a KV tier name (e.g. mla-bf16, kv-fp8), a whole number of bytes "
                         "per token per layer, or 'default' for the model's own")
    return value


class SLAFile(BaseModel):
    """Latency SLAs. TPOT: 20ms means 50 tokens/s per sequence (the spec's default)."""

    model_config = _STRICT

    tpot_max: Time = Field("20ms", description="TPOT limit, e.g. 20ms (= 50 tokens/s).")
    ttft_max: Time | None = Field(None, description="TTFT limit, e.g. 30s; null: none (prefill "
                                  "takes its capacity minimum).")
    tps_reading: Literal["per-seq", "per-batch"] = Field(
        "per-seq", description="per-seq: TPOT <= tpot_max; per-batch: batch / TPOT >= "
        "1 / tpot_max.")

    @field_validator("tpot_max", mode="before")
    @classmethod
    def _tpot(cls, v: Any) -> Any:
        return _check_time(v, optional=False)

    @field_validator("ttft_max", mode="before")
    @classmethod
    def _ttft(cls, v: Any) -> Any:
        return _check_time(v, optional=True)


class _Common(BaseModel):
    model_config = _STRICT

    version: Literal[1] = Field(description="File format version: 1.")
    model: Definition = Field(description="Model preset name, path of a model YAML / Hugging "
                              "Face config.json, or an inline model definition.")
    chip: Definition = Field(description="Chip preset name, path of a chip YAML, or an inline "
                             "chip definition.")
    cluster: Definition | None = Field(None, description="Cluster preset name, path, or inline "
                                       "definition; null: the chip's default cluster.")
    batch: PosInt = Field(1, le=2**20, description="Sequences processed together.")
    event_limit: PosInt | None = Field(None, description="Stop a simulation after this many "
                                       "events (default: 200,000,000).")
    pass_q: Literal["broadcast", "ring"] = Field("broadcast", description="Decode: how each "
                                                 "query reaches the KV shards, 'broadcast' "
                                                 "from its home rank or forwarded around a "
                                                 "'ring' of ranks.")
    attention_weights: Literal["bf16", "fp16", "fp8", "int8", "fp32"] | None = Field(
        None, description="Dtype of the attention projections' weights and matmuls (default: "
        "the model's).")
    ffn_weights: Literal["bf16", "fp16", "fp8", "int8", "fp32"] | None = Field(
        None, description="Dtype of the FFN / expert weights and matmuls, e.g. fp8 (default: "
        "the model's).")

    @field_validator("model", "chip", mode="before")
    @classmethod
    def _def(cls, v: Any, info: Any) -> Any:
        return _definition(v, info.field_name)

    @field_validator("cluster", mode="before")
    @classmethod
    def _cluster(cls, v: Any) -> Any:
        return _definition(v, "cluster", optional=True)


class StudyFile(_Common):
    """A study: solve for the minimum chip count at one or more context lengths."""

    contexts: Tokens | list[Tokens] = Field(description="Context length(s): 1M, [128K, 1M] "
                                            "or \"8K,128K,1M\".")
    sla: SLAFile = Field(default_factory=SLAFile)  # type: ignore[arg-type]
    kv_tiers: list[str | int] | Literal["default"] = Field(
        description="KV tiers to compare (names or bytes per token per layer), or 'default' "
        "for the model's default tiers. Required since version 1.")
    strategy: Literal["galloping", "linear", "scan"] = "galloping"
    candidates: Literal["all", "group", "pow2"] = "all"
    group_size: PosInt | None = Field(None, description="Group size for candidates: group "
                                      "(default: the cluster's innermost group).")
    max_chips: PosInt | None = Field(None, description="Upper bound on chips per pool "
                                     "(default: the cluster's size).")
    prefill_tp: PosInt = 1
    decode_tp: PosInt = 1

    @field_validator("contexts", mode="before")
    @classmethod
    def _contexts(cls, v: Any) -> Any:
        items = [p for p in v.split(",") if p.strip()] if isinstance(v, str) else v
        if not isinstance(items, list):
            items = [items]
        if not items:
            raise ValueError("give at least one context length, e.g. [128K, 1M]")
        if len(items) > MAX_CONTEXTS:
            raise ValueError(f"give at most {MAX_CONTEXTS} context lengths")
        return [_check_tokens(x) for x in items]

    @field_validator("kv_tiers", mode="before")
    @classmethod
    def _tiers(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip().lower() == DEFAULT_TIERS:
            return DEFAULT_TIERS
        items = [p.strip() for p in v.split(",") if p.strip()] if isinstance(v, str) else v
        if not isinstance(items, list) or not items:
            raise ValueError("give a list of KV tiers, e.g. [mla-bf16, mla-fp8], or 'default'")
        return [_check_tier(x) for x in items]


class PointFile(_Common):
    """A point: one fully specified configuration to simulate."""

    context: Tokens = Field(description="Context length S: 1M, 128K or 3000.")
    phase: Literal["prefill", "decode"]
    cp: PosInt = Field(description="CP degree: Np (prefill ring ranks) or Nd (decode KV "
                       "shards). Required since version 1.")
    tp: PosInt = Field(1, description="Chips per CP rank (tensor parallel).")
    kv_tier: str | int = Field(description="KV tier name, bytes per token per layer, or "
                               "'default' for the model's first tier. Required since version 1.")
    mla_mode: Literal["standard", "absorbed"] | None = None
    full_simulation: bool = Field(False, description="Simulate every layer (no periodic-layer "
                                  "shortcut).")

    @field_validator("context", mode="before")
    @classmethod
    def _context(cls, v: Any) -> Any:
        return _check_tokens(v)

    @field_validator("kv_tier", mode="before")
    @classmethod
    def _tier(cls, v: Any) -> Any:
        return _check_tier(v)


_SCHEMAS: dict[str, type[_Common]] = {"study": StudyFile, "point": PointFile}

# The fields version 1 added: a file without them was written for the earlier format.
_NEW_FIELDS: dict[str, dict[str, str]] = {
    "study": {
        "kv_tiers": "'kv_tiers: [<tier>, ...]' (the KV tiers to compare, e.g. [mla-bf16, "
                    "mla-fp8]; 'kv_tiers: default' compares the model's default tiers)",
    },
    "point": {
        "cp": "'cp: <N>' (the CP degree: Np prefill ring ranks or Nd decode KV shards; "
              "'cp: 1' is what a file without CP meant)",
        "kv_tier": "'kv_tier: <tier>' (e.g. mla-bf16 or kv-bf16, bytes per token per layer, "
                   "or 'kv_tier: default' for the model's first tier)",
    },
}


# ---------------------------------------------------------------------------- resolved forms


@dataclass(frozen=True)
class Study:
    """A validated study, model / chip / cluster resolved."""

    source: str
    model: ModelSpec
    chip: Chip
    cluster: Cluster | None
    contexts: tuple[int, ...]
    tpot_max: str | float
    ttft_max: str | float | None
    tps_reading: str
    kv_tiers: tuple[str | int, ...]       # () -> the model's default tiers
    batch: int
    strategy: str
    candidates: str
    group_size: int | None
    max_chips: int | None
    prefill_tp: int
    decode_tp: int
    event_limit: int | None
    pass_q: str
    attention_weights: str | None
    ffn_weights: str | None

    def solve_options(self) -> dict[str, Any]:
        """Keyword arguments of :func:`ctxplan.api.solve_request` (besides model, chip, S)."""
        return dict(cluster=self.cluster, tpot_max=self.tpot_max, ttft_max=self.ttft_max,
                    tps_reading=self.tps_reading, kv_tiers=self.kv_tiers or None,
                    batch=self.batch, strategy=self.strategy, candidates=self.candidates,
                    group_size=self.group_size, max_chips=self.max_chips,
                    prefill_tp=self.prefill_tp, decode_tp=self.decode_tp,
                    event_limit=self.event_limit, pass_q=self.pass_q,
                    attention_weights=self.attention_weights, ffn_weights=self.ffn_weights)


@dataclass(frozen=True)
class Point:
    """A validated point, model / chip / cluster resolved."""

    source: str
    model: ModelSpec
    chip: Chip
    cluster: Cluster | None
    context_length: int
    phase: str
    cp: int
    tp: int
    kv_tier: str | int | None             # None -> the model's first tier
    batch: int
    mla_mode: str | None
    full_simulation: bool
    event_limit: int | None
    pass_q: str
    attention_weights: str | None
    ffn_weights: str | None

    def eval_options(self) -> dict[str, Any]:
        """Keyword arguments of :func:`ctxplan.api.evaluate` (besides the positional ones)."""
        return dict(cluster=self.cluster, tp=self.tp, batch=self.batch, kv_tier=self.kv_tier,
                    mla_mode=self.mla_mode, full_simulation=self.full_simulation,
                    event_limit=self.event_limit, pass_q=self.pass_q,
                    attention_weights=self.attention_weights, ffn_weights=self.ffn_weights)


# ----------------------------------------------------------------------------------- loading


def load_study(path: str | Path | None = None, *, sets: Sequence[str] = (),
               flags: Mapping[str, Any] | None = None) -> Study:
    """A study from a file, command-line flags (``{"sla.tpot_max": "30ms", ...}``, overriding
    the file) and ``--set path=value`` overrides (applied last, in order)."""
    spec, where = _load("study", path, sets, flags)
    assert isinstance(spec, StudyFile)
    model, chip, cluster = _resolve(spec, where)
    contexts = spec.contexts if isinstance(spec.contexts, list) else [spec.contexts]
    tiers = () if spec.kv_tiers == DEFAULT_TIERS else tuple(spec.kv_tiers)
    return Study(
        source=where, model=model, chip=chip, cluster=cluster,
        contexts=tuple(int(c) for c in contexts), tpot_max=spec.sla.tpot_max,
        ttft_max=spec.sla.ttft_max, tps_reading=spec.sla.tps_reading, kv_tiers=tiers,
        batch=spec.batch, strategy=spec.strategy, candidates=spec.candidates,
        group_size=spec.group_size, max_chips=spec.max_chips, prefill_tp=spec.prefill_tp,
        decode_tp=spec.decode_tp, event_limit=spec.event_limit, pass_q=spec.pass_q,
        attention_weights=spec.attention_weights, ffn_weights=spec.ffn_weights,
    )


def load_point(path: str | Path | None = None, *, sets: Sequence[str] = (),
               flags: Mapping[str, Any] | None = None) -> Point:
    """A point from a file, command-line flags (overriding the file) and ``--set`` overrides."""
    spec, where = _load("point", path, sets, flags)
    assert isinstance(spec, PointFile)
    model, chip, cluster = _resolve(spec, where)
    tier: str | int | None = spec.kv_tier
    if isinstance(tier, str) and tier.strip().lower() == DEFAULT_TIERS:
        tier = None
    return Point(
        source=where, model=model, chip=chip, cluster=cluster,
        context_length=int(spec.context), phase=spec.phase, cp=spec.cp, tp=spec.tp,
        kv_tier=tier, batch=spec.batch, mla_mode=spec.mla_mode,
        full_simulation=spec.full_simulation, event_limit=spec.event_limit,
        pass_q=spec.pass_q, attention_weights=spec.attention_weights,
        ffn_weights=spec.ffn_weights,
    )


def _load(kind: str, path: str | Path | None, sets: Sequence[str],
          flags: Mapping[str, Any] | None) -> tuple[_Common, str]:
    schema = _SCHEMAS[kind]
    if path is not None:
        where = str(path)
        data = read_mapping(path, "config")
        _rebase_paths(data, Path(path).parent)
    else:
        # No file: the flags are the whole configuration. They carry no version and may leave
        # the KV tier(s) to the model, as the flags always have.
        where = "command line"
        tier_key = "kv_tiers" if kind == "study" else "kv_tier"
        data = {"version": STUDY_VERSION, tier_key: DEFAULT_TIERS}
    for key, value in (flags or {}).items():
        if value is not None:
            assign(data, key, value, kind, origin="flag")
    if len(sets) > MAX_SETS:
        raise UserInputError("--set", f"{len(sets)} overrides", f"give at most {MAX_SETS}",
                             "too many overrides")
    for text in sets:
        apply_set(data, text, kind)
    if path is None:
        for field, info in schema.model_fields.items():
            if info.is_required() and field not in data:
                flag = "--" + field.replace("_", "-")
                flag = "--context/--contexts" if field == "contexts" else flag
                raise UserInputError(flag, None, f"give {flag} (or a {kind} file with "
                                     "--config FILE)", "required option missing")
    _check_version(kind, data, where)
    return validate_file(schema, data, where), where


def _check_version(kind: str, data: dict[str, Any], where: str) -> None:
    """The migration rule: no silent default for the fields version 1 added."""
    missing = [f for f in _NEW_FIELDS[kind] if f not in data]
    version = data.get("version")
    if "version" not in data:
        fix = f"add 'version: {STUDY_VERSION}'"
        if missing:
            fix += " and the fields version 1 added: " + "; ".join(
                _NEW_FIELDS[kind][f] for f in missing)
        raise UserInputError(f"{where}: version", None, f"{fix} (see {_DOCS}, 'Migrating')",
                             "required field missing (a file from before version 1?)")
    if isinstance(version, bool) or not isinstance(version, int) or version != STUDY_VERSION:
        newer = isinstance(version, int) and not isinstance(version, bool) \
            and version > STUDY_VERSION
        fix = (f"this ctxplan reads version {STUDY_VERSION}; upgrade ctxplan or write the file "
               f"for version {STUDY_VERSION}" if newer else f"write 'version: {STUDY_VERSION}'")
        raise UserInputError(f"{where}: version", version, fix, "unsupported version")
    if missing:
        field = missing[0]
        raise UserInputError(
            f"{where}: {field}", None,
            f"add {_NEW_FIELDS[kind][field]}; there is no default for it (see {_DOCS}, "
            "'Migrating')", "required since version 1 (CP and KV tiers)")


def validate_file(schema: type[_Common], data: dict[str, Any], where: str) -> _Common:
    """Pydantic validation; an unknown top-level key also gets a "did you mean" hint."""
    for key in data:
        if key not in schema.model_fields:
            close = difflib.get_close_matches(str(key), list(schema.model_fields), n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise UserInputError(
                f"{where}: {key}", data[key] if _scalar(data[key]) else type(data[key]).__name__,
                f"{hint}remove it or use one of: {', '.join(schema.model_fields)} (see "
                "`ctxplan schema`)", "unknown key")
    return validate(schema, data, where)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


# ------------------------------------------------------------------------------- resolution


def _resolve(spec: _Common, where: str) -> tuple[ModelSpec, Chip, Cluster | None]:
    model = (model_from_dict(spec.model, f"{where}: model") if isinstance(spec.model, dict)
             else load_model(spec.model))
    chip = (chip_from_dict(spec.chip, f"{where}: chip", name="custom-chip")
            if isinstance(spec.chip, dict) else load_chip(spec.chip))
    cluster: Cluster | None = None
    if isinstance(spec.cluster, dict):
        cluster = cluster_from_dict(spec.cluster, f"{where}: cluster", name="custom-cluster")
    elif isinstance(spec.cluster, str):
        cluster = load_cluster(spec.cluster)
    else:
        cluster = load_cluster(chip.default_cluster)
    return model, chip, cluster


def _is_preset(kind: str, value: str) -> bool:
    key = value.strip().lower()
    if kind == "model":
        return is_model_preset(value)
    return key in (chip_names() if kind == "chip" else cluster_names())


def _rebase_paths(data: dict[str, Any], base: Path) -> None:
    """Paths in a file are relative to the file's directory (when that path exists)."""
    for kind in ("model", "chip", "cluster"):
        value = data.get(kind)
        if not isinstance(value, str) or not value.strip() or _is_preset(kind, value):
            continue
        p = Path(value).expanduser()
        if not p.is_absolute() and (base / p).exists():
            data[kind] = str(base / p)


def _definition_mapping(kind: str, value: str) -> dict[str, Any]:
    """The inline definition that a preset name or a file path stands for."""
    key = value.strip().lower()
    if kind == "model":
        return model_definition(value)
    names = chip_names() if kind == "chip" else cluster_names()
    if key in names:
        d = read_mapping(_HW_PRESET_DIR / f"{kind}s" / f"{key}.yaml", f"{kind} {key}")
        d.setdefault("name", key)
        return d
    loader = load_chip if kind == "chip" else load_cluster
    loader(value)  # an unknown name or a bad file fails here with the usual message
    d = read_mapping(Path(value), f"{kind} file")
    d.setdefault("name", Path(value).stem)
    return d


# ---------------------------------------------------------------------------------- overrides


def parse_set(text: str) -> tuple[list[str], Any]:
    """``"chip.memory_gb=96"`` -> (["chip", "memory_gb"], 96). The value is read as YAML
    (safely: no aliases, no object tags), so 96 is a number, 30ms a text, [8K, 1M] a list."""
    if not isinstance(text, str) or "=" not in text:
        raise UserInputError("--set", text, "write --set path=value, e.g. --set "
                             "sla.tpot_max=30ms or --set chip.memory_gb=96", "no '='")
    path_text, raw = text.split("=", 1)
    parts = [p.strip() for p in path_text.strip().split(".")]
    if not path_text.strip() or any(not p for p in parts):
        raise UserInputError("--set", text, "name a field before '=', with dots between "
                             "levels, e.g. --set chip.memory_gb=96", "empty path")
    if len(raw) > 100_000:
        raise UserInputError("--set", text[:40], "give a value under 100,000 characters",
                             "value too long")
    try:
        value = yaml.load(raw, Loader=NoAliasSafeLoader) if raw.strip() else None
    except (yaml.YAMLError, RecursionError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserInputError(f"--set {path_text.strip()}", raw, "give a YAML value: a number, "
                             "a text, true / false, null or [a, b]",
                             f"cannot parse: {first}") from None
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        # YAML 1.1 reads 1e3 (no dot) as text; on a command line it means a number.
        number = float(value)
        value = int(number) if number.is_integer() and "." not in value and "e" not in \
            value.lower() else number
    return parts, value


def apply_set(data: dict[str, Any], text: str, kind: str) -> None:
    parts, value = parse_set(text)
    assign(data, ".".join(parts), value, kind, origin="--set")


def assign(data: dict[str, Any], path: str, value: Any, kind: str, origin: str = "--set") -> None:
    """Set ``data[path] = value`` for a dotted path, creating mappings on the way; list items
    are addressed by index (``cluster.levels.0.bandwidth_gbps``)."""
    parts = path.split(".")
    schema = _SCHEMAS[kind]
    head = parts[0]
    if head not in schema.model_fields:
        close = difflib.get_close_matches(head, list(schema.model_fields), n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise UserInputError(f"{origin} {path}", value if _scalar(value) else "...",
                             f"{hint}use one of the {kind} fields: "
                             f"{', '.join(schema.model_fields)}", f"unknown field '{head}'")
    if len(parts) > 1 and head not in _NESTED:
        raise UserInputError(f"{origin} {path}", value if _scalar(value) else "...",
                             f"'{head}' holds a single value, not fields; set it directly "
                             f"(--set {head}=...)", "path goes through a value")
    if len(parts) > 1 and head in ("model", "chip", "cluster"):
        current = data.get(head)
        if current is None and head == "cluster":
            chip = data.get("chip")
            chip_obj = (chip_from_dict(chip, "chip", name="custom-chip")
                        if isinstance(chip, dict) else
                        load_chip(chip) if isinstance(chip, str) else None)
            if chip_obj is None:
                raise UserInputError(f"{origin} {path}", None, "give the chip (or the "
                                     "cluster) first", "no cluster to change")
            current = chip_obj.default_cluster
        if isinstance(current, str):
            expanded = _definition_mapping(head, current)
            if "name" in expanded and not any(p == "name" for p in parts[1:2]):
                expanded["name"] = f"{expanded['name']}-custom"
            data[head] = expanded
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        here = ".".join(parts[: i + 1])
        if isinstance(node, dict):
            if node.get(part) is None:
                node[part] = {}
            node = node[part]
        elif isinstance(node, list):
            node = node[_index(node, part, here, path, origin)]
        else:
            raise UserInputError(f"{origin} {path}", _shown(node), f"'{here}' holds a single "
                                 "value, not fields; set it directly (--set "
                                 f"{'.'.join(parts[:i])}=...)", "path goes through a value")
        if not isinstance(node, dict | list):
            raise UserInputError(f"{origin} {path}", _shown(node), f"'{here}' holds a single "
                                 f"value, not fields; set it directly (--set {here}=...)",
                                 "path goes through a value")
    last = parts[-1]
    if isinstance(node, list):
        node[_index(node, last, path, path, origin)] = copy.deepcopy(value)
    else:
        node[last] = copy.deepcopy(value)


def _index(node: list[Any], part: str, here: str, path: str, origin: str) -> int:
    if not part.isdigit() or int(part) >= len(node):
        raise UserInputError(f"{origin} {path}", part, f"'{here}' is a list of {len(node)}: "
                             f"use an index 0..{len(node) - 1}", "no such list item")
    return int(part)


def _shown(value: Any) -> Any:
    return value if _scalar(value) else type(value).__name__


# ------------------------------------------------------------------------------- JSON Schema


def json_schema(kind: str = "study") -> dict[str, Any]:
    """The JSON Schema of a study or point file (pydantic's, with the inline chip / cluster /
    model definitions spelled out for editor completion)."""
    if kind not in KINDS:
        raise UserInputError("kind", kind, f"use one of {', '.join(KINDS)}")
    schema = _SCHEMAS[kind].model_json_schema()
    defs = schema.setdefault("$defs", {})
    for field, sub in (("model", ModelFile), ("chip", ChipSchema), ("cluster", ClusterSchema)):
        sub_schema = sub.model_json_schema()
        defs.update(sub_schema.pop("$defs", {}))
        defs[sub.__name__] = sub_schema
        prop = schema["properties"][field]
        options: list[dict[str, Any]] = [
            {"type": "string", "description": "preset name or path"},
            {"$ref": f"#/$defs/{sub.__name__}"},
        ]
        if field == "model":
            options.append({"type": "object", "description": "a pasted Hugging Face "
                            "config.json (recognised by model_type / architectures)"})
        if field == "cluster":
            options.append({"type": "null"})
        schema["properties"][field] = {k: v for k, v in prop.items()
                                       if k not in ("anyOf", "type")} | {"anyOf": options}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"ctxplan {kind} file, version {STUDY_VERSION}"
    return schema

