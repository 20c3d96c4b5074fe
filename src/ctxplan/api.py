"""The Python API: what the CLI calls, one function per command, returning typed results.

Every argument that names a preset also takes a path (YAML / JSON / HF config.json) or an
already-built object, so scripts can mix presets and their own definitions.
"""

from __future__ import annotations

from pathlib import Path

from ctxplan.config.hardware_presets import load_chip, load_cluster
from ctxplan.config.model_presets import load_model
from ctxplan.config.units import parse_tokens
from ctxplan.errors import UserInputError
from ctxplan.evaluate import EvalConfig, EvalResult, Trace
from ctxplan.evaluate import evaluate as _evaluate
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.mapping.layout import Precision
from ctxplan.model.spec import ModelSpec

ModelLike = str | ModelSpec
ChipLike = str | Chip
ClusterLike = str | Cluster | None


def resolve_model(model: ModelLike) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else load_model(model)


def resolve_chip(chip: ChipLike) -> Chip:
    return chip if isinstance(chip, Chip) else load_chip(chip)


def resolve_cluster(cluster: ClusterLike, chip: Chip) -> Cluster:
    """The cluster given, or the chip's default cluster."""
    if isinstance(cluster, Cluster):
        return cluster
    return load_cluster(cluster if cluster else chip.default_cluster)


def eval_config(
    model: ModelLike,
    chip: ChipLike,
    context_length: int | str,
    phase: str,
    cp: int,
    *,
    cluster: ClusterLike = None,
    tp: int = 1,
    batch: int = 1,
    kv_tier: str | int | None = None,
    mla_mode: str | None = None,
    precision: Precision | None = None,
) -> EvalConfig:
    """Build and validate an evaluation configuration (no simulation)."""
    m = resolve_model(model)
    c = resolve_chip(chip)
    k = resolve_cluster(cluster, c)
    phase = str(phase).lower()
    cfg = EvalConfig(model=m, chip=c, cluster=k, phase=phase,
                     context_length=parse_tokens(context_length), cp=cp, tp=tp, batch=batch,
                     kv_tier=kv_tier, mla_mode=mla_mode, precision=precision)
    cfg.layout()  # validates every field now, with a clear message
    return cfg


def evaluate(
    model: ModelLike,
    chip: ChipLike,
    context_length: int | str,
    phase: str,
    cp: int,
    *,
    cluster: ClusterLike = None,
    tp: int = 1,
    batch: int = 1,
    kv_tier: str | int | None = None,
    mla_mode: str | None = None,
    precision: Precision | None = None,
    trace_path: str | Path | None = None,
) -> EvalResult:
    """Simulate one configuration: TTFT (prefill) or TPOT (decode), memory and CP bytes.

    ``trace_path`` writes a Chrome / Perfetto trace of the simulation there.
    """
    cfg = eval_config(model, chip, context_length, phase, cp, cluster=cluster, tp=tp,
                      batch=batch, kv_tier=kv_tier, mla_mode=mla_mode, precision=precision)
    result, trace = _evaluate(cfg, trace=trace_path is not None)
    if trace_path is not None:
        write_trace(trace, trace_path, result)
    return result


def write_trace(trace: Trace | None, path: str | Path, result: EvalResult) -> None:
    if trace is None:
        raise UserInputError("trace", str(path), "the configuration does not fit in memory, so "
                             "there is nothing to trace; pick one that fits",
                             "no simulation ran")
    from ctxplan.report.trace import write_chrome_trace

    write_chrome_trace(trace, path)
