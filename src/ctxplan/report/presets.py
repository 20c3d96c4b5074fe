"""The data behind `ctxplan presets`: every preset with its key figures."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from ctxplan.config.hardware_presets import chip_names, cluster_names, load_chip, load_cluster
from ctxplan.config.model_presets import load_model, model_names
from ctxplan.model.kv import kv_tiers
from ctxplan.model.params import param_count
from ctxplan.report.layout import add_name_column, compact_table, words_column


def _in_units(obj: Any, figures: tuple[tuple[str, str, float], ...]) -> dict[str, float]:
    """{key: obj.attribute / unit}: an object's figures in the units its file states them
    (GB, GB/s, us)."""
    return {key: getattr(obj, attribute) / unit for key, attribute, unit in figures}


_GB, _US = 1e9, 1e3


def presets_data() -> dict[str, list[dict[str, Any]]]:
    chips = []
    for name in chip_names():
        c = load_chip(name)
        chips.append({
            "name": c.name,
            "peak_tflops": {k: v / 1e12 for k, v in sorted(c.peak_flops_per_s.items())},
            **_in_units(c, (("memory_gb", "memory_bytes", _GB),
                            ("memory_bandwidth_gbps", "memory_bandwidth_bytes_per_s", _GB))),
            "efficiency": dict(sorted(c.efficiency.items())),
            **_in_units(c, (("op_overhead_us", "op_overhead_ns", _US),
                            ("reserved_memory_gb", "reserved_memory_bytes", _GB))),
            "default_cluster": c.default_cluster, "verified": c.verified, "source": c.source,
        })
    clusters = []
    for name in cluster_names():
        k = load_cluster(name)
        levels = [{"name": lv.name, "chips_per_group": lv.chips_per_group, "fabric": lv.fabric,
                   **_in_units(lv, (("bandwidth_gbps", "bandwidth_bytes_per_s", _GB),
                                    ("latency_us", "latency_ns", _US))),
                   "efficiency": lv.efficiency,
                   **_in_units(lv, (("op_overhead_us", "op_overhead_ns", _US),
                                    ("collective_overhead_us", "collective_ns", _US)))}
                  for lv in k.levels]
        clusters.append({"name": k.name, "chip": k.chip, "max_chips": k.max_chips,
                         "levels": levels,
                         "all_to_all_peers_in_flight": k.all_to_all_peers_in_flight,
                         "verified": k.verified, "source": k.source})
    models = []
    for name in model_names():
        m = load_model(name)
        models.append({
            "name": m.name,
            "attention": m.attention_kind,
            "layers": m.num_hidden_layers,
            "layer_types": dict(m.layer_type_counts),
            "sliding_window": m.sliding_window,
            "attention_chunk_size": m.attention_chunk_size,
            "hidden_size": m.hidden_size,
            "moe": m.moe is not None,
            "params": param_count(m),
            "weight_dtype": m.weight_dtype,
            "expert_weight_dtype": m.expert_weight_dtype,
            "kv_tiers": kv_tiers(m),
            "source": m.source,
        })
    return {"chips": chips, "clusters": clusters, "models": models}


def presets_tables(data: dict[str, list[dict[str, Any]]]) -> list[Table]:
    """The chips, clusters and models of :func:`presets_data` as three tables that fit 80
    columns: names are never cut (their columns are as wide as the longest name); the other
    columns wrap between words."""
    chips = compact_table(title="Chips")
    add_name_column(chips, "name", [c["name"] for c in data["chips"]])
    for col in ("BF16 TF/s", "FP8 TF/s", "memory GB", "mem GB/s"):
        chips.add_column(col, justify="right")
    add_name_column(chips, "default cluster", [c["default_cluster"] for c in data["chips"]])
    chips.add_column("verified")
    for c in data["chips"]:
        chips.add_row(c["name"], f"{c['peak_tflops'].get('bf16', 0):,.0f}",
                      f"{c['peak_tflops'].get('fp8', 0):,.0f}", f"{c['memory_gb']:,.0f}",
                      f"{c['memory_bandwidth_gbps']:,.0f}", c["default_cluster"],
                      "yes" if c["verified"] else "no")
    clusters = compact_table(
        title="Clusters",
        caption="levels: chips per group, fabric, GB/s per chip, latency per hop, "
        "point-to-point / collective operation cost")
    add_name_column(clusters, "name", [k["name"] for k in data["clusters"]])
    add_name_column(clusters, "chip", [k["chip"] for k in data["clusters"]])
    levels = ["; ".join(
        f"{lv['name']}: {lv['chips_per_group']} {lv['fabric']} "
        f"{lv['bandwidth_gbps']:,.0f} GB/s {lv['latency_us']:g} us, "
        f"{lv['op_overhead_us']:g} / {lv['collective_overhead_us']:g} us"
        for lv in k["levels"]) for k in data["clusters"]]
    words_column(clusters, "levels", levels)
    clusters.add_column("max chips", justify="right")
    for k, text in zip(data["clusters"], levels, strict=True):
        clusters.add_row(k["name"], k["chip"], text, str(k["max_chips"]))
    models = compact_table(title="Models (params in billions; KV tiers in bytes per token "
                           "per layer)")
    add_name_column(models, "name", [m["name"] for m in data["models"]])
    layers = [_with_attention(_layers(m), m["attention"]) for m in data["models"]]
    weights = []
    for m in data["models"]:
        text = m["weight_dtype"]
        if m["expert_weight_dtype"]:
            text += f", experts {m['expert_weight_dtype']}"
        weights.append(text)
    tiers = [", ".join(f"{n} {v}" for n, v in m["kv_tiers"].items()) for m in data["models"]]
    words_column(models, "layers", layers)
    models.add_column("params", justify="right")
    words_column(models, "weights", weights)
    words_column(models, "KV tiers", tiers)
    for m, lay, w, tier in zip(data["models"], layers, weights, tiers, strict=True):
        models.add_row(m["name"], lay, f"{m['params'] / 1e9:,.1f}", w, tier)
    return [chips, clusters, models]


# Short names of the attention kinds in the models table, with the parameter shown beside them.
_KIND_LABELS = {
    "full_attention": ("full", None),
    "sliding_attention": ("sliding", "sliding_window"),
    "chunked_attention": ("chunked", "attention_chunk_size"),
    "linear_attention": ("linear", None),
    "indexed_attention": ("DSA", None),
    "window_attention": ("window", "sliding_window"),
    "compressed_sparse_attention": ("CSA", None),
    "heavily_compressed_attention": ("HCA", None),
}


def _layers(m: dict[str, Any]) -> str:
    """"61" (full attention), "61 DSA", or "36: 18 full, 18 sliding 128" when the layers mix
    attention kinds."""
    kinds = m["layer_types"]
    if list(kinds) == ["full_attention"]:
        return str(m["layers"])
    parts = []
    for kind, n in kinds.items():
        label, param = _KIND_LABELS.get(kind, (kind, None))
        parts.append(f"{n} {label}" + (f" {m[param]:,}" if param else ""))
    if len(parts) == 1:
        return parts[0]
    return f"{m['layers']}: " + ", ".join(parts)


def _with_attention(layers: str, attention: str) -> str:
    """"61 mla", "36 gqa: 18 full, 18 sliding 128"."""
    head, sep, rest = layers.partition(":")
    if sep:
        return f"{head} {attention}:{rest}"
    count, _, kind = layers.partition(" ")
    return f"{count} {attention}" + (f" {kind}" if kind else "")
