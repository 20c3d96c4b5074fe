"""The TTFT lower bound (solve/roofline.py) is never above the simulated TTFT: dense, MoE + MLA,
TP, cross-host and uneven chunks; and it falls as 1 / chips."""

from __future__ import annotations

from typing import Any

import pytest

from ctxplan import api
from ctxplan.solve.roofline import pipeline_bound_s, prefill_work_s, ttft_lower_bound_s

CASES = [
    # (model, chip, cluster, S, cp, tp, batch)
    ("llama3.1-8b", "h100-sxm", None, "32K", 4, 1, 1),          # dense GQA
    ("llama3.1-8b", "h100-sxm", None, "32K", 12, 1, 1),         # cross-host ring (8 GPUs/host)
    ("llama3.1-8b", "h100-sxm", None, "8K", 3, 2, 2),           # TP, batch, uneven chunks
    ("llama3.1-70b", "h100-sxm", None, "128K", 2, 8, 1),        # TP8
    ("deepseek-v3", "sg2262", None, "8K", 8, 1, 1),             # MoE + MLA
    ("deepseek-v3", "sg2262", None, "8K", 3, 2, 1),             # MoE + MLA with TP
    ("deepseek-v3", "h200", "hgx-h200-ib", "4K", 2, 8, 1),      # MoE, TP8, cross-host EP
    ("qwen3-235b-a22b", "h100-sxm", None, "8K", 2, 4, 1),       # MoE without shared experts
]


@pytest.mark.parametrize(("model", "chip", "cluster", "context", "cp", "tp", "batch"), CASES)
def test_the_bound_never_exceeds_the_simulated_ttft(model: str, chip: str, cluster: str | None,
                                                    context: str, cp: int, tp: int,
                                                    batch: int) -> None:
    cfg = api.eval_config(model, chip, context, "prefill", cp, tp=tp, batch=batch,
                          cluster=cluster)
    bound = ttft_lower_bound_s(cfg)
    result = api.evaluate(model, chip, context, "prefill", cp, tp=tp, batch=batch,
                          cluster=cluster)
    assert result.latency_s is not None
    assert 0 < bound <= result.latency_s
    # Not vacuous: the bound is a sizeable share of the simulated time.
    assert bound >= 0.05 * result.latency_s


KIND_CASES = [
    # (model, chip, S, cp, options): attention kinds and a cached prefix (issues 15 / 16)
    ("gpt-oss-20b", "b200", "32K", 4, {}),                            # sliding window
    ("qwen3-next-80b-a3b", "h100-sxm", "32K", 4, {"tp": 2}),         # linear attention
    ("deepseek-v3.2", "sg2262", "16K", 8, {}),                       # DSA
    ("llama3.1-8b", "h100-sxm", "32K", 4, {"cached": "28K"}),        # cached prefix, pass-KV
    ("llama3.1-8b", "h100-sxm", "32K", 4, {"cached": "30K", "prefill_ring": "pass-q"}),
]


@pytest.mark.parametrize(("model", "chip", "context", "cp", "options"), KIND_CASES)
def test_the_bound_holds_for_every_kind_and_a_cached_prefix(
        model: str, chip: str, context: str, cp: int, options: dict[str, Any]) -> None:
    cfg = api.eval_config(model, chip, context, "prefill", cp, **options)
    bound = ttft_lower_bound_s(cfg)
    result = api.evaluate(model, chip, context, "prefill", cp, **options)
    assert result.latency_s is not None
    assert 0 < bound <= result.latency_s


def test_the_bound_counts_only_the_new_tokens() -> None:
    cold = api.eval_config("llama3.1-8b", "h100-sxm", "32K", "prefill", 4)
    warm = api.eval_config("llama3.1-8b", "h100-sxm", "32K", "prefill", 4, cached="16K")
    # the FFN halves; the new half's attention is 3/4 of the causal pairs (S^2 / 2 - P^2 / 2)
    assert prefill_work_s(warm) < 0.76 * prefill_work_s(cold)


def test_the_bound_is_the_work_over_the_chips() -> None:
    a = api.eval_config("deepseek-v3", "sg2262", "1M", "prefill", 128)
    b = api.eval_config("deepseek-v3", "sg2262", "1M", "prefill", 32, tp=4)
    assert prefill_work_s(a) == prefill_work_s(b)
    assert ttft_lower_bound_s(a) == pytest.approx(ttft_lower_bound_s(b))
    c = api.eval_config("deepseek-v3", "sg2262", "1M", "prefill", 64)
    assert ttft_lower_bound_s(c) == pytest.approx(2 * ttft_lower_bound_s(a))


PIPELINE_CASES = [
    # (model, chip, S, cp, tp, pp, options): chunks through pipeline stages (issue 23)
    ("deepseek-v3", "h200", "128K", 1, 8, 2, {}),                       # MoE + MLA, TP8
    ("deepseek-v3", "h200", "128K", 1, 8, 4, {}),                       # stages over hosts
    ("llama3.1-8b", "h100-sxm", "32K", 2, 1, 2, {}),                    # CP in each stage
    ("llama3.1-8b", "h100-sxm", "32K", 1, 1, 4, {"prefill_chunk": "dynamic"}),
    ("llama3.1-8b", "h100-sxm", "32K", 2, 2, 2, {"prefill_chunk": 4096}),
    ("llama3.1-8b", "h100-sxm", "32K", 2, 1, 2, {"cached": "16K"}),     # a cached prefix
    ("qwen3-235b-a22b", "h100-sxm", "32K", 2, 4, 2, {}),
    ("gpt-oss-20b", "b200", "32K", 2, 1, 2, {}),                        # sliding windows
]


@pytest.mark.parametrize(("model", "chip", "context", "cp", "tp", "pp", "options"),
                         PIPELINE_CASES)
def test_the_pipeline_bound_never_exceeds_the_simulated_ttft(
        model: str, chip: str, context: str, cp: int, tp: int, pp: int,
        options: dict[str, Any]) -> None:
    cfg = api.eval_config(model, chip, context, "prefill", cp, tp=tp, pp=pp, **options)
    flat = prefill_work_s(cfg) / (pp * cp * tp)
    bound = ttft_lower_bound_s(cfg)
    result = api.evaluate(model, chip, context, "prefill", cp, tp=tp, pp=pp, **options)
    assert result.latency_s is not None
    assert flat <= bound <= result.latency_s


def test_a_fixed_chunk_makes_the_pipeline_bound_count_the_last_chunks_passage() -> None:
    """Equal chunks: the last attends to the most context, and its passage through the stages
    after the busiest one is not overlapped: the bound is above the work over the chips."""
    cfg = api.eval_config("deepseek-v3", "h200", "128K", "prefill", 1, tp=8, pp=4,
                          prefill_chunk=8192)
    flat = prefill_work_s(cfg) / (4 * 8)
    assert pipeline_bound_s(cfg) > 1.25 * flat
    # One pass through the stages overlaps nothing: the whole work on one stage's chips.
    one = api.eval_config("deepseek-v3", "h200", "128K", "prefill", 1, tp=8, pp=4,
                          prefill_chunk="off")
    assert pipeline_bound_s(one) == pytest.approx(prefill_work_s(one) / 8)


def test_a_target_below_the_bound_at_the_chip_bound_is_infeasible_unsimulated() -> None:
    """The bound is taken at the most chips a pool may have (the chip bound), not at the host
    budget's cut: an INFEASIBLE answer then holds for every N up to the bound, and the screen
    says the bound ruled it out (not that nothing fits in memory)."""
    from ctxplan.report.view import solve as view

    r = api.solve("deepseek-v3", "sg2262", "128K", ttft_max="100ms", kv_tiers="mla-fp8")
    assert not r.feasible
    prefill = [c for c in r.candidates if c.phase == "prefill"]
    assert prefill and not any(c.simulated for c in prefill)
    bound = [c for c in prefill if c.cut_by == "TTFT bound"]
    # one per TP degree, each at the chip bound (1,024 chips), each over the target
    assert sorted(c.tp for c in bound) == [1, 2, 4, 8]
    assert all(c.n * c.tp == r.max_chips for c in bound)
    for c in bound:
        cfg = api.eval_config("deepseek-v3", "sg2262", "128K", "prefill", c.n, tp=c.tp,
                              kv_tier="mla-fp8")
        assert ttft_lower_bound_s(cfg) > 0.1
    text = view.phase_miss(r.to_dict(), "prefill")
    assert text.startswith("no Np of up to 1,024 chips can meet TTFT <= 100.000 ms")
    assert "fits in memory" not in text
    # the verdict holds up to the chip bound: nothing it needed was skipped
    assert view.answer(r.to_dict()).title.endswith("meets the SLA)")


def test_a_bound_met_only_beyond_the_host_budget_is_too_large_not_infeasible() -> None:
    """Where the bound could be met only by graphs over the host budget, the TP degree says so
    and the screen blames the budget, not the target."""
    from ctxplan.report.view import solve as view

    r = api.solve("llama3.1-8b", "h100-sxm", "128K", ttft_max="200ms", max_chips=64,
                  prefill_tp=1, host_memory_budget="3MB")
    assert not r.feasible
    tier = r.tiers[0]
    option = next(o for o in tier.prefill.tp_options if o.tp == 1)
    assert "too large to simulate here" in option.why and "roofline bound" in option.why
    text = view.phase_miss(r.to_dict(), "prefill")
    assert "too large to simulate here" in text and "can meet" not in text
    assert "too large to simulate here were skipped" in view.answer(r.to_dict()).title
