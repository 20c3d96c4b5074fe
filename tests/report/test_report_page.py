"""``ctxplan report``: the HTML page from a study, from the solve flags and from saved results.

What the page promises without a browser: it is self-contained (no URL is loaded), the same
inputs give the same bytes, a study rendered now and its saved --json render the same page,
user text is escaped, and the validation section says which rows cover the chip. The browser
test (test_report_browser.py) checks what a person sees.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ctxplan import api
from ctxplan.config.units import format_duration
from ctxplan.errors import UserInputError
from ctxplan.report.page.view import kind_of
from ctxplan.validate import default_cases_dir
from tests.helpers.cli import run_cli
from tests.helpers.inputs import TINY_MODEL
from tests.report.reports import (
    capacity_report,
    solve_report,
    sweep_report,
    tiny_study,
    write_json,
)

# A URL the page would fetch: src / href attributes, CSS url(), @import.
FETCHES = re.compile(r"""(?:\bsrc|\bhref)\s*=\s*["'](?!#)|url\(|@import""", re.I)


def _source_free(html: str) -> str:
    """The page without the line saying where the result came from."""
    return re.sub(r'<p class="meta">From .*?</p>', "", html)


def test_solve_report_is_self_contained_and_holds_the_answer(tmp_path: Path) -> None:
    report = solve_report(tmp_path)
    html = report.path.read_text()
    assert report.kind == "solve"
    assert not FETCHES.search(html), FETCHES.search(html)
    assert "<script src" not in html and "<link" not in html
    d = report.data
    assert f"N* = {d['total_chips']} chips" in html
    assert format_duration(d["decode"]["tpot_s"]) in html
    assert format_duration(d["prefill"]["ttft_s"]) in html
    for section in ("answer-2K", "chart-nstar-2K", "tiers-2K", "chart-search-2K", "path-2K",
                    "figures-chip", "figures-cluster", "figures-model", "validation"):
        assert f'id="{section}"' in html, section
    # one search-path row per candidate of the solve
    path = html.split('id="path-2K"')[1].split("</table>")[0]
    assert path.count("<tr") == 1 + len(d["candidates"])


def test_same_inputs_same_bytes(tmp_path: Path) -> None:
    study = tiny_study(tmp_path)
    a = api.report_study(study, tmp_path / "a.html", store=False).path.read_bytes()
    b = api.report_study(study, tmp_path / "b.html", store=False).path.read_bytes()
    assert a == b


@pytest.mark.parametrize("make", [solve_report, sweep_report, capacity_report])
def test_a_saved_result_renders_the_page_of_the_study(tmp_path: Path, make) -> None:
    fresh = make(tmp_path)
    saved = write_json(tmp_path / "result.json", fresh.data)
    # The study's model and cluster are inline definitions, not presets: name them.
    again = api.report_results(saved, tmp_path / "again.html", chip="h100-sxm",
                               model=api.load_study(tmp_path / "study.yaml").model,
                               cluster=api.load_study(tmp_path / "study.yaml").cluster)
    assert again.kind == fresh.kind
    assert _source_free(again.path.read_text()) == _source_free(fresh.path.read_text())


def test_kind_of_each_command_json(tmp_path: Path) -> None:
    assert kind_of(solve_report(tmp_path).data) == "solve"
    assert kind_of(sweep_report(tmp_path).data) == "sweep"
    assert kind_of(capacity_report(tmp_path).data) == "capacity"
    with pytest.raises(ValueError):
        kind_of({"cases": []})


def test_sensitivity_is_drawn_when_computed(tmp_path: Path) -> None:
    report = solve_report(tmp_path, sensitivity=True)
    html = report.path.read_text()
    assert 'id="chart-tornado"' in html and 'id="sensitivity-table"' in html
    saved = write_json(tmp_path / "sens.json", {**report.data, "sensitivity": report.sensitivity})
    again = api.report_results(saved, tmp_path / "again.html", chip="h100-sxm",
                               model=api.load_study(tmp_path / "study.yaml").model,
                               cluster=api.load_study(tmp_path / "study.yaml").cluster)
    assert 'id="chart-tornado"' in again.path.read_text()
    alone = write_json(tmp_path / "alone.json", report.sensitivity or {})
    only = api.report_results(alone, tmp_path / "only.html", chip="h100-sxm",
                              model=api.load_study(tmp_path / "study.yaml").model,
                              cluster=api.load_study(tmp_path / "study.yaml").cluster)
    assert only.kind == "sensitivity"
    assert "holds the base plan only" in only.path.read_text()


def test_user_text_is_escaped(tmp_path: Path) -> None:
    model = {**TINY_MODEL, "name": "<b>tiny</b>&co"}
    study = tiny_study(tmp_path, model=model)
    html = api.report_study(study, tmp_path / "r.html", store=False).path.read_text()
    assert "<b>tiny" not in html
    assert "&lt;b&gt;tiny&lt;/b&gt;&amp;co" in html


def test_validation_says_when_no_row_covers_the_chip(tmp_path: Path) -> None:
    html = solve_report(tmp_path).path.read_text()
    assert "No validation row covers chip h100-sxm" in html


def test_validation_rows_of_the_chip_are_run(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    shutil.copy(default_cases_dir() / "meta-cp-405b-ttft-cp1xtp8-8k.yaml", cases)
    v = api.validation_for_chip(api.resolve_chip("h100-gt500"), cases)
    assert [c["name"] for c in v["cases"]] == ["meta-cp-405b-ttft-cp1xtp8-8k"]
    assert v["cases"][0]["simulated"] > 0
    assert api.validation_for_chip("sg2262", cases)["cases"] == []
    # A chip that only borrows the preset's name is not what the rows measured.
    other = api.resolve_chip("h100-sxm")
    from dataclasses import replace
    assert api.validation_for_chip(replace(other, name="h100-gt500"), cases)["cases"] == []


def test_a_result_naming_no_preset_says_so(tmp_path: Path) -> None:
    data = solve_report(tmp_path).data      # model "tiny", cluster "tiny-cluster": no presets
    saved = write_json(tmp_path / "r.json", data)
    html = api.report_results(saved, tmp_path / "r.html").path.read_text()
    assert "names model &#39;tiny&#39;, which is not a preset" in html
    assert "names cluster &#39;tiny-cluster&#39;, which is not a preset" in html
    assert 'id="figures-chip"' in html     # h100-sxm is a preset


def test_cli_report_from_each_source(tmp_path: Path) -> None:
    study = tiny_study(tmp_path)
    code, out, err = run_cli(["report", "--config", str(study), "--out",
                              str(tmp_path / "a.html"), "--no-store"])
    assert code == 0, err
    assert "report (solve)" in out and (tmp_path / "a.html").is_file()
    code, out, err = run_cli(["report", "--model", "llama3.1-8b", "--chip", "h100-sxm",
                              "--context", "8K", "--out", str(tmp_path / "b.html"),
                              "--no-store"])
    assert code == 0, err
    code, out, err = run_cli(["solve", "--model", "llama3.1-8b", "--chip", "h100-sxm",
                              "--context", "8K", "--json", "--no-store"])
    saved = tmp_path / "s.json"
    saved.write_text(out)
    code, out, err = run_cli(["report", "--from", str(saved), "--out", str(tmp_path / "c.html")])
    assert code == 0, err
    assert _source_free((tmp_path / "b.html").read_text()).replace(
        "solve report", "") == _source_free((tmp_path / "c.html").read_text()).replace(
        "solve report", "")


@pytest.mark.parametrize("argv, field", [
    (["report", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "8K"], "--out"),
    (["report", "--from", "x.json", "--out", "r.txt"], "out"),
    (["report", "--from", "missing.json", "--out", "r.html"], "from"),
    (["report", "--from", "x.json", "--out", "r.html", "--strategy", "scan"], "--strategy"),
])
def test_cli_report_refuses_bad_input(tmp_path: Path, monkeypatch, argv: list[str],
                                      field: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.json").write_text(json.dumps({"cases": []}))
    code, _out, err = run_cli(argv)
    assert code == 2 and err.startswith(f"error: {field} = "), err


def test_a_json_that_is_no_result_is_refused(tmp_path: Path) -> None:
    bad = write_json(tmp_path / "v.json", {"cases": [], "summary": {}})
    with pytest.raises(UserInputError, match="solve, sweep, capacity, sensitivity or pareto"):
        api.report_results(bad, tmp_path / "r.html")


def test_a_sweep_of_several_models_shows_each_curve_and_each_model(tmp_path: Path) -> None:
    # issue 15/16's multi-model sweep in the report: one N*(S) section per model, each point's
    # section named by its model, both models' figures, and every id on the page unique
    other = {**TINY_MODEL, "name": "tiny.wide", "hidden_size": 512}
    study = tiny_study(tmp_path, contexts=["1K", "4K"], model=[dict(TINY_MODEL), other])
    report = api.report_study(study, tmp_path / "two.html", store=False)
    html = report.path.read_text()
    assert report.data["models"] == ["tiny", "tiny.wide"]
    for section in ("nstar-sweep-tiny", "nstar-sweep-tiny-wide", "point-tiny-1K",
                    "point-tiny-wide-4K", "figures-model-tiny", "figures-model-tiny-wide"):
        assert f'id="{section}"' in html, section
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    assert "N*(S) on h100-sxm: tiny: 1K" in html and "| tiny.wide: 1K" in html
    # the saved --json renders the same page (the models named by the result itself)
    saved = write_json(tmp_path / "two.json", report.data)
    loaded = api.load_study(study)
    again = api.report_results(saved, tmp_path / "again.html", chip="h100-sxm",
                               model=list(loaded.models), cluster=loaded.cluster)
    assert _source_free(again.path.read_text()) == _source_free(html)
