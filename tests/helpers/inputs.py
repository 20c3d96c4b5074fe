"""Small inputs every test package may use: a tiny model and cluster, valid study and point
files, and a YAML writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

# Small enough that any valid configuration simulates in milliseconds.
TINY_MODEL: dict[str, Any] = {
    "name": "tiny", "weight_dtype": "bf16", "num_hidden_layers": 2, "hidden_size": 256,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512,
    "vocab_size": 1000,
}
TINY_CLUSTER: dict[str, Any] = {
    "name": "tiny-cluster", "chip": "h100-sxm", "source": "tests", "verified": False,
    "levels": [
        {"name": "board", "chips_per_group": 4, "fabric": "full_mesh", "bandwidth_gbps": 100.0,
         "latency_us": 2.0, "efficiency": 0.8},
        {"name": "pod", "chips_per_group": 16, "fabric": "switch", "bandwidth_gbps": 25.0,
         "latency_us": 10.0, "efficiency": 0.8},
    ],
}


def study_data() -> dict[str, Any]:
    """A valid study file's content, every field given."""
    return {"version": 2, "model": dict(TINY_MODEL), "chip": "h100-sxm",
            "cluster": json.loads(json.dumps(TINY_CLUSTER)), "contexts": ["1K", 3000],
            "sla": {"tpot_max": "20ms", "ttft_max": None, "tps_reading": "per-seq"},
            "kv_tiers": ["kv-bf16", "kv-fp8"], "batch": 1, "strategy": "galloping",
            "candidates": "all", "max_chips": 8, "prefill_tp": 1, "decode_tp": 1,
            "objective": "chips", "memory_headroom": 1.0}


def point_data() -> dict[str, Any]:
    """A valid point file's content."""
    return {"version": 1, "model": dict(TINY_MODEL), "chip": "h100-sxm",
            "cluster": json.loads(json.dumps(TINY_CLUSTER)), "context": 3000,
            "phase": "decode", "cp": 2, "tp": 1, "kv_tier": "kv-bf16", "batch": 1}


def write_yaml(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path
