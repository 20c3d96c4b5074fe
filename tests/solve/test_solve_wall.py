"""The capacity wall: found by memory checks only, equal to the spec's formula where it applies."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from ctxplan import api
from ctxplan.evaluate import EvalConfig, MemoryReport, check_memory
from ctxplan.solve.wall import capacity_wall


def _mem(fits: bool) -> MemoryReport:
    return MemoryReport(per_chip_bytes=2 if not fits else 1, capacity_bytes=1, fits=fits,
                        weights_bytes=0, kv_bytes=0, activation_bytes=0, reserved_bytes=0)


@pytest.mark.parametrize("bound", [1, 2, 7, 64, 1000])
def test_galloping_wall_finds_the_threshold_in_log_checks(bound: int) -> None:
    for threshold in range(1, bound + 2):
        checked: list[int] = []

        def memory(n: int, t: int = threshold, seen: list[int] = checked) -> MemoryReport:
            seen.append(n)
            return _mem(n >= t)

        wall = capacity_wall(memory, bound)
        assert wall.n_cap == (threshold if threshold <= bound else None)
        assert len(checked) == len(set(checked)) <= 2 * math.ceil(math.log2(bound + 1)) + 1


def _wall(cfg: EvalConfig, bound: int = 1024) -> int | None:
    return capacity_wall(lambda n: check_memory(replace(cfg, cp=n)), bound).n_cap


@pytest.mark.parametrize("context", [2**19, 10**6 + 7, 2**20, 3 * 2**20, 2**22])
@pytest.mark.parametrize("batch", [1, 2, 3])
def test_dense_model_wall_equals_the_spec_formula(context: int, batch: int) -> None:
    """llama3.1-8b, tp = 1: weights are replicated over CP ranks, a constant per chip, so
    N_cap = ceil(b * S * c_kv * L / (C - W)) with W = weights + activations + reserve.

    Decode activations are not quite constant: the merge buffer grows by one partial output per
    rank (heads * (v_dim * 2 + 4) bytes, 8 KB here). We take W at the wall and check that W one
    rank earlier gives the same ceiling, i.e. the dependence is too small to move the wall."""
    cfg = api.eval_config("llama3.1-8b", "h100-sxm", context, "decode", 1, batch=batch)
    n_cap = _wall(cfg)
    assert n_cap is not None and n_cap > 1
    _, c_kv = cfg.kv()
    kv_total = batch * context * c_kv * cfg.model.num_hidden_layers
    for n in (n_cap, n_cap - 1):
        m = check_memory(replace(cfg, cp=n))
        w_chip = m.weights_bytes + m.activation_bytes + m.reserved_bytes
        assert math.ceil(kv_total / (m.capacity_bytes - w_chip)) == n_cap
    # And the weights really are constant in N for this layout.
    assert len({check_memory(replace(cfg, cp=n)).weights_bytes for n in (1, n_cap, 64)}) == 1


def test_wall_is_the_first_fitting_n_by_brute_force_and_exceeds_one_at_1m() -> None:
    """The spec's unit scenario: S = 1M, MLA-BF16, L = 61 -> Nd_cap > 1. DeepSeek-V3's routed
    experts shrink per chip with N, so the formula does not apply, but the wall is still the
    first N that fits (checked against every N up to 64)."""
    for phase in ("decode", "prefill"):
        cfg = api.eval_config("deepseek-v3", "sg2262", "1M", phase, 1, kv_tier="mla-bf16")
        fits = [check_memory(replace(cfg, cp=n)).fits for n in range(1, 65)]
        assert _wall(cfg, 64) == fits.index(True) + 1 > 1
        assert all(fits[fits.index(True):]), "memory is not monotone in N"


def test_nothing_fits_up_to_the_bound_is_infeasible_with_the_numbers() -> None:
    r = api.solve("deepseek-v3", "h100-sxm", "8K", max_chips=4)
    assert not r.feasible and r.sim_calls == 0
    assert "capacity wall" in r.infeasible_reason and "weights alone take" in r.infeasible_reason
    assert all(not c.simulated and c.cut_by == "capacity wall" for c in r.candidates)
    d = r.to_dict()
    assert d["feasible"] is False and d["total_chips"] is None and d["infeasible_reason"]
