"""Power and cost of a plan (solve/economics.py, config/prices.py): prices as users give them,
the figures' arithmetic, and --objective cost / power."""

from __future__ import annotations

import json

import pytest

from ctxplan import api
from ctxplan.config.hardware_presets import cluster_from_dict
from ctxplan.config.model_presets import model_from_dict
from ctxplan.config.prices import parse_price, parse_prices, price_of
from ctxplan.errors import UserInputError
from ctxplan.solve.economics import PlanEconomics
from tests.helpers.cli import run_cli
from tests.helpers.inputs import TINY_CLUSTER, TINY_MODEL


@pytest.mark.parametrize("text", ["3.5/h", "3.5 / hour", "84/day", "2555/month", "30660/year",
                                  "$3.5/h"])
def test_a_price_is_per_chip_hour_whatever_its_unit(text: str) -> None:
    assert parse_price(text) == pytest.approx(3.5)


@pytest.mark.parametrize(("text", "words"), [("3.5", "add the unit: 3.5/h"),
                                             ("-1/h", "such as"), ("0/h", "> 0"),
                                             ("3.5/week", "such as h200=3.5/h")])
def test_a_bad_price_names_the_fix(text: str, words: str) -> None:
    with pytest.raises(UserInputError) as e:
        parse_price(text)
    assert words in str(e.value) and e.value.field == "prices"


def test_prices_come_as_items_lists_or_a_mapping_and_a_chip_once() -> None:
    want = (("b200", 6.0), ("h200", 3.5))
    assert parse_prices("h200=3.5/h,b200=6/h") == want
    assert parse_prices(["H200=3.5/h", "b200=6/h"]) == want
    assert parse_prices({"h200": "3.5/h", "b200": "144/day"}) == want
    assert parse_prices(None) == ()
    assert price_of(want, "H200") == 3.5 and price_of(want, "h20") is None
    with pytest.raises(UserInputError, match="once"):
        parse_prices(["h200=3.5/h", "H200=4/h"])
    with pytest.raises(UserInputError, match="CHIP=PRICE"):
        parse_prices("3.5/h")


def test_the_figures_follow_from_chips_tdp_price_and_rate() -> None:
    e = PlanEconomics(chips=12, tokens_per_s=150.0, tdp_w=700.0, price_per_chip_hour=3.5)
    assert e.watts == 8400.0 and e.joules_per_token == pytest.approx(56.0)
    assert e.cost_per_hour == 42.0
    assert e.cost_per_million_tokens == pytest.approx(42.0 / (150.0 * 3600) * 1e6)
    unknown = PlanEconomics(chips=12, tokens_per_s=150.0, tdp_w=None, price_per_chip_hour=None)
    assert unknown.to_dict() == dict.fromkeys(unknown.to_dict())


@pytest.fixture(scope="module")
def tiny() -> dict[str, object]:
    return {"model": model_from_dict(dict(TINY_MODEL), "tiny"),
            "cluster": cluster_from_dict(dict(TINY_CLUSTER), "tests")}


def _solve(tiny: dict[str, object], **kw: object) -> dict[str, object]:
    return api.solve(tiny["model"], "h100-sxm", "8K", cluster=tiny["cluster"], max_chips=8,
                     **kw).to_dict()  # type: ignore[arg-type]


def test_a_solve_reports_power_always_and_cost_from_the_price_given(tiny: dict) -> None:
    d = _solve(tiny, prices="h100-sxm=2.5/h")
    chips, rate = d["total_chips"], d["tokens_per_s_per_chip"] * d["total_chips"]
    assert d["tdp_w"] == 700 and d["watts"] == chips * 700
    assert d["joules_per_token"] == pytest.approx(chips * 700 / rate)
    assert d["cost_per_hour"] == pytest.approx(chips * 2.5)
    assert d["cost_per_million_tokens"] == pytest.approx(chips * 2.5 / (rate * 3600) * 1e6)
    for tier in d["tiers"]:
        if tier["feasible"]:
            assert tier["watts"] == tier["total_chips"] * 700
    other = _solve(tiny, prices="b200=6/h")
    assert other["cost_per_hour"] is None and other["watts"] == d["watts"]
    assert any("no price for chip h100-sxm" in w for w in other["warnings"])


def test_cost_and_power_rank_plans_as_tokens_per_chip_with_one_chip(tiny: dict) -> None:
    # Cost (power) per token is chips x price (TDP) over tokens/s: with one chip for both
    # pools the order is that of tokens/s per chip, so the plan is the same.
    base = _solve(tiny, objective="tokens-per-chip", batch="auto")
    for objective in ("cost", "power"):
        d = _solve(tiny, objective=objective, batch="auto", prices="h100-sxm=2.5/h")
        assert d["objective"] == objective
        for key in ("total_chips", "batch", "kv_tier", "tokens_per_s_per_chip"):
            assert d[key] == base[key], (objective, key)


def test_objective_cost_needs_a_price_and_power_a_tdp(tiny: dict) -> None:
    with pytest.raises(UserInputError) as e:
        _solve(tiny, objective="cost")
    assert e.value.field == "prices" and "--price h100-sxm=PRICE/h" in str(e.value)
    chip = api.resolve_chip("h100-sxm")
    from dataclasses import replace
    with pytest.raises(UserInputError) as e:
        api.solve(tiny["model"], replace(chip, tdp_w=None), "8K", cluster=tiny["cluster"],
                  max_chips=8, objective="power")
    assert e.value.field == "tdp_w"


def test_the_command_line_takes_repeated_prices_and_refuses_a_bare_number() -> None:
    base = ["solve", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "8K",
            "--max-chips", "8", "--no-store"]
    code, out, err = run_cli([*base, "--price", "b200=6/h", "--price", "h100-sxm=2.5/h",
                              "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["price_per_chip_hour"] == 2.5 and d["cost_per_hour"] == d["total_chips"] * 2.5
    code, out, err = run_cli([*base, "--price", "h100-sxm=2.5"])
    assert code == 2 and "prices" in err and "add the unit" in err and "Traceback" not in err
