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


@pytest.mark.parametrize(("args", "field", "fix"), [
    (["--tpot-max", "20"], "tpot_max", "20ms"),
    (["--tpot-max", "0.02"], "tpot_max", "0.02ms"),
    (["--ttft-max", "30"], "ttft_max", "30s"),
])
def test_a_time_without_a_unit_is_an_error_naming_the_fix(args: list[str], field: str,
                                                          fix: str) -> None:
    code, out, err = run_cli([*BASE, "--context", "8K", *args])
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field} = ")
    assert f"write the unit: {fix}" in lines[0] and "without a unit" in lines[0]


def test_a_bare_float_in_the_api_is_an_error() -> None:
    from ctxplan import api
    from ctxplan.errors import UserInputError

    with pytest.raises(UserInputError, match="20ms"):
        api.solve_request("llama3.1-8b", "h100-sxm", "8K", tpot_max=20)  # type: ignore[arg-type]
    with pytest.raises(UserInputError, match=r"0\.5s"):
        api.solve_request("llama3.1-8b", "h100-sxm", "8K", ttft_max=0.5)  # type: ignore[arg-type]
    assert api.solve_request("llama3.1-8b", "h100-sxm", "8K",
                             tpot_max="20ms").sla.tpot_max_s == pytest.approx(0.02)


def _flat(text: str) -> str:
    """Terminal output as one line: wrapped titles and answer lines joined."""
    return " ".join(text.split())


def test_ttft_not_constrained_is_said_in_the_answer_and_the_header() -> None:
    args = ["solve", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "8K",
            "--max-chips", "8", "--kv-tiers", "kv-bf16"]
    code, out, _ = run_cli(args)
    assert code == 0
    flat = _flat(out)
    assert "Per KV tier: TPOT <= 20.000 ms (per-seq), TTFT not constrained " in flat
    answer = flat[flat.index("N* ="):flat.index("Per KV tier")]   # the answer comes first
    assert "TTFT not constrained" in answer and "bound by prefill:" in answer
    code, out, _ = run_cli([*args, "--ttft-max", "1s"])
    assert code == 0 and "TTFT not constrained" not in _flat(out)
    assert "TTFT <= 1.000 s" in _flat(out)


def test_progress_reports_sub_problems_and_json_prints_nothing_else() -> None:
    from ctxplan import api

    seen: list[tuple[str, int, int]] = []
    r = api.solve("llama3.1-8b", "h100-sxm", "32K", max_chips=8, kv_tiers="kv-bf16",
                  ttft_max="2s", progress=lambda *a: seen.append(a))
    assert seen and all(0 <= done <= total for _, done, total in seen)
    assert any("simulating N =" in text for text, _, _ in seen)
    # One tier x (4 prefill + 4 decode TP degrees + the KV handoff's pair check).
    assert seen[-1][2] == 9 and any("KV handoff" in text for text, _, _ in seen)
    assert r.feasible
    code, out, err = run_cli([*BASE, "--context", "8K", "--json"])
    assert code == 0 and err == "" and json.loads(out)["feasible"]


def test_memory_headroom_moves_the_wall_and_is_in_the_json() -> None:
    from ctxplan import api

    full = api.solve("deepseek-v3", "sg2262", "1M", kv_tiers="mla-fp8", prefill_tp=1,
                     decode_tp=1)
    kept = api.solve("deepseek-v3", "sg2262", "1M", kv_tiers="mla-fp8", prefill_tp=1,
                     decode_tp=1, memory_headroom=0.8)
    assert full.best is not None and kept.best is not None
    for a, b in ((full.best.prefill, kept.best.prefill), (full.best.decode, kept.best.decode)):
        assert (b.n_cap or 0) > (a.n_cap or 0)
    usable = 4e9 + 0.8 * (128e9 - 4e9)   # SG2262: 128 GB, 4 GB reserve
    assert all(c.per_chip_bytes <= usable for c in kept.candidates if c.simulated)
    assert kept.to_dict()["search"]["memory_headroom"] == 0.8
    code, out, _ = run_cli(["eval", "--model", "deepseek-v3", "--chip", "sg2262", "--context",
                            "1M", "--phase", "decode", "--cp", "8", "--memory-headroom", "0.8",
                            "--json"])
    d = json.loads(out)
    assert code == 0 and d["memory"]["memory_headroom"] == 0.8 and d["simulated"] is False
    code, _, err = run_cli([*BASE, "--context", "8K", "--memory-headroom", "1.5"])
    assert code == 2 and err.startswith("error: memory_headroom = 1.5")
