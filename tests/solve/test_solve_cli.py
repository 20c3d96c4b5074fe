"""`ctxplan solve` end to end through the console entry point."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import run_cli

BASE = ["solve", "--model", "deepseek-v3", "--chip", "sg2262"]




def test_solve_json_1m() -> None:
    code, out, _ = run_cli([*BASE, "--context", "1M", "--json"])
    assert code == 0
    d = json.loads(out)
    assert d["feasible"] is True and d["context_length"] == 2**20
    assert d["total_chips"] == d["prefill"]["chips"] + d["decode"]["chips"]
    assert d["decode"]["tpot_s"] <= d["sla"]["tpot_max_s"] == 0.02
    assert d["kv_tier"] in {"mla-bf16", "mla-fp8"} and d["sim_calls"] <= 40


def test_solve_table_shows_the_answer_and_the_search_path() -> None:
    code, out, _ = run_cli([*BASE, "--context", "8K", "--max-chips", "32", "--strategy", "linear",
                         "--kv-tiers", "mla-fp8"])
    assert code == 0
    assert "N* =" in out and "Search path" in out and "memory" in out and "mla-fp8" in out


def test_infeasible_is_a_normal_answer() -> None:
    code, out, err = run_cli([*BASE, "--context", "8K", "--tpot-max", "1us", "--max-chips", "16",
                           "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["feasible"] is False and d["total_chips"] is None
    assert "TPOT <= 1.000 us" in d["infeasible_reason"]
    code, out, _ = run_cli([*BASE, "--context", "8K", "--tpot-max", "1us", "--max-chips", "16"])
    assert code == 0 and "INFEASIBLE" in out


@pytest.mark.parametrize(("args", "field"), [
    (["--context", "1M", "--strategy", "bisect"], "strategy"),
    (["--context", "1M", "--candidates", "odd"], "candidates"),
    (["--context", "1M", "--max-chips", "5000"], "max_chips"),
    (["--context", "1M", "--kv-tiers", "mla-int3"], "kv_tier"),
    (["--context", "1M", "--tps-reading", "per-token"], "tps_reading"),
    (["--context", "1M", "--tpot-max", "fast"], "tpot_max"),
    (["--context", "1M", "--decode-tp", "3"], "tp"),
])
def test_user_errors_exit_2_with_one_line(args: list[str], field: str) -> None:
    code, out, err = run_cli([*BASE, *args])
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field} = "), err
    assert out == ""
