"""What a new user meets on a fresh clone (issue 21, "Tried as a new user would"): each item
of the list, as the command line shows it."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from ctxplan import api
from ctxplan.report import terminal
from ctxplan.report.view import solve as solve_view
from ctxplan.report.view import sweep as sweep_view
from tests.helpers.cli import check_contract, run_cli
from tests.helpers.inputs import TINY_MODEL, write_yaml

REPO = Path(__file__).resolve().parents[2]


def _ok(argv: list[str]) -> str:
    r = run_cli(argv)
    check_contract(r)
    assert r.code == 0, r.err
    return r.out


def _refused(argv: list[str]) -> str:
    r = run_cli(argv)
    check_contract(r)
    assert r.code == 2, r.out
    return r.err


# ------------------------------------------------------------------ the answer comes first


def test_a_solve_begins_with_the_answer(search: list[str]) -> None:
    out = _ok(["solve", *search, "--context", "2K"])
    lines = out.splitlines()
    head = lines[0]
    assert re.search(r": N\* = \d+ chips?$", head), head
    facts = [line.strip() for line in lines[1:12] if re.match(r"  \S", line)]
    labels = [f.split("  ")[0] for f in facts]
    assert labels[:6] == ["N*", "prefill pool", "decode pool", "KV tier", "bound by", "SLA"]
    assert "TTFT" in facts[1] and "TPOT" in facts[2]
    assert out.index("bound by") < out.index("Per KV tier") < out.index("Search path")


def test_brief_prints_the_answer_alone(search: list[str]) -> None:
    brief = _ok(["solve", *search, "--context", "2K", "--brief"])
    full = _ok(["solve", *search, "--context", "2K"])
    assert len(brief.splitlines()) <= 10
    assert "Search path" not in brief and "Per KV tier" not in brief
    assert full.startswith(brief.split("\n  SLA")[0])      # the same answer, then the detail


def test_the_infeasible_reason_is_never_cut(search: list[str],
                                            tiny_files: dict[str, Path]) -> None:
    data = api.solve(str(tiny_files["model"]), "h100-sxm", "2K", tpot_max="1us", max_chips=4,
                     prefill_tp=1, decode_tp=1, store=False).to_dict()
    answer = solve_view.answer(data)
    words = {w for f in answer.facts for w in f.value.split()} | set(answer.title.split())
    for width in (40, 57, 80, 123):
        out = io.StringIO()
        Console(file=out, width=width, color_system=None).print(terminal.answer(answer))
        text = out.getvalue()
        assert all(len(line) <= width for line in text.splitlines()), width
        assert words <= set(text.split()), sorted(words - set(text.split()))[:5]
    assert answer.title.endswith("INFEASIBLE (no plan of up to 4 chips per pool meets the SLA)")
    out = _ok(["solve", *search, "--context", "2K", "--tpot-max", "1us", "--brief"])
    assert "no Nd meets TPOT <= 1.000 us: the fastest tried is" in " ".join(out.split())


def test_batch_auto_says_what_ended_the_batch(tiny_files: dict[str, Path]) -> None:
    """The pool's batch stops at the TPOT target, or at memory: the answer says which."""
    long = api.solve("llama3.1-70b", "h100-sxm", "128K", tpot_max="50ms", batch="auto",
                     kv_tiers="kv-fp8", max_chips=8, store=False).to_dict()
    tier = solve_view.best_tier(long)
    assert tier is not None and tier["decode"]["batch_search"]["bound_by"] == "capacity"
    assert "(--batch auto: the largest that fits in memory; the TPOT target would allow more)" \
        in solve_view.answer(long).pairs()[2][1]
    short = api.solve(str(tiny_files["model"]), "h100-sxm", "2K", tpot_max="1ms", batch="auto",
                      kv_tiers="kv-bf16", max_chips=2, prefill_tp=1, decode_tp=1,
                      store=False).to_dict()
    assert solve_view.best_tier(short)["decode"]["batch_search"]["bound_by"] == "tpot"  # type: ignore[index]
    assert "(--batch auto: the largest that meets the TPOT target)" in \
        solve_view.answer(short).pairs()[2][1]


def _tier(name: str, chips: int | None, rate: float = 100.0, ttft: float = 1.0) -> dict[str, Any]:
    feasible = chips is not None
    return {"kv_tier": name, "feasible": feasible, "total_chips": chips, "cut_reason": None,
            "tokens_per_s_per_chip": None if not feasible else rate / chips,
            "prefill": {"answer": {"ttft_s": ttft} if feasible else None},
            "decode": {"answer": {"tps_per_batch": rate} if feasible else None}}


@pytest.mark.parametrize(("tiers", "says"), [
    ([_tier("a", 4), _tier("b", 5)], "a: the fewest chips (b: 5 chips)"),
    ([_tier("a", 4, rate=120.0), _tier("b", 4)],
     "a: b needs the same 4 chips (a KV tier changes only the KV cache's bytes, which need not "
     "move a pool's N); a decodes faster (120 against 100 tokens/s)"),
    ([_tier("a", 4, ttft=0.5), _tier("b", 4)], "a prefills faster (TTFT 500.000 ms against "
                                               "1.000 s)"),
    ([_tier("a", 4), _tier("b", 4)], "the same TPOT and TTFT (where attention is bound by its "
                                     "FLOPs, fewer KV bytes do not shorten it): the first tier "
                                     "listed is kept"),
    ([_tier("a", 4), _tier("b", None)], "a: the fewest chips (b: infeasible)"),
])
def test_the_chosen_tier_is_explained_against_the_others(tiers: list[dict[str, Any]],
                                                         says: str) -> None:
    s = {"kv_tier": "a", "tiers": tiers, "total_chips": 4, "objective": "chips"}
    assert says in solve_view.tier_choice(s)


def test_identical_tiers_are_explained_by_a_real_solve() -> None:
    # DeepSeek-V3 at 512K on SG2262: both MLA tiers give the same plan to the nanosecond.
    s = api.solve("deepseek-v3", "sg2262", "512K", store=False).to_dict()
    a, b = s["tiers"]
    if a["total_chips"] != b["total_chips"]:
        pytest.skip("the tiers no longer tie here")
    assert "need the same" in solve_view.tier_choice(s) or "needs the same" in \
        solve_view.tier_choice(s)


def test_a_tier_flip_along_a_sweep_is_explained() -> None:
    def point(s: int, tier: str, chips: dict[str, int]) -> dict[str, Any]:
        return {"context_length": s, "feasible": True, "kv_tier": tier, "model": "m",
                "total_chips": chips[tier], "objective": "chips",
                "tiers": [_tier(name, n) for name, n in chips.items()]}

    curve = [point(8192, "a", {"a": 4, "b": 5}), point(32768, "b", {"a": 7, "b": 6}),
             point(131072, "b", {"a": 9, "b": 8})]
    assert sweep_view.tier_flips(curve) == [
        "32K: KV tier a -> b: the fewest chips (a: 7 chips)"]


def test_one_chip_is_one_chip(search: list[str]) -> None:
    out = _ok(["solve", *search, "--context", "1K", "--kv-tiers", "kv-bf16"])
    flat = " ".join(out.split())
    assert "1 chips" not in flat and "= 1 chip;" in flat


# ----------------------------------------------------------------- the options as typed


@pytest.mark.parametrize("command", ["eval", "solve", "sweep", "capacity", "sensitivity",
                                     "report"])
def test_context_is_spelt_one_way_and_both_spellings_work(command: str) -> None:
    help_text = _ok([command, "--help"])
    assert "--context " in help_text and "--contexts" not in help_text


@pytest.mark.parametrize("flag", ["--context", "--contexts"])
def test_each_spelling_is_accepted(search: list[str], flag: str) -> None:
    _ok(["solve", *search, flag, "1K", "--brief"])
    _ok(["sweep", *search, flag, "1K", "--backend", "serial"])
    _ok(["capacity", *search, flag, "1K", "--rate", "1/s", "--requests", "50",
         "--output-tokens", "4"])


def test_a_context_given_twice_is_refused(search: list[str]) -> None:
    err = _refused(["solve", *search, "--context", "1K", "--contexts", "2K"])
    assert "give --context once (--contexts is another spelling of it)" in err


def test_output_tokens_take_the_token_units(search: list[str]) -> None:
    data = json.loads(_ok(["capacity", *search, "--context", "1K", "--rate", "1/s",
                           "--requests", "50", "--output-tokens", "1K", "--json"]))
    assert data["output_tokens"] == 1024


def test_capacity_help_lists_only_what_it_takes(search: list[str]) -> None:
    text = _ok(["capacity", "--help"])
    options = re.findall(r"^\W*(--[a-z-]+)", text, re.M)   # the first flag of each row
    assert "--rate" in " ".join(text.split()) and "--tpot-max" in options
    assert "--batch" not in options and "--tps-reading" not in options
    err = _refused(["capacity", *search, "--context", "1K", "--rate", "1/s", "--tps-reading",
                    "per-batch"])
    assert "tps_reading" in err and "per-seq" in err
    _ok(["capacity", *search, "--context", "1K", "--rate", "1/s", "--requests", "50",
         "--output-tokens", "4", "--batch", "auto"])


def test_a_time_in_an_unknown_unit_says_which_units_are(search: list[str]) -> None:
    err = _refused(["solve", *search, "--context", "1K", "--tpot-max", "20m"])
    assert "'m' is not a unit of time" in err and "h, min, s, ms, us, ns" in err
    assert "20ms for milliseconds or 20min for minutes" in err


def test_a_context_list_to_solve_points_to_sweep(search: list[str]) -> None:
    err = _refused(["solve", *search, "--context", "8K,32K"])
    assert "a list of context lengths" in err and "run ctxplan sweep --context 8K,32K" in err


# ------------------------------------------------------------------------ files as given


def test_a_malformed_yaml_names_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "m.yaml"
    bad.write_text("name: m\nhidden_size: 64\n  vocab_size: 10\n")
    err = _refused(["solve", "--model", str(bad), "--chip", "h100-sxm", "--context", "1K"])
    assert "cannot parse: mapping values are not allowed here at line 3, column 13" in err


def test_a_config_json_lists_every_missing_field_at_once(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2,
                               "vocab_size": "many"}))
    err = _refused(["eval", "--model", str(cfg), "--chip", "h100-sxm", "--context", "1K",
                    "--phase", "decode", "--cp", "1"])
    for field in ("hidden_size", "num_attention_heads", "vocab_size"):
        assert field in err, field
    assert "3 problems" in err


def test_a_config_json_without_architectures_is_read_as_one(tmp_path: Path) -> None:
    hf = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256,
          "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512,
          "vocab_size": 1000}
    d = tmp_path / "my-model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(hf))
    out = _ok(["eval", "--model", str(d / "config.json"), "--chip", "h100-sxm", "--context",
               "1K", "--phase", "decode", "--cp", "1", "--no-store"])
    assert out.startswith("my-model on h100-sxm")
    # neither model_type nor architectures: a config.json still, and it says what to add
    (d / "config.json").write_text(json.dumps({k: v for k, v in hf.items()
                                               if k != "model_type"}))
    err = _refused(["eval", "--model", str(d), "--chip", "h100-sxm", "--context", "1K",
                    "--phase", "decode", "--cp", "1"])
    assert "model_type = None: required field missing" in err and "add 'name'" not in err
    # a multimodal config names its model_type in text_config only: a config.json too
    other = tmp_path / "vision.json"
    other.write_text(json.dumps({"text_config": {**hf}}))
    out = _ok(["eval", "--model", str(other), "--chip", "h100-sxm", "--context", "1K",
               "--phase", "decode", "--cp", "1", "--no-store"])
    assert out.startswith("vision on h100-sxm")


def test_a_chip_on_another_chips_cluster_is_warned_not_refused(tmp_path: Path) -> None:
    r = run_cli(["eval", "--model", str(write_yaml(tmp_path / "t.yaml", TINY_MODEL)), "--chip",
                 "h200", "--cluster", "hgx-h100-ib", "--context", "1K", "--phase", "decode",
                 "--cp", "1", "--no-store", "--json"])
    check_contract(r)
    assert r.code == 0
    assert r.err == ("warning: cluster = hgx-h100-ib: built for chip h100-sxm, not for h200 (its "
                     "own is hgx-h200-ib); planned on it as given: hgx-h100-ib's links and "
                     "groups with h200's compute and memory\n")
    assert json.loads(r.out)["warnings"] == [r.err.strip().removeprefix("warning: ")]
    # its own cluster, or a cluster built for it: not a word
    for argv in (["--chip", "h200"], ["--chip", "h100-sxm", "--cluster", "hgx-h100-ib"]):
        quiet = run_cli(["eval", "--model", str(tmp_path / "t.yaml"), *argv, "--context", "1K",
                         "--phase", "decode", "--cp", "1", "--no-store", "--json"])
        assert quiet.code == 0 and quiet.err == "", quiet.err


# ------------------------------------------------------------------ the same on every backend


def test_earlier_run_hits_do_not_depend_on_the_backend(search: list[str], tmp_path: Path
                                                       ) -> None:
    store = str(tmp_path / "s.sqlite")
    argv = ["sweep", *search[:-1], "--context", "1K,2K", "--store", store, "--json"]
    first = json.loads(_ok([*argv, "--backend", "serial"]))
    assert first["earlier_run_hits"] == 0 and first["sim_calls"] > 0
    outs = [_ok([*argv, "--backend", backend, "--workers", "2"])
            for backend in ("serial", "process")]
    assert outs[0] == outs[1]
    again = json.loads(outs[0])
    assert again["earlier_run_hits"] == again["cache_hits"] == first["sim_calls"]


# ---------------------------------------------------------------------------- the docs


def test_the_readme_says_how_to_set_up_and_what_the_suite_takes() -> None:
    text = " ".join((REPO / "README.md").read_text().split())
    for needed in ("python3 -m venv .venv", "Python >= 3.11", "chromium", "minutes"):
        assert needed in text, needed


def test_no_doc_points_at_the_shared_folder() -> None:
    """Users do not have the project's shared folder (its spec and reference notes): the docs,
    the code, the presets and the validation rows carry the figures they use, with their
    published sources."""
    pointer = re.compile(r"shared/|\breference/\w+\.md")
    files = [REPO / "README.md", *(p for top in ("docs", "src", "tests", "validation", "bench")
                                   for p in sorted((REPO / top).rglob("*"))
                                   if p.suffix in (".md", ".py", ".yaml", ".j2")
                                   and p.name != "test_newcomer.py")]
    found = [f"{p.relative_to(REPO)}:{i}" for p in files
             for i, line in enumerate(p.read_text(errors="ignore").splitlines(), 1)
             if pointer.search(line)]
    assert not found, found


def test_a_skipped_browser_test_is_said_at_the_end_of_the_run() -> None:
    from tests.helpers.browser import skip_notice

    class Report:
        nodeid = "tests/report/test_report_browser.py"
        longrepr = ("f", 1, "Skipped: report browser test skipped: no Chromium: install it")

    assert skip_notice([Report()]) == ("NOTE: the report's browser test did not run (no "
                                       "Chromium: install it); it runs wherever Chromium is "
                                       "installed, and under CI it must")
    assert skip_notice([]) is None
