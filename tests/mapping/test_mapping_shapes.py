"""The emitters hand the chip each op's shape, so small blocks lose where the kernels do.

Behaviour, not numbers: with the attention half-shape of the efficiency model, prefill pays a
larger share of extra time the more CP ranks cut the sequence into blocks (the "small chunks"
of issue 12).
"""

from __future__ import annotations

import dataclasses

from ctxplan import api
from ctxplan.config.hardware_presets import load_chip
from ctxplan.hardware import Chip


def _without_shape_loss(chip: Chip) -> Chip:
    model = chip.efficiency_model
    for op_class in ("matmul", "attention"):
        model = model.with_class(op_class, half_shape=0.0)
    return dataclasses.replace(chip, efficiency_model=model)


def _ttft(chip: Chip, cp: int) -> float:
    r = api.evaluate("llama3.1-8b", chip, "32K", "prefill", cp, cluster="hgx-h100-ib")
    assert r.latency_s is not None, r.reason
    return r.latency_s


def test_smaller_blocks_cost_a_larger_share_of_prefill() -> None:
    chip = load_chip("h100-sxm")
    flat = _without_shape_loss(chip)
    loss = {cp: _ttft(chip, cp) / _ttft(flat, cp) - 1 for cp in (1, 4, 16)}
    assert 0 < loss[1] < loss[4] < loss[16], loss
