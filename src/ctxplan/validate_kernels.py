"""Kernel-level validation rows (issue 26): published kernel and collective microbenchmarks,
run through the same code the simulator times its ops with.

The tables live in ``validation/kernels/*.yaml`` (their README says what each field means), one
file per published table with its source and how far it can be trusted (``trust``, the weight
the fit gives its rows). A row is one measured kernel (a GEMM, a grouped GEMM, an attention
kernel), one MoE layer's experts on one GPU, or one collective; ctxplan builds it from the
functions its emitters use (``mapping.ops``, ``mapping.ffn``, ``mapping.collectives``) and
times it with the chip's kernel model (``Chip.compute_ns`` and ``Chip.launched_ns``) or, for a
collective, by simulating the operation on the cluster's topology. Nothing here is fitted:
``validation/fit.py kernels`` fits the efficiency model's figures to the calibration rows;
the prediction rows are on chips the fit never saw. ``ctxplan validate`` prints both apart,
each with its median.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ctxplan.config.hardware_presets import (
    chip_from_dict,
    cluster_from_dict,
    load_chip,
    load_cluster,
)
from ctxplan.config.loader import read_mapping
from ctxplan.config.model_yaml import model_from_dict
from ctxplan.errors import UserInputError
from ctxplan.hardware.chip import DEVICE, EAGER, GRAPH, Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.mapping import collectives as coll
from ctxplan.mapping import ops
from ctxplan.mapping.builder import NONE, GraphBuilder, Work, op_device_ns
from ctxplan.mapping.ffn import dispatch_bytes_per_slot, expert_parts
from ctxplan.mapping.layout import Layout, route_matrix
from ctxplan.model.dtypes import bytes_per_param
from ctxplan.model.precision import Precision
from ctxplan.model.spec import ModelSpec

ROLES = ("calibration", "prediction")
KERNELS = ("gemm", "mla_decode", "gqa_decode", "attention_prefill", "moe_layer", "all_reduce",
           "all_gather", "reduce_scatter", "all_to_all", "moe_dispatch", "moe_combine")
COLLECTIVES = KERNELS[5:]
TIMINGS = (DEVICE, GRAPH, EAGER)
# The target on the median |error| of each role's kernel rows (issue 26).
MEDIAN_TARGET = 0.10
# Kernel classes, for the medians per class.
CLASSES = {"gemm": "gemm", "mla_decode": "attention", "gqa_decode": "attention",
           "attention_prefill": "attention", "moe_layer": "moe"}


@dataclass(frozen=True)
class KernelRow:
    """One measured kernel, MoE layer or collective."""

    name: str          # "<table>#<index>"
    table: str         # the file's stem
    source: str
    trust: float       # the fit's weight
    role: str          # calibration | prediction
    kernel: str        # one of KERNELS
    timing: str        # device | graph | eager (collectives: device)
    chip: Chip
    cluster: Cluster | None
    params: tuple[tuple[str, Any], ...]   # the row's figures and the table's shared ones
    measured_s: float

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.params).get(key, default)

    @property
    def kernel_class(self) -> str:
        return CLASSES.get(self.kernel, "collective")

    @property
    def what(self) -> str:
        """A short description of the row."""
        p = dict(self.params)
        k = self.kernel
        if k == "gemm":
            g = p.get("groups", 1)
            return (f"{'' if g == 1 else f'{g} x '}{p['m']}x{p['n']}x{p['k']} "
                    f"{p.get('dtype', '')}")
        if k in ("mla_decode", "gqa_decode"):
            return f"b{p['batch']} sq{p.get('s_q', 1)} kv{p['kv']} h{p['heads']}"
        if k == "attention_prefill":
            return (f"b{p['batch']} s{p['seqlen']} d{p['head_dim']} "
                    f"{'causal' if p['causal'] else 'full'} {p['dtype']}")
        if k == "moe_layer":
            return f"{p['model']} b{p['batch']}"
        if k in ("moe_dispatch", "moe_combine"):
            return f"ep{p['ranks']} t{p.get('tokens')}"
        return f"{p['ranks']} ranks {p['bytes']} B"


@dataclass(frozen=True)
class KernelResult:
    row: KernelRow
    simulated_s: float

    @property
    def error(self) -> float:
        return self.simulated_s / self.row.measured_s - 1.0

    def to_dict(self) -> dict[str, Any]:
        r = self.row
        return {"name": r.name, "table": r.table, "role": r.role, "kernel": r.kernel,
                "class": r.kernel_class, "what": r.what, "chip": r.chip.name,
                "cluster": r.cluster.name if r.cluster else None, "timing": r.timing,
                "trust": r.trust, "measured": r.measured_s, "simulated": self.simulated_s,
                "error": self.error, "source": r.source}


def summary(results: Sequence[KernelResult]) -> dict[str, Any]:
    """Per role: rows, median and worst |error|, whether the median meets its target, and the
    medians per kernel class."""
    out: dict[str, Any] = {}
    for role in ROLES:
        rs = [r for r in results if r.row.role == role]
        errs = [abs(r.error) for r in rs]
        med = statistics.median(errs) if errs else None
        classes = {}
        for c in dict.fromkeys(r.row.kernel_class for r in rs):
            ce = [abs(r.error) for r in rs if r.row.kernel_class == c]
            classes[c] = {"rows": len(ce), "median_abs_error": statistics.median(ce)}
        out[role] = {"rows": len(rs), "median_abs_error": med,
                     "worst_abs_error": max(errs) if errs else None,
                     "median_target": MEDIAN_TARGET,
                     "within_target": med is not None and med <= MEDIAN_TARGET,
                     "by_class": classes}
    return out


# ------------------------------------------------------------------------------------ loading


def default_kernels_dir() -> Path:
    """``validation/kernels/`` of the source tree (editable install), else of the working
    directory."""
    for base in (Path(__file__).resolve().parents[2], Path.cwd()):
        d = base / "validation" / "kernels"
        if d.is_dir() and any(d.glob("*.yaml")):
            return d
    raise UserInputError("kernels", "validation/kernels/",
                         "run from the ctxplan source tree or pass the directory",
                         "no validation/kernels/*.yaml found")


_SHARED = ("dtype", "tile_rows", "models", "moe", "level")
_MEASURES = {"us": 1e-6, "ms": 1e-3}


def load_kernel_rows(directory: str | Path | None = None) -> list[KernelRow]:
    """Every row of every table, in file order."""
    d = Path(directory) if directory is not None else default_kernels_dir()
    rows: list[KernelRow] = []
    for path in sorted(d.glob("*.yaml")):
        rows += _table_rows(path)
    return rows


def _table_rows(path: Path) -> list[KernelRow]:
    where = str(path)
    data = read_mapping(path, "kernel table")
    role = data.get("role")
    if role not in ROLES:
        raise UserInputError(f"{where}: role", role, f"use one of {ROLES}")
    trust = float(data.get("trust", 0))
    if not 0 < trust <= 1:
        raise UserInputError(f"{where}: trust", trust, "give a weight in (0, 1]")
    cluster = _cluster(data.get("cluster"), where)
    chip_given = data.get("chip") or (cluster.chip if cluster else None)
    if chip_given is None:
        raise UserInputError(f"{where}: chip", None, "name a chip preset or give its figures")
    chip = (chip_from_dict(chip_given, f"{where}: chip") if isinstance(chip_given, dict)
            else load_chip(chip_given))
    shared = {k: data[k] for k in _SHARED if k in data}
    out = []
    for i, raw in enumerate(data.get("rows") or []):
        kernel = raw.get("kernel", data.get("kernel"))
        if kernel not in KERNELS:
            raise UserInputError(f"{where}: rows.{i}.kernel", kernel, f"use one of {KERNELS}")
        timing = data.get("timing", DEVICE)
        if timing not in TIMINGS:
            raise UserInputError(f"{where}: timing", timing, f"use one of {TIMINGS}")
        params = {**shared, **{k: v for k, v in raw.items() if k != "kernel"}}
        measured = _measured_s(kernel, params, f"{where}: rows.{i}")
        params = {k: v for k, v in params.items() if k not in (*_MEASURES, "tflops")}
        out.append(KernelRow(
            name=f"{path.stem}#{i + 1}", table=path.stem, source=" ".join(
                str(data.get("source", "")).split()), trust=trust, role=role, kernel=kernel,
            timing=timing, chip=chip, cluster=cluster,
            params=tuple(sorted((k, _freeze(v)) for k, v in params.items())),
            measured_s=measured))
    return out


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


def _cluster(given: Any, where: str) -> Cluster | None:
    if given is None:
        return None
    if isinstance(given, dict):
        return cluster_from_dict(given, f"{where}: cluster")
    return load_cluster(given)


def _measured_s(kernel: str, p: dict[str, Any], where: str) -> float:
    for key, scale in _MEASURES.items():
        if key in p:
            return float(p[key]) * scale
    if "tflops" in p and kernel == "gemm":
        return _gemm_flops(p) / (float(p["tflops"]) * 1e12)
    if "tflops" in p and kernel == "attention_prefill":
        return _prefill_flops(p) / (float(p["tflops"]) * 1e12)
    raise UserInputError(where, None, "give the measured time (us or ms) or TFLOP/s")


def _gemm_flops(p: dict[str, Any]) -> float:
    return 2.0 * p.get("groups", 1) * p["m"] * p["n"] * p["k"]


def _prefill_pairs(p: dict[str, Any]) -> float:
    s = p["seqlen"]
    return s * (s + 1) / 2 if p["causal"] else float(s * s)


def _prefill_flops(p: dict[str, Any]) -> float:
    # QK^T and PV: 2 x 2 x head_dim FLOPs per (query, key) pair and head.
    return 4.0 * p["batch"] * p["heads"] * p["head_dim"] * _prefill_pairs(p)


# ------------------------------------------------------------------------------------ running


def run_kernel_rows(rows: Sequence[KernelRow], chip: Chip | None = None,
                    chips: dict[str, Chip] | None = None) -> list[KernelResult]:
    """Every row's simulated time, with its table's chip (or ``chip``, or ``chips[name]``
    replacing the chip of that name: for fitting)."""
    out = []
    for r in rows:
        c = chip or (chips or {}).get(r.chip.name) or r.chip
        out.append(KernelResult(r, simulate_row(r, c)))
    return out


def simulate_row(row: KernelRow, chip: Chip | None = None) -> float:
    """The simulated time of one row, in seconds."""
    chip = chip or row.chip
    p = dict(row.params)
    if row.kernel in COLLECTIVES:
        assert row.cluster is not None
        return _collective_s(row.kernel, p, chip, row.cluster)
    tile = p.get("tile_rows")
    if tile is not None:
        # The measured kernel's tile (DeepGEMM's 64-row blocks), a fact of that kernel.
        chip = replace(chip, efficiency_model=chip.efficiency_model.with_class(
            "matmul", tile_rows=float(tile)))
    parts = _parts(row.kernel, p)
    device = int(op_device_ns(chip, parts)[0])
    return int(chip.launched_ns(device, len(parts), row.timing)) * 1e-9


def _parts(kernel: str, p: dict[str, Any]) -> list[Work]:
    if kernel == "gemm":
        dtype = p["dtype"]
        return [ops.grouped_gemm_work(p.get("groups", 1), p["m"], p["k"], p["n"],
                                      bytes_per_param(dtype), 2, dtype)]
    if kernel == "mla_decode":
        # FlashMLA: one latent KV head of 576 (512 + 64 rope) dims, values 512, BF16.
        b, sq, kv, h = p["batch"], p.get("s_q", 1), p["kv"], p["heads"]
        return [Work("attention", 2.0 * b * sq * kv * h * (576 + 512),
                     b * kv * 576 * 2.0 + b * sq * h * (576 + 512) * 2.0, "bf16",
                     m_rows=b * sq, kv_tokens=kv, q_rows=h * sq, causal=False,
                     head_dim=(576 + 512) / 2)]
    if kernel == "gqa_decode":
        b, kv, h, g, d = p["batch"], p["kv"], p["heads"], p["kv_heads"], p["head_dim"]
        return [Work("attention", 4.0 * b * kv * h * d,
                     b * kv * g * 2 * d * 2.0 + b * h * 2 * d * 2.0, "bf16",
                     m_rows=b, kv_tokens=kv, q_rows=h // g, causal=False, head_dim=d)]
    if kernel == "attention_prefill":
        b, s, h, d = p["batch"], p["seqlen"], p["heads"], p["head_dim"]
        width = 1.0 if p["dtype"] == "fp8" else 2.0
        return [Work("attention", _prefill_flops(p), b * s * h * d * (3 * width + 2.0),
                     p["dtype"], m_rows=b * s, kv_tokens=s, causal=bool(p["causal"]),
                     head_dim=d)]
    if kernel == "moe_layer":
        return _moe_parts(p)
    raise AssertionError(kernel)


def _moe_parts(p: dict[str, Any]) -> list[Work]:
    """The top-k and one GPU's experts (permute, the grouped GEMMs, SwiGLU, quantisation, the
    sum back), as the fused-MoE benchmarks time them (the gating output is given)."""
    shape = dict(dict(p["models"])[p["model"]])
    m, lay = _moe_model(tuple(sorted(shape.items())), p["batch"])
    ep = shape.get("ep", 1)
    assert m.moe is not None
    tokens = np.array([p["batch"]], np.int64)
    slots = tokens * m.moe.num_experts_per_tok // ep
    return [ops.topk_work(m.moe.n_routed_experts, tokens),
            *expert_parts(m, lay, slots, m.moe.n_routed_experts // ep, tokens=tokens)]


@cache
def _moe_model(shape: tuple[tuple[str, Any], ...], batch: int) -> tuple[ModelSpec, Layout]:
    s = dict(shape)
    d = {"name": "kernel-row", "source": "validation/kernels", "weight_dtype": s["dtype"],
         "num_hidden_layers": 1, "hidden_size": s["hidden"], "num_attention_heads": 32,
         "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": s["moe_intermediate"],
         "vocab_size": 32000, "tie_word_embeddings": False, "n_routed_experts": s["experts"],
         "n_shared_experts": 0, "num_experts_per_tok": s["top_k"],
         "moe_intermediate_size": s["moe_intermediate"], "first_k_dense_replace": 0}
    m = model_from_dict(d, "validation/kernels: moe model")
    lay = Layout(phase="decode", cp=1, tp=1, batch=batch, context_length=1, c_kv_bytes=1,
                 mla_mode="", precision=Precision(s["dtype"], s["dtype"], "bf16"))
    return m, lay


def _collective_s(kernel: str, p: dict[str, Any], chip: Chip, cluster: Cluster) -> float:
    """One collective operation on ``ranks`` chips of the cluster, simulated."""
    n = int(p["ranks"])
    b = GraphBuilder(chip, cluster, n)
    chips = np.arange(n)
    ready = np.full((n, 0), NONE, np.int64)
    if kernel in ("all_reduce", "all_gather", "reduce_scatter"):
        emit = {"all_reduce": coll.all_reduce, "all_gather": coll.all_gather,
                "reduce_scatter": coll.reduce_scatter}[kernel]
        emit(b, chips[None, :], ready, int(p["bytes"]), 0)
    elif kernel == "all_to_all":
        sends = np.full((n, n), int(p["bytes"]) // n, np.int64)
        np.fill_diagonal(sends, 0)
        coll.all_to_all(b, chips, ready, sends, 0, "all_to_all")
    else:
        moe = dict(p["moe"])
        tokens = int(p.get("tokens", moe.get("tokens", 1)) or 1)
        counts = route_matrix(np.full(n, tokens * int(moe["top_k"]), np.int64), n)
        if kernel == "moe_dispatch":
            per_slot = _dispatch_bytes(int(moe["hidden"]), str(moe.get("dispatch_dtype", "bf16")))
            coll.all_to_all(b, chips, ready, counts * per_slot, 0, ops.MOE_DISPATCH)
        else:
            coll.all_to_all(b, chips, ready, counts.T * int(moe["hidden"]) * 2, 0,
                            ops.MOE_COMBINE)
    return b.run().makespan_ns * 1e-9


def _dispatch_bytes(hidden: int, dtype: str) -> int:
    m, lay = _moe_model((("dtype", dtype), ("experts", 8), ("hidden", hidden),
                         ("moe_intermediate", 128), ("top_k", 1)), 1)
    return dispatch_bytes_per_slot(m, lay)


__all__ = ["COLLECTIVES", "KERNELS", "MEDIAN_TARGET", "ROLES", "KernelResult", "KernelRow",
           "default_kernels_dir", "load_kernel_rows", "run_kernel_rows", "simulate_row",
           "summary"]
