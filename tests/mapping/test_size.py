"""The graph-size estimate the host memory budget is checked against (mapping/size.py): never
below the graph it estimates, and within a small factor of it for the prefill graphs that grow
large."""

from __future__ import annotations

import pytest

from ctxplan import api
from ctxplan.evaluate import build_graph
from ctxplan.mapping.size import estimated_tasks

CASES = [
    # model, chip, S, phase, cp, tp, chunk
    ("deepseek-v3", "sg2262", "1M", "prefill", 16, 1, "off"),     # MLA + MoE EP
    ("deepseek-v3", "sg2262", "1M", "prefill", 8, 1, 65536),      # chunked
    ("deepseek-v3", "h200", "128K", "prefill", 4, 8, "off"),      # TP
    ("llama3.1-70b", "h100-sxm", "128K", "prefill", 4, 8, "off"),  # dense GQA
    ("qwen3-235b-a22b", "h100-sxm", "128K", "prefill", 4, 4, "off"),
    ("gpt-oss-120b", "h100-sxm", "128K", "prefill", 8, 1, "off"),  # windows
    ("qwen3-next-80b-a3b", "h100-sxm", "64K", "prefill", 4, 2, "off"),  # linear attention
    ("deepseek-v3", "sg2262", "1M", "decode", 16, 1, "off"),
    ("llama3.1-70b", "h100-sxm", "128K", "decode", 4, 8, "off"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[3]}-cp{c[4]}-tp{c[5]}-{c[6]}")
def test_the_estimate_is_never_below_the_graph(case):
    model, chip, S, phase, cp, tp, chunk = case
    cfg = api.eval_config(model, chip, S, phase, cp, tp=tp, prefill_chunk=chunk)
    real = build_graph(cfg).n_tasks
    est = estimated_tasks(cfg.model, cfg.layout())
    assert est >= real
    if phase == "prefill" and model.startswith(("deepseek", "qwen3-235b")):
        assert est <= 2 * real   # the ring and the all-to-all the estimate counts dominate


def test_a_point_over_the_budget_is_not_built_and_says_why():
    cfg = api.eval_config("deepseek-v3", "sg2262", "1M", "prefill", 64,
                          host_memory_budget="10MB")
    got = api.evaluate("deepseek-v3", "sg2262", "1M", "prefill", 64, host_memory_budget="10MB")
    assert not got.simulated and got.latency_s is None and got.tasks == 0
    assert got.reason.startswith("too large to simulate here")
    assert "--host-memory-budget" in got.reason
    assert cfg.key() == api.eval_config("deepseek-v3", "sg2262", "1M", "prefill", 64).key()


def test_a_refusal_is_never_stored_so_a_larger_budget_simulates_it():
    from ctxplan.solve.cache import EvalCache

    cache = EvalCache()
    small = api.eval_config("llama3.1-8b", "h100-sxm", "32K", "prefill", 4,
                            host_memory_budget="1kB")
    refused, _ = cache.evaluate(small)
    assert not refused.simulated and len(cache.store) == 0
    large = api.eval_config("llama3.1-8b", "h100-sxm", "32K", "prefill", 4)
    done, hit = cache.evaluate(large)
    assert done.simulated and not hit and len(cache.store) == 1


def test_a_solve_says_which_points_it_skipped():
    r = api.solve("llama3.1-8b", "h100-sxm", "128K", ttft_max="100ms", max_chips=64,
                  prefill_tp=1, host_memory_budget="3MB")
    skipped = [c for c in r.candidates if c.why.startswith("too large to simulate here")]
    assert skipped
    from ctxplan.report.view import solve as view

    assert "too large to simulate here" in view.search_fact(r.to_dict())


@pytest.mark.parametrize("value", ["lots", "-1GB", "2", "0GB"])
def test_a_bad_budget_is_one_line_and_exit_2(value):
    from tests.helpers.cli import run_cli

    r = run_cli(["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "8K",
                 "--phase", "decode", "--cp", "1", "--host-memory-budget", value])
    assert r.code == 2 and "host_memory_budget" in r.err and "Traceback" not in r.err


def test_a_pool_with_every_graph_over_the_budget_blames_the_budget():
    from ctxplan.report.view import solve as view

    r = api.solve("llama3.1-8b", "h100-sxm", "32K", max_chips=8, host_memory_budget="1kB")
    assert not r.feasible
    text = view.phase_miss(r.to_dict(), "decode")
    assert text == ("no Nd was simulated: those that fit in memory are too large to simulate "
                    "here (raise --host-memory-budget)")
