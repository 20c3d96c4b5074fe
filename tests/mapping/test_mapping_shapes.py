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
    """The chip without attention's block-length loss (the subject: its GEMMs keep their
    size terms, which depend on the tokens per rank and the weights' K, not on the blocks)."""
    model = chip.efficiency_model.with_class("attention", half_shape=0.0, half_full=0.0)
    return dataclasses.replace(chip, efficiency_model=model)


def _ttft(chip: Chip, cp: int) -> float:
    r = api.evaluate("llama3.1-8b", chip, "32K", "prefill", cp, cluster="hgx-h100-ib")
    assert r.latency_s is not None, r.reason
    return r.latency_s


def test_smaller_blocks_cost_a_larger_share_of_prefill() -> None:
    chip = load_chip("h100-sxm")
    flat = _without_shape_loss(chip)
    # Inside one host (8 GPUs on NVLink), where the ring's steps hide under their attention:
    # across hosts the SendRecvs outlast the small blocks' attention, which then leaves the
    # critical path and its loss with it.
    loss = {cp: _ttft(chip, cp) / _ttft(flat, cp) - 1 for cp in (1, 4, 8)}
    assert 0 < loss[1] < loss[4] < loss[8], loss
