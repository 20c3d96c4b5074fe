"""``ctxplan pareto`` (solve/pareto.py): the searched shapes follow the stated rule, the front
is exactly the non-dominated points and is monotone, and a second call simulates nothing."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ctxplan import api
from ctxplan.config.hardware_presets import cluster_from_dict
from ctxplan.config.model_presets import model_from_dict
from ctxplan.evaluate import evaluate
from ctxplan.solve import EvalCache
from ctxplan.solve import pareto as pareto_module
from ctxplan.solve.pareto import TPOT_DIP, ParetoResult, batch_ladder, non_dominated
from tests.helpers.cli import run_cli
from tests.helpers.inputs import TINY_CLUSTER, TINY_MODEL, write_yaml
from tests.mapping.mapping_helpers import truncated

pairs = st.lists(st.one_of(st.none(), st.tuples(st.floats(0, 1e6), st.floats(0, 1e6))),
                 max_size=30)


@given(pairs)
@example([(1.0, 2.0), (1.0, 2.0), (2.0, 1.0), (0.5, 0.5), None])
def test_the_front_is_the_points_no_other_beats(values: list) -> None:
    front = non_dominated(values)
    pts = [v for v in values if v is not None]
    for v, on in zip(values, front, strict=True):
        if v is None:
            assert not on
            continue
        beaten = any(a >= v[0] and b >= v[1] and (a, b) != v for a, b in pts)
        assert on is not beaten
    # Monotone: along the front by x ascending, y never rises.
    kept = sorted(v for v, on in zip(values, front, strict=True) if on)
    assert all(b[1] <= a[1] for a, b in pairwise(kept))


def test_the_batch_ladder_is_powers_of_four_and_the_largest_that_fits() -> None:
    assert batch_ladder(1) == [1]
    assert batch_ladder(4) == [1, 4]
    assert batch_ladder(70) == [1, 4, 16, 64, 70]


@pytest.fixture(scope="module")
def tiny() -> tuple[ParetoResult, EvalCache, dict]:
    model = model_from_dict(dict(TINY_MODEL), "tiny")
    cluster = cluster_from_dict(dict(TINY_CLUSTER), "tests")
    inputs = {"model": model, "cluster": cluster}
    cache = EvalCache()
    r = api.pareto(model, "h100-sxm", "8K", cluster=cluster, max_chips=8, cache=cache)
    return r, cache, inputs


def test_every_searched_shape_is_a_point_and_the_front_is_non_dominated(tiny: tuple) -> None:
    r, _, _ = tiny
    pts = [p for p in r.points if p.tpot_s is not None]
    assert pts and r.front and set(r.front) <= set(pts)
    for p in pts:
        x, y = p.tokens_per_s_per_chip, p.tokens_per_s_per_user
        beaten = any(q.tokens_per_s_per_chip >= x and q.tokens_per_s_per_user >= y
                     and (q.tokens_per_s_per_chip, q.tokens_per_s_per_user) != (x, y)
                     for q in pts)
        assert p.on_front is not beaten
        assert p.chips <= 8 and p.tokens_per_s_per_chip == pytest.approx(
            p.batch / p.tpot_s / p.chips)
        assert p.meets_sla == (p.tpot_s <= r.sla.tpot_max_s)
    users = [p.tokens_per_s_per_user for p in r.front]
    chips = [p.tokens_per_s_per_chip for p in r.front]
    assert users == sorted(users) and chips == sorted(chips, reverse=True)
    # The rule: per (tier, TP, DP), batches of each Nd are the ladder from DP up to its
    # largest fit (DP ranks each hold whole sequences: a multiple of DP at the top).
    by_shape: dict[tuple, list[int]] = {}
    for p in r.points:
        by_shape.setdefault((p.kv_tier, p.tp, p.cp, p.dp), []).append(p.batch)
    for (_, _, _, dp), batches in by_shape.items():
        assert batches == batch_ladder(batches[-1], first=dp)
        assert batches[-1] % dp == 0
    assert {p.dp for p in r.points} > {1}   # DP searched by default
    # DP ranks of cp x tp chips each, within the bound
    assert all(p.dp == 1 or p.pp == 1 for p in r.points)


def test_the_plan_figure_counts_the_prefill_pool(tiny: tuple) -> None:
    r, _, _ = tiny
    prefill = {p.kv_tier: p.chips for p in r.prefill}
    for p in r.points:
        assert p.prefill_chips == prefill[p.kv_tier]
        if p.tpot_s is not None:
            assert p.plan_tokens_per_s_per_chip == pytest.approx(
                p.batch / p.tpot_s / (p.chips + p.prefill_chips))
    assert r.plan_front


def test_a_second_call_simulates_nothing_and_gives_the_same_json(tiny: tuple) -> None:
    r, cache, inputs = tiny
    again = api.pareto(inputs["model"], "h100-sxm", "8K", cluster=inputs["cluster"],
                       max_chips=8, cache=cache)
    assert again.sim_calls == 0
    a, b = r.to_dict(), again.to_dict()
    for d in (a, b):
        for key in ("sim_calls", "cache_hits"):
            d.pop(key)
        for p in (*d["points"], *d["front"], *d["plan_front"]):
            p.pop("cache_hit")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_the_command_prints_the_front_writes_json_and_a_plot(tmp_path: Path) -> None:
    model = write_yaml(tmp_path / "tiny.yaml", TINY_MODEL)
    cluster = write_yaml(tmp_path / "cluster.yaml", TINY_CLUSTER)
    base = ["pareto", "--model", str(model), "--chip", "h100-sxm", "--cluster", str(cluster),
            "--context", "8K", "--max-chips", "4", "--decode-tp", "1", "--no-store"]
    code, out, err = run_cli([*base, "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["front"] and all(p["on_front"] for p in d["front"])
    assert {"tokens_per_s_per_chip", "tokens_per_s_per_user", "tp", "cp", "batch"} <= set(
        d["points"][0])
    plot = tmp_path / "front.png"
    code, out, err = run_cli([*base, "--plot", str(plot)])
    assert code == 0, err
    assert "Pareto front" in out and plot.stat().st_size > 1000
    code, _, err = run_cli([*base, "--plot", str(tmp_path / "front.txt")])
    assert code == 2 and "plot" in err


def test_the_report_renders_a_saved_pareto_result(tiny: tuple, tmp_path: Path) -> None:
    r, _, _ = tiny
    page = api.report_results(r.to_dict(), tmp_path / "front.html",
                              model=tiny[2]["model"], cluster=tiny[2]["cluster"])
    html = page.path.read_text()
    assert page.kind == "pareto"
    assert 'id="chart-pareto"' in html and "Pareto front (decode pool)" in html
    for p in r.front:   # each shape of the front is a mark whose tooltip says so
        assert f"TP {p.tp} x Nd {p.cp} = " in html and f"batch {p.batch}: " in html
    assert "on the front" in html


def _figures(p) -> tuple:
    return (p.tokens_per_s_per_chip, p.tokens_per_s_per_user, p.plan_tokens_per_s_per_chip)


def _keys(points) -> list[tuple]:
    return [(p.kv_tier, p.pp, p.dp, p.tp, p.cp, p.batch) for p in points]


def test_a_shape_left_unsimulated_is_beaten_on_both_fronts(tiny: tuple, monkeypatch) -> None:
    """The search skips a point only when its TPOT floor shows it dominated: simulating every
    point gives the same fronts, and each skipped point, simulated, is beaten on both figures
    (the decode pool's and the plan's) by a point the search did simulate."""
    r, _, inputs = tiny
    skipped = [p for p in r.points if p.tpot_s is None and p.why.startswith("dominated")]
    assert skipped   # the tiny case exercises the bound
    monkeypatch.setattr(pareto_module, "_beaten_by", lambda *args: None)
    full = api.pareto(inputs["model"], "h100-sxm", "8K", cluster=inputs["cluster"],
                      max_chips=8, cache=EvalCache())
    assert all(p.tpot_s is not None for p in full.points)
    assert _keys(full.points) == _keys(r.points)
    assert _keys(full.front) == _keys(r.front)
    assert _keys(full.plan_front) == _keys(r.plan_front)
    by_key = dict(zip(_keys(full.points), full.points, strict=True))
    simulated = [p for p in r.points if p.tpot_s is not None]
    for p in skipped:
        chip, user, plan = _figures(by_key[_keys([p])[0]])
        assert any(q.tokens_per_s_per_chip > chip and q.tokens_per_s_per_user > user
                   and q.plan_tokens_per_s_per_chip > plan for q in simulated)


def _short(name: str, layers: int, chip: str):
    return truncated(api.eval_config(name, chip, 1024, "decode", 1).model, layers)


SHAPES = [  # model, layers, chip, cp, tp, dp: dense and MoE, CP, TP, DP, across hosts
    ("deepseek-v3", 4, "h200", 3, 1, 2), ("deepseek-v3", 4, "h200", 1, 2, 4),
    ("deepseek-v3", 4, "h200", 2, 2, 1), ("qwen3-235b-a22b", 3, "h100-sxm", 4, 4, 1),
    ("llama-3.1-8b", 4, "h100-sxm", 3, 1, 1), ("gpt-oss-20b", 4, "h100-sxm", 4, 4, 1),
]


@settings(max_examples=40, deadline=None)
@given(shape=st.sampled_from(SHAPES), context=st.integers(1024, 40_000),
       batch=st.integers(1, 40), more=st.integers(1, 40))
@example(shape=SHAPES[0], context=3001, batch=38, more=1)   # the deepest dip seen (0.5 %)
def test_tpot_never_falls_below_a_smaller_batch_by_more_than_the_dip(
        shape: tuple, context: int, batch: int, more: int) -> None:
    """The floor pareto's skips rest on (and --batch auto's search): on one shape a larger
    batch's TPOT is at least a smaller one's less TPOT_DIP."""
    name, layers, chip, cp, tp, dp = shape
    m = _short(name, layers, chip)

    def tpot(b: int) -> float:
        got, _ = evaluate(api.eval_config(m, chip, context, "decode", cp, tp=tp, dp=dp,
                                          batch=b * dp))
        assert got.simulated
        return got.latency_s

    assert tpot(batch + more) >= tpot(batch) * (1.0 - TPOT_DIP)
