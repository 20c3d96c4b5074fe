"""The figures a plan rests on, with their sources and flags: the chip, the cluster, the model.

Built from the objects the solve used (``Chip``, ``Cluster``, ``ModelSpec``) and, for the notes
beside each figure, from the definition they were loaded from (a preset's YAML, or the user's
file or inline mapping). The result is plain JSON-like data for the report's view.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ctxplan.config.units import format_tokens

if TYPE_CHECKING:
    from ctxplan.hardware.chip import Chip
    from ctxplan.hardware.cluster import Cluster
    from ctxplan.model.spec import ModelSpec


def _notes(definition: Mapping[str, Any] | None) -> dict[str, str]:
    notes = (definition or {}).get("notes") or {}
    return {str(k): " ".join(str(v).split()) for k, v in notes.items()} \
        if isinstance(notes, Mapping) else {}


def _note(notes: Mapping[str, str], *keys: str) -> str:
    """The note of the first key present (a figure's own, else its group's: efficiency)."""
    for key in keys:
        if key in notes:
            return notes[key]
    return ""


def _flags(verified: bool, calibrated: bool | None) -> list[str]:
    out = ["verified: yes" if verified else "verified: NO (not from a datasheet or paper)"]
    if calibrated is not None:
        out.append("calibrated: yes (fitted to measurements on this chip)" if calibrated else
                   "calibrated: NO (efficiencies from ctxplan's efficiency model)")
    return out


def chip_facts(chip: Chip, definition: Mapping[str, Any] | None, origin: str) -> dict[str, Any]:
    notes = _notes(definition)
    rows: list[list[str]] = []
    for dtype, flops in sorted(chip.peak_flops_per_s.items()):
        rows.append([f"peak {dtype}", f"{flops / 1e12:,.1f} TFLOP/s",
                     _note(notes, f"peak_tflops.{dtype}", "peak_tflops")])
    rows += [
        ["memory", f"{chip.memory_bytes / 1e9:,.1f} GB", _note(notes, "memory_gb")],
        ["memory bandwidth", f"{chip.memory_bandwidth_bytes_per_s / 1e9:,.1f} GB/s",
         _note(notes, "memory_bandwidth_gbps")],
        ["reserved memory", f"{chip.reserved_memory_bytes / 1e9:,.1f} GB",
         _note(notes, "reserved_memory_gb")],
        ["op overhead", f"{chip.op_overhead_ns / 1e3:,.2f} us per kernel",
         _note(notes, "op_overhead_us")],
    ]
    for op_class, value in sorted(chip.efficiency.items()):
        rows.append([f"efficiency {op_class}", f"{value:.3f}",
                     _note(notes, f"efficiency.{op_class}", "efficiency", "efficiency.model")])
    previous = ""
    for row in rows:   # a note shared by several figures, written once
        note = row[2]
        if note and note == previous:
            row[2] = "(as above)"
        previous = note
    warn = [] if chip.calibrated else [chip.calibration_notice() or ""]
    return {
        "name": chip.name,
        "facts": [("flags", "; ".join(_flags(chip.verified, chip.calibrated))),
                  ("defined by", origin), ("source", " ".join(chip.source.split()))],
        "warn": not (chip.verified and chip.calibrated),
        "notes": warn,
        "tables": [{"id": "figures-chip", "title": f"Chip {chip.name}: figures",
                    "columns": [("figure", False), ("value", True), ("note", False)],
                    "rows": rows}],
    }


def cluster_facts(cluster: Cluster, definition: Mapping[str, Any] | None,
                  origin: str) -> dict[str, Any]:
    notes = _notes(definition)
    level_notes = {}
    for lv in (definition or {}).get("levels") or []:
        if isinstance(lv, Mapping) and lv.get("notes"):
            level_notes[str(lv.get("name"))] = " ".join(str(lv["notes"]).split())
    rows = []
    for lv in cluster.levels:
        rows.append([lv.name, f"{lv.chips_per_group:,}", lv.fabric,
                     f"{lv.bandwidth_bytes_per_s / 1e9:,.1f}", f"{lv.latency_ns / 1e3:g}",
                     f"{lv.efficiency:g}", f"{lv.op_overhead_ns / 1e3:g} / "
                     f"{lv.collective_ns / 1e3:g}", level_notes.get(lv.name, "")])
    return {
        "name": cluster.name,
        "facts": [("flags", _flags(cluster.verified, None)[0]), ("defined by", origin),
                  ("source", " ".join(cluster.source.split())),
                  ("all-to-all", _window_text(cluster.all_to_all_peers_in_flight))]
        + ([("notes", notes["levels"])] if "levels" in notes else []),
        "warn": not cluster.verified,
        "tables": [{"id": "figures-cluster", "title": f"Cluster {cluster.name}: levels, "
                    "innermost first",
                    "columns": [("level", False), ("chips per group", True), ("fabric", False),
                                ("GB/s per chip", True), ("latency us", True),
                                ("efficiency", True), ("op cost us (p2p / coll.)", True),
                                ("note", False)],
                    "rows": rows}],
    }


def _window_text(w: int) -> str:
    return ("no window: every transfer posted at once" if w == 0 else
            f"each rank has transfers in flight to at most {w} peers at a time "
            "(all_to_all_peers_in_flight; docs/mapping.md)")


def model_facts(model: ModelSpec, origin: str, anchor: str = "") -> dict[str, Any]:
    """The model's figures; ``anchor`` tells several models' ids apart (a multi-model sweep)."""
    from ctxplan.model.kv import kv_tiers
    from ctxplan.model.params import param_count

    kinds = ", ".join(f"{n} {k}" for k, n in model.layer_type_counts.items())
    rows = [
        ["layers", f"{model.num_hidden_layers} ({kinds})"],
        ["attention", model.attention_kind
         + (f", sliding window {format_tokens(model.sliding_window)}"
            if model.sliding_window else "")],
        ["hidden size", f"{model.hidden_size:,}"],
        ["heads (query / KV)", f"{model.num_attention_heads} / {model.num_key_value_heads}"],
        ["parameters", f"{param_count(model) / 1e9:,.1f} B"],
        ["MoE", "no" if model.moe is None else
         f"{model.moe.n_routed_experts} routed experts, {model.moe.num_experts_per_tok} "
         f"per token, {model.n_moe_layers} MoE layers"],
        ["weights", model.weight_dtype + (f", experts {model.expert_weight_dtype}"
                                          if model.expert_weight_dtype else "")],
        ["KV tiers (bytes per token per layer)",
         ", ".join(f"{k} {v}" for k, v in kv_tiers(model).items())],
    ]
    tag = re.sub(r"[^A-Za-z0-9]+", "-", anchor).strip("-")   # an HTML id's part
    return {
        "name": model.name,
        "facts": [("defined by", origin), ("source", " ".join(model.source.split()))],
        "warn": False,
        "anchor": tag,
        "tables": [{"id": "figures-model" + (f"-{tag}" if tag else ""),
                    "title": f"Model {model.name}",
                    "columns": [("figure", False), ("value", False)], "rows": rows}],
    }
