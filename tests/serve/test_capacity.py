"""``ctxplan capacity``: chips against the rate, determinism, the JSON, clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxplan import api
from ctxplan.errors import UserInputError
from ctxplan.serve.instances import context_grid
from ctxplan.serve.result import CapacityPoint
from ctxplan.serve.search import (
    Targets,
    Workload,
    decode_stable_min,
    fewest_prefill,
    prefill_stable_min,
    size_curve,
)
from ctxplan.serve.traffic import ContextMix, arrivals
from tests.helpers.cli import run_cli
from tests.serve.test_des import LinearSteps

POINT_KEYS = {"rate_per_s", "prefill_instances", "decode_instances", "total_chips",
              "ttft_percentile_s", "tpot_percentile_s", "prefill_utilisation",
              "decode_utilisation"}


def _curve(rates: list[float], mix: ContextMix, service: tuple[float, ...],
           steps: LinearSteps, ttft_max: float | None, tpot_max: float, n: int, seed: int,
           out_tokens: int) -> list[CapacityPoint]:
    arr = arrivals(mix, n, seed)
    lengths = np.array(mix.lengths)[arr.classes]
    service_of = np.array(service)[arr.classes]
    shortest = min(mix.lengths)
    b = 1
    while steps.fits(b + 1, shortest) and steps.step_s(b + 1, shortest) <= tpot_max:
        b += 1
    max_rate = max(k / ((out_tokens - 1) * steps.step_s(k, shortest)) for k in range(1, b + 1))
    works = [Workload(rate, arr.times_at(rate), lengths, service_of, out_tokens - 1,
                      context_grid(mix.lengths), prefill_stable_min(rate, mix.mean(service)),
                      decode_stable_min(rate, max_rate)) for rate in rates]
    return size_curve(works, steps, Targets(ttft_max, tpot_max, 90.0), 4, 2)


@settings(max_examples=60, deadline=None)
@given(
    rates=st.lists(st.floats(0.01, 3.0), min_size=2, max_size=5, unique=True),
    share=st.floats(0.05, 0.95),
    service_short=st.floats(0.05, 2.0),
    service_ratio=st.floats(1.0, 8.0),
    base=st.floats(1e-3, 1e-2),
    per_token=st.floats(1e-9, 1e-7),
    capacity=st.integers(40_000, 400_000),
    ttft_slack=st.one_of(st.none(), st.floats(1.2, 6.0)),
    seed=st.integers(0, 60),
)
def test_chips_never_decrease_as_the_rate_grows(
        rates: list[float], share: float, service_short: float, service_ratio: float,
        base: float, per_token: float, capacity: int, ttft_slack: float | None,
        seed: int) -> None:
    mix = ContextMix((8192, 32768), (share, 1 - share))
    service = (service_short, service_short * service_ratio)
    steps = LinearSteps(base, per_token, capacity)
    tpot_max = steps.step_s(1, 32768) * 1.5
    ttft_max = None if ttft_slack is None else service[1] * ttft_slack
    points = _curve(sorted(rates), mix, service, steps, ttft_max, tpot_max, 300, seed, 40)
    chips = [p.total_chips for p in points]
    assert None not in chips
    assert chips == sorted(chips), chips   # type: ignore[type-var]
    # The prefill pool needs no help: its own minimum is monotone in the rate (a FIFO queue's
    # waits only grow when the same arrivals come closer together).
    minima = [p.prefill_min_at_rate for p in points]
    assert minima == sorted(minima), minima   # type: ignore[type-var]
    # What makes it so: every point meets the targets at its rate and at every lower one.
    for k, p in enumerate(points):
        for q in points[:k + 1]:
            got = [r for r in p.probes if r.pool == "decode" and r.rate_per_s == q.rate_per_s
                   and r.instances == p.decode_instances]
            assert got and all(r.meets_sla for r in got)
        assert p.prefill_min_at_rate is not None and p.decode_min_at_rate is not None
        assert p.prefill_instances == max([p.prefill_min_at_rate,
                                           *(q.prefill_instances or 0 for q in points[:k])])


@pytest.fixture(scope="module")
def deepseek_128k() -> dict[str, object]:
    result = api.capacity("deepseek-v3", "sg2262", rates="0.05/s,0.2/s,0.5/s",
                          context_mix="128K", ttft_max="60s", requests=600)
    return result.to_dict()


def test_deepseek_128k_pools_grow_with_the_rate_and_meet_the_targets(
        deepseek_128k: dict[str, object]) -> None:
    d = deepseek_128k
    points = d["points"]
    assert isinstance(points, list) and len(points) == 3
    for p in points:
        assert set(p) >= POINT_KEYS
        assert p["ttft_percentile_s"] <= 60.0 and p["tpot_percentile_s"] <= 0.020
        assert p["total_chips"] == (p["prefill_instances"] * p["prefill_shape"]["chips"]
                                    + p["decode_instances"] * p["decode_shape"]["chips"])
        # Each pool's minimum at its rate is the smallest meeting its target there: one
        # instance fewer misses it (or is below the stability minimum).
        for pool, limit in (("prefill", 60.0), ("decode", 0.020)):
            fewest = p[f"{pool}_min_at_rate"]
            below = [q for q in p["probes"] if q["pool"] == pool and q["instances"] == fewest - 1
                     and q["rate_per_s"] == p["rate_per_s"]]
            assert fewest == p[f"{pool}_stable_min"] or below[0]["attained_s"] > limit
            assert p[f"{pool}_instances"] >= fewest
        # Power at TDP per output token served at this rate (unknown where the chip states no
        # TDP); no price given, no cost.
        if p["tdp_w"] is None:
            assert p["watts"] is None and p["joules_per_token"] is None
        else:
            assert p["watts"] == p["total_chips"] * p["tdp_w"] > 0
            assert p["joules_per_token"] == pytest.approx(
                p["watts"] / (p["rate_per_s"] * d["output_tokens"]))
        assert p["cost_per_hour"] is None and p["cost_per_million_tokens"] is None
    chips = [p["total_chips"] for p in points]
    assert chips == sorted(chips) and chips[0] < chips[-1]
    # The solve's prefill instance's service time is the solver's TTFT at its answer.
    assert d["prefill_instance"]["service_s"][0]["ttft_s"] == d["solve"]["prefill"]["ttft_s"]
    # Shapes searched: never more chips than the solve's own pair at any rate, and the pair
    # chosen at a rate is the fewest of those simulated there.
    solved = [r for r in d["shapes"] if r["solved"]]
    assert len(solved) == 1 and solved[0]["status"] == "searched"
    for k, p in enumerate(points):
        assert p["total_chips"] <= solved[0]["rates"][k]["total_chips"]
        simulated = [r["rates"][k]["total_chips"] for r in d["shapes"]
                     if r["status"] == "searched" and r["rates"][k]["total_chips"] is not None]
        assert p["total_chips"] == min(simulated)
        for r in d["shapes"]:   # a bound is a bound; a cut pair could not have won
            got, bound = r["rates"][k]["total_chips"], r["rates"][k]["bound_chips"]
            if got is not None:
                assert bound is not None and bound <= got
            if r["status"] == "cut":
                assert bound is None or bound >= p["total_chips"]


def test_the_same_inputs_give_the_same_json(deepseek_128k: dict[str, object]) -> None:
    again = api.capacity("deepseek-v3", "sg2262", rates="0.05/s,0.2/s,0.5/s",
                         context_mix="128K", ttft_max="60s", requests=600).to_dict()
    for d in (again, deepseek_128k):
        d.pop("sim_calls"), d.pop("cache_hits")
        d["solve"].pop("sim_calls"), d["solve"].pop("cache_hits")  # type: ignore[union-attr]
    assert json.dumps(again) == json.dumps(deepseek_128k)


def test_one_seed_is_one_arrival_sequence_scaled_by_the_rate() -> None:
    mix = ContextMix((1024, 4096), (0.5, 0.5))
    a, b = arrivals(mix, 100, 7), arrivals(mix, 100, 7)
    assert np.array_equal(a.unit_times_s, b.unit_times_s)
    assert np.array_equal(a.classes, b.classes)
    assert np.allclose(a.times_at(0.5), 2 * a.times_at(1.0))
    assert not np.array_equal(arrivals(mix, 100, 8).unit_times_s, a.unit_times_s)
    shares = np.bincount(arrivals(mix, 20000, 0).classes) / 20000
    assert shares == pytest.approx([0.5, 0.5], abs=0.02)


@pytest.mark.parametrize(("options", "field"), [
    ({"rates": "0/s"}, "rates"),
    ({"rates": "-1/s"}, "rates"),
    ({"rates": "0.2"}, "rates"),
    ({"rates": None}, "rates"),
    ({"context_mix": "128K:0.7,1M:0.2"}, "contexts"),
    ({"context_mix": "128K:0.5,128K:0.5"}, "contexts"),
    ({"percentile": 0}, "percentile"),
    ({"percentile": 100}, "percentile"),
    ({"percentile": 140.0}, "percentile"),
    ({"output_tokens": 1}, "output_tokens"),
    ({"batch": 4}, "batch"),
    ({"batch": 1}, "batch"),
    ({"tps_reading": "per-batch"}, "tps_reading"),
])
def test_bad_input_names_the_field(options: dict[str, object], field: str) -> None:
    kw: dict[str, object] = {"rates": "0.2/s", "context_mix": "8K", **options}
    with pytest.raises(UserInputError) as err:
        api.capacity_request("llama3.1-8b", "h100-sxm", **kw)  # type: ignore[arg-type]
    assert err.value.field == field


def test_batch_auto_is_capacitys_and_its_shapes_are_solve_batch_autos() -> None:
    """The shapes are solve --batch auto's and the decode batches follow the same rule step by
    step; a fixed batch is refused with the fix named (docs/serving.md, "Decode batches and
    --batch")."""
    for kw in ({}, {"batch": "auto"}):
        req = api.capacity_request("llama3.1-8b", "h100-sxm", rates="0.2/s",
                                   context_mix="8K", **kw)  # type: ignore[arg-type]
        assert req.solve.batch == "auto" and req.solve.base_batch == 1
    with pytest.raises(UserInputError, match="--batch auto"):
        api.capacity_request("llama3.1-8b", "h100-sxm", rates="0.2/s", context_mix="8K",
                             batch=8)


def test_cli_errors_exit_2_in_one_line() -> None:
    for extra, words in ((["--rate", "0/s"], "rates"),
                         (["--rate", "1/s", "--contexts", "8K:0.5,32K:0.4"], "sum to 0.9"),
                         (["--rate", "1/s", "--percentile", "100"], "percentile"),
                         (["--rate", "1/s", "--batch", "1"], "--batch auto")):
        code, _, err = run_cli(["capacity", "--model", "llama3.1-8b", "--chip", "h100-sxm",
                                "--contexts", "8K", *extra, "--no-store"])
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err


def test_cli_json_and_plot(tmp_path: object) -> None:
    from pathlib import Path

    plot = Path(str(tmp_path)) / "chips.png"
    code, out, err = run_cli(["capacity", "--model", "llama3.1-8b", "--chip", "h100-sxm",
                              "--contexts", "8K:0.5,32K:0.5", "--rate", "5/s", "--requests", "300",
                              # TP pinned: the shape search's cost (docs/serving.md) is not
                              # what this test is about
                              "--prefill-tp", "1", "--decode-tp", "1",
                              "--json", "--no-store", "--plot", str(plot)])
    assert code == 0, err
    d = json.loads(out)
    assert [p["rate_per_s"] for p in d["points"]] == [5.0]
    assert set(d["points"][0]) >= POINT_KEYS and plot.stat().st_size > 0


def test_a_study_file_with_a_serving_section(tmp_path: object) -> None:
    from pathlib import Path

    from tests.helpers.inputs import study_data, write_yaml

    data = study_data() | {"contexts": ["1K"], "serving": {
        "rates": ["20/s", "50/s"], "contexts": "1K:0.5,3000:0.5", "output_tokens": 20,
        "percentile": 95, "requests": 200, "seed": 3}}
    path = write_yaml(Path(str(tmp_path)) / "s.yaml", data)
    result = api.capacity_study(path)
    assert [p.rate_per_s for p in result.points] == [20.0, 50.0]
    assert result.mix.lengths == (1024, 3000) and result.percentile == 95.0
    assert result.requests == 200 and result.seed == 3 and result.output_tokens == 20
    code, out, err = run_cli(["capacity", "--config", str(path), "--json", "--no-store",
                              "--rate", "20/s"])
    assert code == 0, err
    assert [p["rate_per_s"] for p in json.loads(out)["points"]] == [20.0]   # the flag wins
    bad = write_yaml(Path(str(tmp_path)) / "bad.yaml",
                     data | {"serving": {"rates": "0.2", "contexts": "1K"}})
    code, _, err = run_cli(["capacity", "--config", str(bad), "--no-store"])
    assert code == 2 and "serving" in err and "unit" in err, err


def test_a_dp_prefill_instance_is_its_dp_ranks_servers():
    """x instances of DP d serve as x d one-request instances with the same service times:
    the same TTFT percentile and the stability minimum in whole instances."""
    mix = ContextMix((8192,), (1.0,))
    arr = arrivals(mix, 400, 3)
    lengths = np.array(mix.lengths)[arr.classes]
    service = np.full(len(lengths), 0.8)
    targets = Targets(2.0, 0.05, 90.0)

    def work(servers: int) -> Workload:
        return Workload(6.0, arr.times_at(6.0), lengths, service, 10, context_grid(mix.lengths),
                        prefill_stable_min(6.0, 0.8, servers), 1, prefill_servers=servers)

    one, four = fewest_prefill(work(1), targets), fewest_prefill(work(4), targets)
    assert one is not None and four is not None
    assert four == -(-one // 4)          # whole instances of four servers
    assert prefill_stable_min(6.0, 0.8, 4) == -(-prefill_stable_min(6.0, 0.8) // 4)
