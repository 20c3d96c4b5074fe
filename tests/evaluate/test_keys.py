"""Cache and store keys: byte-identical to those stored before the refactors that reshaped
``EvalConfig`` (computed at commit 7edcc5b, SIM_VERSION 7), so stored results still hit.

A key hashes the simulator version and the configuration's fields as plain JSON data
(``EvalConfig.key_fields``: the model, chip and cluster in full, the layout, the policy, with
the event limit, an absent handoff's fields and new options at their defaults left out). Each
pin gives the fields other than model / chip / cluster exactly as they were, and the whole key;
the whole key is checked only while the presets' definitions are what they were then (a chip or
model preset changed since changes its keys, rightly: those results are simulated again).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from ctxplan import api
from ctxplan.evaluate import config as eval_config_module
from ctxplan.evaluate.config import _plain

# What every pin's other fields hold unless it says otherwise.
DEFAULTS: dict[str, Any] = {
    "batch": 1, "cached": 0, "kv_tier": None, "mla_mode": None, "pass_q": "broadcast",
    "periodic_shortcut": False, "precision": None, "prefill_ring": "pass-kv", "tp": 1}
LLAMA, DEEPSEEK = "9956a28df99718d5", "b56fb432fa575049"  # the presets' hashes then

# ((model, S, phase, cp, options), key at 7edcc5b, hash of the model / chip / cluster then,
#  the other key fields then)
PINS: list[tuple[tuple[str, int, str, int, dict[str, Any]], str, str, dict[str, Any]]] = [
    (("llama3.1-8b", 8192, "prefill", 2, {}), "a902403d96b280075fdbbc6a6866ea30", LLAMA,
     {**DEFAULTS, "context_length": 8192, "cp": 2, "phase": "prefill"}),
    (("llama3.1-8b", 16384, "decode", 4,
      {"tp": 2, "batch": 3, "pass_q": "ring", "kv_tier": "kv-fp8"}),
     "2f512e0be63c394372bf801dd2fcf879", LLAMA,
     {**DEFAULTS, "batch": 3, "context_length": 16384, "cp": 4, "kv_tier": "kv-fp8",
      "pass_q": "ring", "phase": "decode", "tp": 2}),
    (("llama3.1-8b", 8192, "prefill", 2,
      {"prefill_ring": "auto", "cached": "2K", "memory_headroom": 0.9}),
     "ba5c95dea2faf2865eb9012f41cf8984", LLAMA,
     {**DEFAULTS, "cached": 2048, "context_length": 8192, "cp": 2, "memory_headroom": 0.9,
      "phase": "prefill", "prefill_ring": "auto"}),
    (("llama3.1-8b", 8192, "prefill", 2, {"handoff_to": 3, "kv_handoff": "after",
                                          "handoff_tp": 2}),
     "8e7cad3f7f6a926b7061a1ac42a18026", LLAMA,
     {**DEFAULTS, "context_length": 8192, "cp": 2, "handoff_to": 3, "handoff_tp": 2,
      "kv_handoff": "after", "phase": "prefill"}),
    (("llama3.1-8b", 8192, "decode", 2, {"attention_weights": "fp8",
                                         "periodic_shortcut": True, "event_limit": 5}),
     "12618a449015d3314e90a53d752d14a2", LLAMA,
     {**DEFAULTS, "context_length": 8192, "cp": 2, "periodic_shortcut": True,
      "phase": "decode", "precision": {
          "activation_bytes": 2, "attention": "bf16", "attention_weights": "fp8",
          "ffn_weights": "bf16", "matmul_dtypes": []}}),
    (("deepseek-v3", 8192, "decode", 2, {"tp": 8, "mla_mode": "absorbed", "kv_tier": 300}),
     "a45adc9c58e141c0634ffc0b751eaae9", DEEPSEEK,
     {**DEFAULTS, "context_length": 8192, "cp": 2, "kv_tier": 300, "mla_mode": "absorbed",
      "phase": "decode", "tp": 8}),
]
SUBJECTS = ("model", "chip", "cluster")


# Fields of the model, chip and cluster added after the pins that a key leaves out (issue 27:
# the chip's board power, the cluster's search figures, the model's trained context; its
# DeepSeek-V4 fields at the values every earlier model has).
LATER = {"tdp_w": None, "tp_max": None, "group_size": None, "max_position_embeddings": None,
         "rope_scaling_factor": None, "original_max_position_embeddings": None,
         "compressed_attention": [None], "hc_mult": [1], "num_hash_layers": [0],
         "mtp_layer_types": [[]],
         "prefill_chunk_tokens": [16384]}   # issue 22: the chunk auto sets, at its default
# Issue 25 item 4: the cluster's host, in a key only with a handoff (where the decode pool
# starts): a handoff's key changed with it, rightly (its decode pool moved to the next host).
WITH_HANDOFF_ONLY = ("host_chips",)


def _without_later_fields(d: dict[str, Any], handoff: bool) -> dict[str, Any]:
    """``d`` without the LATER fields (those with listed values only at those values)."""
    return {k: v for k, v in d.items()
            if (k not in LATER or (LATER[k] is not None and v not in LATER[k]))
            and (handoff or k not in WITH_HANDOFF_ONLY)}


def _config(case: tuple[str, int, str, int, dict[str, Any]]) -> Any:
    model, S, phase, cp, options = case
    return api.eval_config(model, "h100-sxm", S, phase, cp, **options)


@pytest.mark.parametrize(("case", "key", "subjects", "rest"), PINS,
                         ids=[f"{c[0][0]}-{c[0][2]}-{i}" for i, c in enumerate(PINS)])
def test_keys_are_those_stored_before(case: tuple[str, int, str, int, dict[str, Any]],
                                      key: str, subjects: str, rest: dict[str, Any],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eval_config_module, "SIM_VERSION", "7")   # as the pins were taken
    cfg = _config(case)
    fields = cfg.key_fields()
    assert {k: v for k, v in fields.items() if k not in SUBJECTS} == rest
    blob = json.dumps(["7", fields], sort_keys=True, default=str)
    assert cfg.key() == hashlib.sha256(blob.encode()).hexdigest()[:32]
    plain = [_plain(getattr(cfg, name)) for name in SUBJECTS]
    handoff = cfg.handoff_to is not None
    assert [fields[name] for name in SUBJECTS] == [_without_later_fields(p, handoff)
                                                   for p in plain]
    hashed = [fields[name] for name in SUBJECTS]
    then = hashlib.sha256(json.dumps(hashed, sort_keys=True, default=str).encode()).hexdigest()
    if then[:16] != subjects:
        pytest.skip("a preset's definition changed since 7edcc5b: its keys changed with it")
    assert cfg.key() == key


def test_the_event_limit_never_changes_a_key() -> None:
    case = PINS[0][0]
    assert _config(case).key() == _config((*case[:4], {"event_limit": 7})).key()
