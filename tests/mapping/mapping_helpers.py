"""Shared helpers for the mapping tests: configurations, independent closed forms, clusters.

The closed forms here are written from the model's numbers and the rules of docs/mapping.md,
not by calling the mapping layer's own formula functions, so a test comparing the two can fail.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ctxplan.config.checks import check_point
from ctxplan.config.hardware_presets import load_chip, load_cluster
from ctxplan.config.model_presets import load_model
from ctxplan.evaluate import EvalConfig, build_graph
from ctxplan.hardware.cluster import Cluster
from ctxplan.mapping.builder import GraphBuilder, Work
from ctxplan.model.spec import ModelSpec
from ctxplan.policy import Policy

# The three attention / FFN families the issue names, each on a chip that runs it.
MODEL_CHIP = {
    "deepseek-v3": "sg2262",        # MLA + MoE (leading dense layers)
    "llama3.1-8b": "h100-sxm",      # GQA, dense
    "qwen3-235b-a22b": "h100-sxm",  # GQA, MoE
}
LSE_BYTES = 4  # FP32 log-sum-exp per head per query
ACT = 2        # BF16 activations and messages


@functools.cache
def model(name: str) -> ModelSpec:
    return load_model(name)


def truncated(m: ModelSpec, layers: int) -> ModelSpec:
    """The same model with fewer layers (closed forms are linear in L; graphs get small); a
    model with kinds per layer keeps its first ``layers`` layers' kinds."""
    return m.first_layers(layers)


def min_layers(m: ModelSpec) -> int:
    """Fewest layers that still contain a MoE layer (and the leading dense ones)."""
    return m.moe.first_k_dense_replace + 1 if m.moe is not None else 1


def valid_tps(m: ModelSpec, candidates: tuple[int, ...] = (1, 2, 8)) -> list[int]:
    heads, kvh = m.num_attention_heads, m.num_key_value_heads
    return [t for t in candidates
            if heads % t == 0 and (m.mla is not None or t <= kvh or t % kvh == 0)]


def config(
    m: ModelSpec | str,
    phase: str,
    context_length: int,
    cp: int,
    *,
    tp: int = 1,
    batch: int = 1,
    kv_tier: str | int | None = None,
    mla_mode: str | None = None,
    chip: str | None = None,
    cluster: Cluster | None = None,
    pass_q: str = "broadcast",
    cached: int = 0,
    prefill_ring: str = "pass-kv",
) -> EvalConfig:
    spec = model(m) if isinstance(m, str) else m
    chip_name = chip or MODEL_CHIP.get(spec.name, "h100-sxm")
    c = load_chip(chip_name)
    k = cluster or load_cluster(c.default_cluster)
    cfg = EvalConfig(model=spec, chip=c, cluster=k, phase=phase, context_length=context_length,
                     cp=cp, tp=tp, batch=batch, kv_tier=kv_tier, cached=cached,
                     policy=Policy(mla_mode=mla_mode, pass_q=pass_q, prefill_ring=prefill_ring))
    return check_point(cfg)


def graph(cfg: EvalConfig) -> GraphBuilder:
    return build_graph(cfg)


# -- independent closed forms -----------------------------------------------------------------

def c_kv_per_chip(m: ModelSpec, c_kv: int, tp: int) -> int:
    """Bytes per token per layer one TP chip holds: MLA's latent is one "KV head" (replicated
    on every TP chip); GQA splits its KV heads over min(tp, kv_heads) chips."""
    split = min(tp, 1 if m.mla is not None else m.num_key_value_heads)
    return math.ceil(c_kv / split)


def pass_kv_bytes(m: ModelSpec, S: int, np_: int, tp: int, batch: int, c_kv: int) -> int:
    """b * L * (Np - 1) * S * c_kv per chip-ring, times the tp rings."""
    return batch * m.num_hidden_layers * (np_ - 1) * S * c_kv_per_chip(m, c_kv, tp) * tp


def decode_dims(m: ModelSpec, mla_mode: str) -> tuple[int, int]:
    """(qk width, v width) per head that travel in decode messages."""
    if m.mla is None:
        return m.head_dim, m.head_dim
    mla = m.mla
    if mla_mode == "standard":
        return mla.qk_nope_head_dim + mla.qk_rope_head_dim, mla.v_head_dim
    return mla.kv_lora_rank + mla.qk_rope_head_dim, mla.kv_lora_rank


def pass_q_bytes(m: ModelSpec, nd: int, tp: int, batch: int, mla_mode: str) -> int:
    """L * b * (Nd - 1) * tp * (query + partial output + LSE bytes per TP chip)."""
    qk, v = decode_dims(m, mla_mode)
    heads = m.num_attention_heads // tp
    per_chip = heads * qk * ACT + heads * (v * ACT + LSE_BYTES)
    return m.num_hidden_layers * batch * (nd - 1) * tp * per_chip


# -- clusters and timings ---------------------------------------------------------------------

def scaled_cluster(k: Cluster, bandwidth: float, latency: float) -> Cluster:
    """The cluster with every level's bandwidth multiplied by ``bandwidth`` and latency by
    ``latency``."""
    levels = tuple(dataclasses.replace(lv, bandwidth_bytes_per_s=lv.bandwidth_bytes_per_s
                                       * bandwidth, latency_ns=int(lv.latency_ns * latency))
                   for lv in k.levels)
    return dataclasses.replace(k, levels=levels)


def compute_ns_per_chip(b: GraphBuilder) -> list[int]:
    """Sum of the compute-op durations on each chip (what it would take with free links)."""
    out = [0] * b.n_chips
    for t, chip in enumerate(b.chip_of):
        if b.peer[t] < 0 and b.graph.resources[t]:
            out[chip] += b.graph.duration_ns[t]
    return out


# -- what the emitters asked for ---------------------------------------------------------------

@contextmanager
def recorded_parts() -> Iterator[list[tuple[str, list[Work], int]]]:
    """Record (kind, parts, tasks) of every compute op emitted."""
    seen: list[tuple[str, list[Work], int]] = []
    original = GraphBuilder.compute

    def spy(self: GraphBuilder, chips: Any, kind: str, parts: Any, *a: Any,
            **kw: Any) -> Any:
        ids = original(self, chips, kind, parts, *a, **kw)
        seen.append((kind, list(parts), len(ids)))
        return ids

    GraphBuilder.compute = spy  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        GraphBuilder.compute = original  # type: ignore[method-assign]


def total_of(parts: list[tuple[str, list[Work], int]], kind_names: tuple[str, ...],
           op_class: str, what: str) -> float:
    """Sum of ``what`` over the parts of class ``op_class`` of the ops of the given kinds."""
    out = 0.0
    for kind, works, n in parts:
        if kind in kind_names:
            for w in works:
                if w.op_class == op_class:
                    out += float(np.sum(np.broadcast_to(getattr(w, what), (n,))))
    return out
