"""The data behind `ctxplan presets`: every preset with its key figures."""

from __future__ import annotations

from typing import Any

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
