"""``api.solve_request`` / ``solve`` / ``sweep`` / ``eval_cache`` (api/search.py): the checked
request, its errors, and the same answers as ``ctxplan solve`` and ``ctxplan sweep``."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxplan import api
from ctxplan.errors import UserInputError
from ctxplan.policy import Policy
from ctxplan.solve import EvalCache
from tests.api.conftest import cli_json, flags
from tests.helpers.cli import run_cli


def test_solve_request_carries_the_policy_and_fills_the_defaults(tiny: dict[str, str]) -> None:
    req = api.solve_request(tiny["model"], tiny["chip"], "3K", cluster=tiny["cluster"],
                            kv_tiers="kv-fp8,kv-bf16,kv-fp8", prefill_tp="1", batch="auto",
                            pass_q="ring", kv_handoff="off", memory_headroom=0.8,
                            cached_fraction=0.5)
    assert req.kv_tiers == ("kv-fp8", "kv-bf16")
    assert (req.prefill_tp, req.decode_tp, req.batch) == (1, "auto", "auto")
    assert (req.max_chips, req.group_size) == (16, 4)   # the tiny cluster's size and board
    assert req.policy == Policy(pass_q="ring", kv_handoff="off", memory_headroom=0.8)
    # each point gets the policy its phase runs
    assert req.eval_config("prefill", "kv-fp8", 2, 1).policy.pass_q == "broadcast"
    decode = req.eval_config("decode", "kv-fp8", 2, 1)
    assert decode.policy.pass_q == "ring" and decode.cached == 0
    assert req.eval_config("prefill", "kv-fp8", 2, 1).cached == 1536
    assert api.solve_request(tiny["model"], tiny["chip"], "3K", cluster=tiny["cluster"],
                             kv_tiers=["kv-bf16"]).kv_tiers == ("kv-bf16",)


@pytest.mark.parametrize(("options", "field", "words"), [
    ({"strategy": "galop"}, "strategy", "did you mean 'galloping'?"),
    ({"candidates": "powers"}, "candidates", "use one of all, group, pow2"),
    ({"max_chips": 99}, "max_chips", "the size of cluster tiny-cluster"),
    ({"group_size": 0}, "group_size", "a whole number >= 1"),
    ({"cached_fraction": 1.0}, "cached_fraction", "0 <= F < 1"),
    ({"kv_handoff": "later"}, "kv_handoff", "off, after, streamed"),
    ({"objective": "money"}, "objective", "chips, tokens-per-chip, cost, power"),
    ({"batch": 0}, "batch", "or 'auto'"),
    ({"decode_tp": 3}, "tp", "divide the model's 4 attention heads"),
    ({"prefill_tp": 32}, "prefill_tp", "max_chips = 16"),
    ({"kv_tiers": ""}, "kv_tiers", "a list of KV tiers"),
    ({"tpot_max": "20"}, "tpot_max", "write the unit: 20ms"),
    ({"memory_headroom": 0}, "memory_headroom", "a fraction > 0"),
    ({"prefill_ring": "both"}, "prefill_ring", "pass-kv, pass-q, all-gather, auto"),
])
def test_a_bad_search_option_is_one_error_naming_its_field(tiny: dict[str, str],
                                                           options: dict, field: str,
                                                           words: str) -> None:
    with pytest.raises(UserInputError) as info:
        api.solve_request(tiny["model"], tiny["chip"], "3K", cluster=tiny["cluster"],
                          **options)
    assert info.value.field == field and words in str(info.value)


def test_solve_and_sweep_answer_as_the_command_line_does(tiny: dict[str, str]) -> None:
    options = {"max_chips": 8, "kv_tiers": "kv-bf16,kv-fp8", "batch": "auto"}
    run = run_cli(["solve", *flags(tiny), "--context", "3000", "--max-chips", "8",
                   "--kv-tiers", "kv-bf16,kv-fp8", "--batch", "auto", "--json", "--no-store"])
    assert run.code == 0, run.err
    solved = api.solve(tiny["model"], tiny["chip"], 3000, cluster=tiny["cluster"], **options)
    got = solved.to_dict()
    want = cli_json(run.out)
    assert got == {k: v for k, v in want.items() if k in got} and got["feasible"]
    run = run_cli(["sweep", *flags(tiny), "--contexts", "1K,3000", "--max-chips", "8",
                   "--backend", "serial", "--json", "--no-store"])
    assert run.code == 0, run.err
    swept = api.sweep(tiny["model"], tiny["chip"], "1K,3000", cluster=tiny["cluster"],
                      max_chips=8)
    want = cli_json(run.out)
    assert [p.to_dict()["total_chips"] for p in swept.points] == \
        [p["total_chips"] for p in want["points"]]
    assert swept.points[1].to_dict() == {k: v for k, v in want["points"][1].items()
                                         if k in swept.points[1].to_dict()}


def test_eval_cache_takes_a_cache_or_a_store_not_both(tmp_path: Path) -> None:
    cache = EvalCache()
    assert api.eval_cache(None, cache) is cache
    assert isinstance(api.eval_cache(), EvalCache)
    with pytest.raises(UserInputError, match="pass either cache= or store="):
        api.eval_cache(tmp_path / "s.sqlite", cache)


def test_sweep_outputs_are_checked_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(UserInputError):
        api.check_sweep_outputs(out=tmp_path / "x.txt")
    with pytest.raises(UserInputError):
        api.check_sweep_outputs(plot=tmp_path / "missing" / "p.png")
    api.check_sweep_outputs(out=tmp_path / "x.csv", plot=tmp_path / "p.svg")
