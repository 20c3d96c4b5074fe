"""The terminal at 80 columns and the messages a new user meets (issue 17, "Why").

Each test renders what the CLI prints at 80 columns (rich's console, as the CLI uses it) or runs
the CLI, and checks the item of the issue it names.
"""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console, RenderableType

from ctxplan import api
from ctxplan.config.units import format_bytes
from ctxplan.report import terminal
from ctxplan.report.presets import presets_data, presets_tables
from ctxplan.report.screens import solve_screen, sweep_screen
from ctxplan.report.view import solve as solve_view
from tests.helpers.cli import run_cli
from tests.helpers.inputs import study_data, write_yaml

WIDTH = 80


def render(*renderables: object) -> str:
    out = io.StringIO()
    console = Console(file=out, width=WIDTH, highlight=False, color_system=None)
    for r in renderables:
        console.print(r)
    return out.getvalue()


def assert_fits(text: str) -> None:
    too_wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not too_wide, too_wide
    assert "…" not in text, "a cell was cut"


@pytest.fixture(scope="module")
def solved() -> api.SolveResult:
    # TP searched (the TP table shows), two KV tiers, a capacity wall at several N.
    return api.solve("deepseek-v3", "sg2262", "128K", store=False)


def test_presets_at_80_columns_never_cut_a_name() -> None:
    data = presets_data()
    text = render(*presets_tables(data))
    assert_fits(text)
    lines = text.splitlines()
    for kind in ("chips", "clusters", "models"):
        for item in data[kind]:
            assert any(re.search(rf"(^|\s){re.escape(item['name'])}(\s|$)", line)
                       for line in lines), item["name"]
    for m in data["models"]:
        for tier in m["kv_tiers"]:
            assert tier in text, tier          # tier names are names too: never folded


def tables(r: api.SolveResult) -> list[RenderableType]:
    """The terminal's tables of a solve: per KV tier, the TP degrees, the search path."""
    return [terminal.table(v) for v in solve_view.tables(r.to_dict(), "x", grouped=True)]


def test_solve_tables_fit_80_columns(solved: api.SolveResult) -> None:
    assert len(tables(solved)) == 3       # the TP table is there
    text = render(*solve_screen(solved.to_dict()))
    assert_fits(text)
    for tier in solved.tiers:
        assert tier.kv_tier in text


def test_answer_wraps_between_words_never_inside(solved: api.SolveResult) -> None:
    answer = solve_view.answer(solved.to_dict())
    text = render(terminal.answer(answer))
    assert_fits(text)
    words = text.split()
    for fact in answer.facts:
        for word in fact.value.split():
            assert word in words, word
    chunked = (solved.best.prefill.prefill_chunk or {}).get("chunks", 1) > 1
    # a prefill that takes chunks to fit says so right after the pools (issue 22)
    assert [f.label for f in answer.facts[:6 + chunked]] == [
        "N*", "prefill pool", "decode pool", *(["prefill chunks"] if chunked else []),
        "KV tier", "bound by", "SLA"]
    assert answer.facts[0].value.startswith(f"{solved.total_chips} chips")
    # wide enough, each fact is one line
    wide = io.StringIO()
    Console(file=wide, width=10_000, color_system=None).print(terminal.answer(answer))
    assert len(wide.getvalue().splitlines()) == 1 + len(answer.facts)


def test_legend_names_a_fallback_only_when_one_happened(solved: api.SolveResult) -> None:
    assert not solved.fallback
    text = render(tables(solved)[0])
    assert "fell back" not in text
    scanned = api.solve("deepseek-v3", "sg2262", "128K", store=False, strategy="linear")
    assert "fell back" not in render(tables(scanned)[0])


def test_header_says_the_search_in_words(solved: api.SolveResult) -> None:
    text = render(tables(solved)[0])
    assert "'all' N" not in text and "galloping," not in text
    assert "galloping search over every N up to 1,024 chips per pool" in " ".join(text.split())


def test_search_path_keeps_n_and_tp_apart(solved: api.SolveResult) -> None:
    text = render(tables(solved)[-1])
    header = next(line for line in text.splitlines() if line.lstrip().startswith("phase"))
    assert re.search(r"\bN\b", header) and re.search(r"\bTP\b", header)
    assert not re.search(r"\d+x\d+", text), "N x TP written as a product in the N column"


def test_sweep_table_fits_80_columns() -> None:
    swept = api.sweep("deepseek-v3", "sg2262", "8K,128K", store=False)
    assert_fits(render(*sweep_screen(swept.to_dict())))


def test_a_sweep_of_several_models_fits_80_columns() -> None:
    # the model column, the searched batch and rates in the thousands: nothing cut
    swept = api.sweep("llama3.1-8b,qwen2.5-7b-1m", "h100-sxm", "8K,32K", max_chips=8,
                      batch="auto", store=False)
    text = render(*sweep_screen(swept.to_dict()))
    assert_fits(text)
    assert "e+0" not in text                       # 1,683 tokens/s, not 1.68e+03
    for m in ("llama3.1-8b", "qwen2.5-7b-1m"):
        assert text.count(m) >= 2, m


def test_help_shows_flags_without_a_value_and_a_value_is_refused_clearly() -> None:
    code, out, _ = run_cli(["solve", "--help"])
    assert code == 0 and "<bool>" not in out
    code, _, err = run_cli(["solve", "--model", "llama3.1-8b", "--chip", "h100-sxm",
                            "--context", "8K", "--json", "true"])
    assert code == 2
    assert err.startswith("error: --json = 'true': a flag takes no value. Fix: write --json "
                          "alone"), err


@pytest.mark.parametrize("argv, hint", [
    (["--model", "deepseek_v3", "--chip", "sg2262"], "did you mean 'deepseek-v3'?"),
    (["--model", "deepseek-v3", "--chip", "sgg2262"], "did you mean 'sg2262'?"),
    (["--model", "llama3.1-8b", "--chip", "h100-sxm", "--strategy", "gallop"],
     "did you mean 'galloping'?"),
    (["--model", "llama3.1-8b", "--chip", "h100-sxm", "--ffn-weights", "fp9"],
     "did you mean 'fp8'?"),
    (["--model", "llama3.1-8b", "--chip", "h100-sxm", "--kv-tiers", "kv_fp8"],
     "did you mean 'kv-fp8'?"),
])
def test_did_you_mean(argv: list[str], hint: str) -> None:
    code, _, err = run_cli(["solve", *argv, "--context", "8K", "--no-store"])
    assert code == 2 and hint in err, err


def test_a_misspelt_study_key_is_renamed_not_dropped(tmp_path) -> None:
    data = study_data()
    data["sla"] = {"tpot_mx": "30ms"}
    code, _, err = run_cli(["solve", "--config", str(write_yaml(tmp_path / "s.yaml", data))])
    assert code == 2
    assert "sla.tpot_mx" in err and "rename it to 'sla.tpot_max'" in err
    assert "remove it" not in err and "Fix: remove" not in err


def test_a_missing_model_file_says_no_such_file(tmp_path) -> None:
    missing = str(tmp_path / "missing.json")
    code, _, err = run_cli(["solve", "--model", missing, "--chip", "sg2262", "--context", "8K"])
    assert code == 2 and "no such file" in err and "unknown model" not in err, err
    code, _, chip_err = run_cli(["solve", "--model", "deepseek-v3", "--chip",
                                 str(tmp_path / "missing.yaml"), "--context", "8K"])
    assert "no such file" in chip_err


@pytest.mark.parametrize("n, text", [(0, "0 B"), (512, "512 B"), (3_100, "3.1 KB"),
                                     (528_400, "528.4 KB"), (9.2e9, "9.2 GB")])
def test_bytes_in_human_units(n: float, text: str) -> None:
    assert format_bytes(n) == text


def test_cp_comm_of_kilobytes_is_not_zero_gb() -> None:
    code, out, err = run_cli(["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm",
                              "--context", "8K", "--phase", "decode", "--cp", "2",
                              "--no-store"])
    assert code == 0, err
    comm = " ".join(out.split("CP comm", 1)[1].split("simulation")[0].split())
    assert "0.0 GB" not in comm and "KB simulated" in comm, comm


def test_the_store_path_and_earlier_hits_are_on_screen(tmp_path) -> None:
    store = str(tmp_path / "results.sqlite")
    argv = ["solve", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "8K",
            "--store", store]
    code, first, err = run_cli(argv)
    assert code == 0, err
    flat = " ".join(first.split())
    assert f"result store: {store}" in flat and "no result from an earlier run reused" in flat
    code, second, _ = run_cli(argv)
    flat = " ".join(second.split())
    assert re.search(r"\d+ results from earlier runs reused", flat)
    assert re.search(r"\d+ cache hits \(\d+ from earlier runs\)", flat)
    code, listed, _ = run_cli(["store", "list", "--store", store])
    assert store in " ".join(listed.split())
    code, out, _ = run_cli([*argv, "--json"])
    import json
    data = json.loads(out)
    assert data["earlier_run_hits"] == data["cache_hits"] > 0
