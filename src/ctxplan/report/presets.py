"""The data behind `ctxplan presets`: every preset with its key figures."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from ctxplan.config.hardware_presets import chip_names, cluster_names, load_chip, load_cluster
from ctxplan.config.model_presets import load_model, model_names
from ctxplan.model.kv import kv_tiers
from ctxplan.model.params import param_count


def presets_data() -> dict[str, list[dict[str, Any]]]:
    chips = []
    for name in chip_names():
        c = load_chip(name)
        chips.append({
            "name": c.name,
            "peak_tflops": {k: v / 1e12 for k, v in sorted(c.peak_flops_per_s.items())},
            "memory_gb": c.memory_bytes / 1e9,
            "memory_bandwidth_gbps": c.memory_bandwidth_bytes_per_s / 1e9,
            "efficiency": dict(sorted(c.efficiency.items())),
            "op_overhead_us": c.op_overhead_ns / 1e3,
            "reserved_memory_gb": c.reserved_memory_bytes / 1e9,
            "default_cluster": c.default_cluster,
            "verified": c.verified,
            "source": c.source,
        })
    clusters = []
    for name in cluster_names():
        k = load_cluster(name)
        clusters.append({
            "name": k.name,
            "chip": k.chip,
            "max_chips": k.max_chips,
            "levels": [{
                "name": lv.name,
                "chips_per_group": lv.chips_per_group,
                "fabric": lv.fabric,
                "bandwidth_gbps": lv.bandwidth_bytes_per_s / 1e9,
                "latency_us": lv.latency_ns / 1e3,
                "efficiency": lv.efficiency,
                "op_overhead_us": lv.op_overhead_ns / 1e3,
                "collective_overhead_us": lv.collective_ns / 1e3,
            } for lv in k.levels],
            "verified": k.verified,
            "source": k.source,
        })
    models = []
    for name in model_names():
        m = load_model(name)
        models.append({
            "name": m.name,
            "attention": m.attention_kind,
            "layers": m.num_hidden_layers,
            "hidden_size": m.hidden_size,
            "moe": m.moe is not None,
            "params": param_count(m),
            "weight_dtype": m.weight_dtype,
            "kv_tiers": kv_tiers(m),
            "source": m.source,
        })
    return {"chips": chips, "clusters": clusters, "models": models}


def presets_tables(data: dict[str, list[dict[str, Any]]]) -> list[Table]:
    """The chips, clusters and models of :func:`presets_data` as three tables."""
    chips = Table(title="Chips")
    for col in ("name", "BF16 TF/s", "FP8 TF/s", "memory GB", "mem GB/s", "default cluster",
                "verified"):
        chips.add_column(col)
    for c in data["chips"]:
        chips.add_row(c["name"], f"{c['peak_tflops'].get('bf16', 0):,.0f}",
                      f"{c['peak_tflops'].get('fp8', 0):,.0f}", f"{c['memory_gb']:,.0f}",
                      f"{c['memory_bandwidth_gbps']:,.0f}", c["default_cluster"],
                      "yes" if c["verified"] else "no")
    clusters = Table(title="Clusters")
    for col in ("name", "chip", "levels (chips per group, fabric, GB/s per chip, latency per "
                "hop, point-to-point / collective operation cost)", "max chips"):
        clusters.add_column(col)
    for k in data["clusters"]:
        levels = "; ".join(
            f"{lv['name']}: {lv['chips_per_group']} {lv['fabric']} "
            f"{lv['bandwidth_gbps']:,.0f} GB/s {lv['latency_us']:g} us, "
            f"{lv['op_overhead_us']:g} / {lv['collective_overhead_us']:g} us"
            for lv in k["levels"])
        clusters.add_row(k["name"], k["chip"], levels, str(k["max_chips"]))
    models = Table(title="Models")
    for col in ("name", "attention", "layers", "params (B)", "weights",
                "KV tiers (B/token/layer)"):
        models.add_column(col)
    for m in data["models"]:
        tiers = ", ".join(f"{n} {v}" for n, v in m["kv_tiers"].items())
        models.add_row(m["name"], m["attention"], str(m["layers"]), f"{m['params'] / 1e9:,.1f}",
                       m["weight_dtype"], tiers)
    return [chips, clusters, models]
