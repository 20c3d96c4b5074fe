"""Per-chip memory summed over the layers of each attention kind (mapping/memory.py, each kind's
memory hooks in mapping/kinds).

Expected values are written from the model's numbers and docs/mapping.md ("Memory"), not from
the functions under test.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxplan.config.hardware_presets import load_chip
from ctxplan.evaluate import MemoryReport
from ctxplan.hardware.chip import Chip
from ctxplan.mapping.layout import Layout, kv_bytes_per_chip_token
from ctxplan.mapping.memory import (
    chip_memory,
    kv_bytes_by_rank,
    kv_bytes_per_chip,
    weight_bytes_per_chip,
)
from ctxplan.model import ModelSpec, kv_bytes_per_sequence, kv_tiers, weight_bytes
from ctxplan.model.precision import Precision

# The family specs and strategies live beside the model tests. Until tests/ becomes a package
# (issue 11: then ``from tests.model.family_specs import ...``) they are reached by path.
from tests.model.family_specs import DEEPSEEK_V32, FAMILIES, GPT_OSS_20B, QWEN3_NEXT
from tests.model.model_strategies import hybrid_model_specs, model_specs


def memory_report(m: ModelSpec, lay: Layout, chip: Chip) -> MemoryReport:
    return MemoryReport.of(chip_memory(m, lay), chip)


def layout(m: ModelSpec, phase: str, S: int, cp: int = 1, tp: int = 1, batch: int = 1,
           c_kv: int | None = None, precision: Precision | None = None) -> Layout:
    c = c_kv if c_kv is not None else next(iter(kv_tiers(m).values()))
    return Layout(phase, cp, tp, batch, S, c, "absorbed" if m.mla else "", precision or Precision())


def test_gpt_oss_20b_at_128k_on_one_b200() -> None:
    # issue 16's target: (12 S + 12 x 128) x 2 x 8 x 64 x 2, within 1 % (here exact)
    S = 128 * 1024
    lay = layout(GPT_OSS_20B, "decode", S, c_kv=kv_tiers(GPT_OSS_20B)["kv-bf16"])
    report = memory_report(GPT_OSS_20B, lay, load_chip("b200"))
    assert report.kv_bytes == (12 * S + 12 * 128) * 2 * 8 * 64 * 2
    assert report.fits
    # prefill also holds one layer's transient: two ring blocks of the S tokens (the larger of
    # that and a window layer's S + 2 x 128)
    pre = memory_report(GPT_OSS_20B, layout(GPT_OSS_20B, "prefill", S), load_chip("b200"))
    assert pre.kv_bytes == (12 * S + 12 * 128 + 2 * S) * 2048


def test_windows_live_on_each_sequences_home_rank() -> None:
    S, c = 1000, 2048
    # decode shards of 334, 333, 333 for the 12 full layers; one sequence, its home rank 0
    # keeps the last 128 tokens of each of the 12 window layers (mapping/kinds/window.py)
    by_rank = kv_bytes_by_rank(GPT_OSS_20B, layout(GPT_OSS_20B, "decode", S, cp=3, c_kv=c))
    assert by_rank == [(12 * 334 + 12 * 128) * c, 12 * 333 * c, 12 * 333 * c]
    # five sequences over 4 ranks: homes hold 2, 1, 1, 1 windows
    by_rank = kv_bytes_by_rank(GPT_OSS_20B, layout(GPT_OSS_20B, "decode", 200, cp=4, batch=5,
                                                   c_kv=c))
    assert by_rank == [(5 * 12 * 50 + h * 12 * 128) * c for h in (2, 1, 1, 1)]
    # a window holding the whole context is full attention, sharded like it
    by_rank = kv_bytes_by_rank(GPT_OSS_20B, layout(GPT_OSS_20B, "decode", 128, cp=4, c_kv=c))
    assert by_rank == [24 * 32 * c] * 4


def test_linear_states_live_on_each_sequences_home_rank() -> None:
    S, batch, cp = 4000, 6, 4  # homes: sequences 0, 4 on rank 0; 1, 5 on 1; 2 on 2; 3 on 3
    c = kv_tiers(QWEN3_NEXT)["kv-bf16"]
    state = 1_097_728
    by_rank = kv_bytes_by_rank(QWEN3_NEXT, layout(QWEN3_NEXT, "decode", S, cp, batch=batch))
    assert by_rank == [batch * 12 * 1000 * c + 36 * homes * state for homes in (2, 2, 1, 1)]
    # under TP the 32 value heads split: each of 8 chips holds 1/8 of every state
    tp8 = kv_bytes_by_rank(QWEN3_NEXT, layout(QWEN3_NEXT, "decode", S, cp, tp=8, batch=batch))
    c_chip = math.ceil(c / 2)  # 2 KV heads over 8 chips: each chip holds one head
    assert tp8[3] == batch * 12 * 1000 * c_chip + 36 * 1 * state // 8


def test_dsa_kv_includes_the_indexer_keys() -> None:
    S, nd = 2**20, 8
    c = kv_tiers(DEEPSEEK_V32)["mla-fp8-flashmla"]
    assert c == 656 + 132
    assert kv_bytes_per_chip(DEEPSEEK_V32, layout(DEEPSEEK_V32, "decode", S, nd, c_kv=c)) == (
        61 * (S // nd) * 788)


@given(hybrid_model_specs(), st.integers(1, 300_000), st.integers(1, 9), st.integers(1, 5))
def test_decode_ranks_hold_every_sequences_cache_once(
    m: ModelSpec, S: int, cp: int, batch: int
) -> None:
    c = kv_bytes_per_chip_token(m, layout(m, "decode", S))
    by_rank = kv_bytes_by_rank(m, layout(m, "decode", S, cp, batch=batch))
    assert sum(by_rank) == batch * kv_bytes_per_sequence(m, S, c)


@given(model_specs(), st.integers(1, 2**21), st.integers(1, 64), st.sampled_from([1, 2, 8]),
       st.integers(1, 8), st.integers(1, 4096))
def test_full_attention_models_keep_their_former_memory(
    m: ModelSpec, S: int, cp: int, tp: int, batch: int, c_kv: int
) -> None:
    # the formulas before attention kinds (docs/mapping.md): unchanged for every existing model
    dec = layout(m, "decode", S, cp, tp, batch, c_kv)
    c_chip = kv_bytes_per_chip_token(m, dec)
    L = m.num_hidden_layers
    assert kv_bytes_per_chip(m, dec) == batch * math.ceil(S / cp) * c_chip * L
    pre = layout(m, "prefill", S, cp, tp, batch, c_kv)
    chunks = [S // (2 * cp) + (1 if i < S % (2 * cp) else 0) for i in range(2 * cp)]
    most = max(chunks[i] + chunks[2 * cp - 1 - i] for i in range(cp))
    assert kv_bytes_per_chip(m, pre) == (
        batch * most * c_chip * L + 2 * batch * max(chunks) * 2 * c_chip)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_weights_on_one_chip_are_the_model(name: str) -> None:
    # one chip holds every weight: the per-kind attention linears, all experts, the embedding
    m = FAMILIES[name]
    precision = Precision(attention_weights=m.weight_dtype,
                          ffn_weights=m.expert_weight_dtype or m.weight_dtype)
    held = weight_bytes_per_chip(m, layout(m, "decode", 1, precision=precision))
    # norms and small per-kind parameters are left out, embeddings and router are BF16 there
    assert held == pytest.approx(weight_bytes(m), rel=0.005)
