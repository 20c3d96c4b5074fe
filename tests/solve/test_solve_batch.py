"""--batch auto: the largest batch the chosen decode pool serves within the TPOT SLA, as the
--tps-reading states it, against a scan of every batch; throughput in the JSON; objectives."""

from __future__ import annotations

import json

import pytest

from ctxplan import api
from ctxplan.solve import EvalCache, SolveResult
from ctxplan.solve.batch import largest_fitting

ARGS = ("llama3.1-8b", "h100-sxm", "32K")


def _scan_batches(r: SolveResult, reading: str, cache: EvalCache) -> int:
    """The definition, by brute force on the chosen pool: the largest b in [1, max_fit] with
    TPOT(b) <= the limit at b."""
    d = r.best.decode if r.best else None
    assert d is not None and d.batch_plan is not None and d.answer is not None
    best = 0
    for b in range(1, d.batch_plan.max_fit + 1):
        point = api.evaluate(*ARGS, "decode", d.answer, tp=d.tp, batch=b,
                             kv_tier=r.best.kv_tier if r.best else None)
        limit = r.sla.tpot_max_s * (b if reading == "per-batch" else 1)
        if point.latency_s is not None and point.latency_s <= limit:
            best = b
    return best


@pytest.mark.parametrize(("reading", "tpot"), [("per-seq", "15ms"), ("per-batch", "10ms")])
def test_auto_batch_is_the_largest_meeting_the_sla(reading: str, tpot: str) -> None:
    cache = EvalCache()
    r = api.solve(*ARGS, batch="auto", tpot_max=tpot, tps_reading=reading, max_chips=8,
                  kv_tiers="kv-bf16", decode_tp=1, prefill_tp=1, cache=cache)
    assert r.best is not None
    d = r.best.decode
    assert d.batch_plan is not None and d.batch == d.batch_plan.batch > 1
    assert d.batch == _scan_batches(r, reading, cache)
    # b* + 1 was simulated and missed the SLA, or does not fit.
    records = {c.batch: c for c in d.candidates if c.step in ("batch", "memory")
               and c.n == d.answer}
    nxt = records.get(d.batch + 1)
    assert nxt is not None and not nxt.meets_sla
    assert d.batch_plan.bound_by == ("tpot" if nxt.fits else "capacity")
    # The pool was chosen at batch 1 (prefill stays one sequence).
    assert r.best.prefill.batch == 1
    assert all(c.batch == 1 for c in r.candidates if c.phase == "prefill")


def test_throughput_keys_in_the_json() -> None:
    r = api.solve(*ARGS, batch="auto", max_chips=8, kv_tiers="kv-bf16")
    d = r.to_dict()
    assert r.best is not None
    dec = d["decode"]
    assert d["batch"] == dec["batch"] == r.best.decode.batch and d["objective"] == "chips"
    assert dec["tps_per_batch"] == pytest.approx(dec["batch"] / dec["tpot_s"])
    assert dec["tps_per_seq"] == pytest.approx(1 / dec["tpot_s"])
    assert dec["tokens_per_s_per_chip"] == pytest.approx(dec["tps_per_batch"] / dec["chips"])
    assert d["tokens_per_s_per_chip"] == pytest.approx(dec["tps_per_batch"] / d["total_chips"])
    assert d["prefill"]["bound_by"] in ("capacity", "tp", "ttft")
    assert d["decode"]["bound_by"] in ("capacity", "tp", "tpot")
    assert d["search"] == {"prefill_tp": "auto", "decode_tp": "auto", "prefill_pp": 1,
                           "decode_pp": "auto", "batch": "auto", "memory_headroom": 1.0}
    assert d["tiers"][0]["decode"]["batch_search"]["batch"] == dec["batch"]
    json.dumps(d, allow_nan=False)


def test_tokens_per_chip_objective_never_serves_fewer_tokens_per_chip() -> None:
    cache = EvalCache()
    opts = dict(max_chips=16, kv_tiers="kv-bf16", batch="auto", cache=cache)
    chips = api.solve(*ARGS, **opts)
    rate = api.solve(*ARGS, objective="tokens-per-chip", **opts)
    assert chips.best is not None and rate.best is not None
    assert rate.objective == "tokens-per-chip" and rate.to_dict()["objective"] == rate.objective
    assert (rate.best.tokens_per_s_per_chip or 0) >= (chips.best.tokens_per_s_per_chip or 0)
    assert (rate.total_chips or 0) >= (chips.total_chips or 0)
    d = rate.best.decode
    assert d.latency_s is not None and d.latency_s <= rate.sla.tpot_limit_s(d.batch)
    assert d.chips is not None and d.chips <= 16 and d.bound_by == "objective"
    assert any(c.step == "ladder" for c in rate.candidates)


def test_largest_fitting_is_exact_on_every_threshold() -> None:
    for bound in (1, 2, 3, 7, 8, 100):
        for top in range(1, bound + 1):
            seen: list[int] = []

            def fits(b: int, top: int = top, seen: list[int] = seen) -> bool:
                seen.append(b)
                return b <= top

            assert largest_fitting(fits, bound) == top
            assert len(set(seen)) == len(seen) <= 2 * bound.bit_length() + 2
