"""Every command's contract through the console entry point: exit 0 with its table on stdout,
or its JSON (parseable, with the keys the docs name) under --json; nothing but warnings on
stderr; a user mistake is one 'error:' line on stderr, exit 2, nothing on stdout and no
traceback (tests.helpers.cli.check_contract)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.cli import check_contract, run_cli
from tests.helpers.inputs import study_data, write_yaml


def _run(argv: list[str]) -> tuple[str, str]:
    r = run_cli(argv)
    check_contract(r)
    assert r.code == 0, r.err
    return r.out, r.err


def _both(argv: list[str]) -> tuple[str, dict[str, object]]:
    """The table and the JSON of one command; stderr empty for both (no warning here)."""
    table, err = _run(argv)
    assert err == "", err
    with pytest.raises(ValueError):
        json.loads(table)
    out, err = _run([*argv, "--json"])
    assert err == "", err
    return table, json.loads(out)


def test_eval(tiny: list[str]) -> None:
    table, data = _both(["eval", *tiny, "--context", "2K", "--phase", "decode", "--cp", "2",
                         "--no-store"])
    assert table.startswith("tiny on h100-sxm (tiny-cluster), decode, S = 2,048")
    for label in ("layout", "TPOT", "memory per chip", "CP comm", "critical path per layer"):
        assert label in table, label
    assert {"tpot_s", "memory", "comm", "breakdown", "warnings"} <= set(data)
    assert data["tpot_s"] > 0 and data["warnings"] == []


def test_solve(search: list[str]) -> None:
    table, data = _both(["solve", *search, "--context", "2K"])
    first = table.splitlines()[0]
    assert first.startswith("tiny on h100-sxm (tiny-cluster), S = 2K (2,048 tokens): N* = ")
    for part in ("Per KV tier", "Search path", "prefill pool", "decode pool", "bound by"):
        assert part in table, part
    assert {"total_chips", "prefill", "decode", "tiers", "candidates", "sla"} <= set(data)
    assert f"N* = {data['total_chips']} chip" in first


def test_solve_of_a_study_of_several_contexts(tiny_files: dict[str, Path]) -> None:
    table, data = _both(["solve", "--config", str(tiny_files["study"]), "--no-store"])
    assert "N*(S)" in table and len(data["points"]) == 2   # type: ignore[arg-type]
    brief, _ = _run(["solve", "--config", str(tiny_files["study"]), "--no-store", "--brief"])
    assert "N*(S)" not in brief and brief.count(": N* = ") == 2


def test_sweep(search: list[str]) -> None:
    table, data = _both(["sweep", *search, "--context", "1K,2K", "--backend", "serial"])
    assert table.startswith("N*(S): tiny on h100-sxm")
    assert data["contexts"] == [1024, 2048] and len(data["points"]) == 2   # type: ignore


def test_capacity(search: list[str]) -> None:
    table, data = _both(["capacity", *search, "--context", "2K", "--rate", "1/s",
                         "--requests", "100", "--output-tokens", "20"])
    assert table.startswith("tiny on h100-sxm (tiny-cluster): pools for the traffic")
    assert "Pools per arrival rate" in table and "1/s" in table
    assert {"points", "prefill_instance", "decode_instance", "solve"} <= set(data)


def test_sensitivity(search: list[str]) -> None:
    table, data = _both(["sensitivity", *search, "--context", "2K", "--figures",
                         "chip.memory_bandwidth", "--steps", "-10%,+10%"])
    assert table.startswith("What the answer hinges on: tiny on h100-sxm")
    assert [f["figure"] for f in data["figures"]] == ["chip.memory_bandwidth"]  # type: ignore


def test_validate() -> None:
    case = "meta-cp-405b-ttit-cp1xtp8-8k"
    table, data = _both(["validate", "--case", case])
    assert case in table and "all rows:" in table
    assert [c["name"] for c in data["cases"]] == [case]   # type: ignore[index]


def test_report(search: list[str], tmp_path: Path) -> None:
    out, err = _run(["report", *search, "--context", "2K", "--out", str(tmp_path / "r.html")])
    assert err == "" and out.startswith("report (solve): ")
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


def test_presets() -> None:
    table, data = _both(["presets"])
    assert "Chips" in table and "sg2262" in table
    assert {"chips", "clusters", "models"} == set(data)


def test_schema_and_version() -> None:
    out, _ = _run(["schema"])
    assert json.loads(out)["title"]
    out, _ = _run(["version"])
    assert out.strip()


def test_store(search: list[str], tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite")
    _run(["eval", *search[:6], "--context", "2K", "--phase", "decode", "--cp", "1",
          "--store", store])   # search[:6]: the tiny model's flags
    table, data = _both(["store", "list", "--store", store])
    assert store in " ".join(table.split()) and data["results"] == 1
    out, _ = _run(["store", "export", "--store", store])
    assert len(out.splitlines()) == 1 and json.loads(out)["result"]["phase"] == "decode"


# --------------------------------------------------------------------------------- errors


# "TINY": the tiny model's flags; "SEARCH": those and a small search (tests/cli/conftest.py)
@pytest.mark.parametrize(("argv", "says"), [
    (["eval", "--chip", "h100-sxm", "--context", "2K", "--phase", "decode", "--cp", "1"],
     "error: --model = None"),
    (["eval", "TINY", "--context", "2K", "--phase", "middle", "--cp", "1"], "phase"),
    (["solve", "SEARCH", "--context", "2K", "--tpot-max", "20m"], "'m' is not a unit of time"),
    (["solve", "SEARCH", "--context", "2K,4K"], "ctxplan sweep --context 2K,4K"),
    (["solve", "SEARCH", "--context", "2K", "--strategy", "bisect"],
     "error: strategy = 'bisect'"),
    (["sweep", "SEARCH", "--context", "1K", "--backend", "gpu"], "error: backend = 'gpu'"),
    (["capacity", "SEARCH", "--context", "2K", "--rate", "1/s", "--batch", "4"],
     "capacity does not take a fixed batch"),
    (["capacity", "SEARCH", "--context", "2K", "--rate", "1"], "a rate without a unit"),
    (["capacity", "SEARCH", "--context", "2K", "--rate", "1/s", "--output-tokens", "1"],
     "at least 2 output tokens"),
    (["sensitivity", "SEARCH", "--context", "2K", "--steps", "10"], "a step without %"),
    (["report", "SEARCH", "--context", "2K"], "error: --out = None"),
])
def test_a_mistake_is_one_line_and_exit_2(tiny: list[str], search: list[str], argv: list[str],
                                          says: str) -> None:
    full = [y for x in argv for y in ({"TINY": tiny, "SEARCH": search}.get(x) or [x])]
    r = run_cli(full)
    check_contract(r)
    assert r.code == 2 and says in r.err, r.err


@pytest.mark.parametrize(("argv", "says"), [
    (["validate", "--case", "no-such-case"], "no-such-case"),
    (["store", "export", "--store", "s.sqlite", "--format", "xml"], "error: format = 'xml'"),
    (["schema", "--kind", "nope"], "nope"),
    (["presets", "--json", "true"], "a flag takes no value"),
    (["solve", "--nonsense"], "--nonsense"),
])
def test_a_mistake_outside_a_study_is_one_line_too(argv: list[str], says: str,
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)   # nothing is written where the suite runs
    r = run_cli(argv)
    check_contract(r)
    assert r.code == 2 and says in r.err, r.err


def test_a_malformed_study_says_where(tmp_path: Path) -> None:
    bad = tmp_path / "s.yaml"
    bad.write_text("version: 2\nmodel: tiny\nsla:\n  tpot_max: [20ms\nchip: h100-sxm\n")
    r = run_cli(["solve", "--config", str(bad)])
    check_contract(r)
    assert r.code == 2 and "at line 5, column 5" in r.err, r.err


def test_stdout_holds_the_json_and_stderr_the_warnings(tiny_files: dict[str, Path]) -> None:
    """A warning (here: a chip on another chip's cluster) goes to stderr as one line; stdout
    is the JSON alone, which lists the same warning."""
    data = study_data()
    data["chip"] = "h200"        # the tiny cluster is built for h100-sxm
    study = write_yaml(tiny_files["study"].parent / "h200.yaml", data)
    r = run_cli(["solve", "--config", str(study), "--no-store", "--json"])
    check_contract(r)
    lines = r.err.strip().splitlines()
    assert r.code == 0 and lines and all(x.startswith("warning: ") for x in lines), r.err
    assert any("cluster = tiny-cluster: built for chip h100-sxm, not for h200" in x
               for x in lines)
    out = json.loads(r.out)
    warned = {w for p in out["points"] for w in p["warnings"]}
    assert {x.removeprefix("warning: ") for x in lines} <= warned
