"""The periodic-layer shortcut of ctxplan.evaluate is exact: same latency, bytes and busy time
as simulating every layer, to the nanosecond, on a matrix of configurations."""

from __future__ import annotations

import dataclasses

import pytest

from ctxplan import api
from ctxplan.evaluate import evaluate, layer_period

CASES = [
    # model, chip, context, phase, cp, extra
    ("deepseek-v3", "sg2262", "128K", "prefill", 8, {}),
    ("deepseek-v3", "sg2262", "1M", "decode", 16, {}),
    ("deepseek-v3", "sg2262", "8K", "decode", 32, {"batch": 3, "kv_tier": "mla-fp8"}),
    ("deepseek-v3", "sg2262", "1000", "prefill", 13, {"batch": 2}),  # uneven chunks
    ("qwen3-235b-a22b", "h100-sxm", "32K", "prefill", 4, {"tp": 4}),
    ("qwen3-235b-a22b", "h100-sxm", "32K", "decode", 8, {"tp": 4, "batch": 3}),
    ("llama3.1-70b", "h100-sxm", "128K", "prefill", 4, {"tp": 8}),
    ("llama3.1-8b", "h100-sxm", "100000", "decode", 3, {"tp": 2, "batch": 5}),
    ("llama3.1-8b", "h100-sxm", "7", "prefill", 5, {}),  # S < Np
]


@pytest.mark.parametrize(("model", "chip", "context", "phase", "cp", "extra"), CASES)
def test_shortcut_equals_full_simulation(model, chip, context, phase, cp, extra):
    cfg = api.eval_config(model, chip, context, phase, cp, **extra)
    short, _ = evaluate(dataclasses.replace(cfg, periodic_shortcut=True))
    full, _ = evaluate(cfg)  # every layer simulated: the default
    assert short.simulated and full.simulated
    assert full.layers_simulated == cfg.model.num_hidden_layers
    assert short.latency_s == full.latency_s
    assert short.comm == full.comm
    assert short.busy_s_by_kind == pytest.approx(full.busy_s_by_kind, rel=1e-12)


def test_shortcut_simulates_fewer_layers_on_a_deep_model():
    cfg = api.eval_config("deepseek-v3", "sg2262", "128K", "prefill", 8, periodic_shortcut=True)
    short, _ = evaluate(cfg)
    k0, p = layer_period(cfg.model)
    assert (k0, p) == (3, 1)
    assert short.layers_simulated < cfg.model.num_hidden_layers / 4
