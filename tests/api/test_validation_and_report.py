"""``api.validate`` and its figures (api/validation.py), and the review report (api/report.py),
against ``ctxplan validate`` and ``ctxplan report``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxplan import api
from ctxplan.errors import UserInputError
from tests.api.conftest import cli_json
from tests.helpers.cli import run_cli
from tests.helpers.inputs import study_data, write_yaml

CASE = "meta-cp-405b-ttft-cp1xtp8-8k"


def test_validate_one_case_as_the_command_line_does() -> None:
    report = api.validate(names=[CASE])
    run = run_cli(["validate", "--case", CASE, "--json"])
    assert run.code == 0, run.err
    assert json.loads(json.dumps(report.to_dict())) == cli_json(run.out)
    moved = api.validation_sensitivity(report, ["chip.memory_bandwidth"], 1.5)
    assert [m.figure for m in moved] == ["chip.memory_bandwidth"]
    rows = api.validation_for_chip(report.results[0].case.chip)
    assert rows["chip"] == report.results[0].case.chip and rows["total_cases"] >= 1
    with pytest.raises(UserInputError, match=r"^cases"):
        api.validate(Path("/no/such/dir"))


def test_a_report_from_a_study_and_from_its_saved_result(tmp_path: Path) -> None:
    data = study_data() | {"contexts": [3000], "max_chips": 4}
    study = write_yaml(tmp_path / "s.yaml", data)
    fresh = api.report_study(study, tmp_path / "r.html")
    assert fresh.kind == "solve" and fresh.path.read_text().startswith("<!DOCTYPE html>")
    saved = tmp_path / "solve.json"
    saved.write_text(json.dumps(fresh.data))
    again = api.report_results(saved, tmp_path / "again.html", chip="h100-sxm",
                               model=api.load_study(study).model,
                               cluster=api.load_study(study).cluster)
    assert again.kind == "solve" and again.data == fresh.data
    run = run_cli(["report", "--from", str(saved), "--out", str(tmp_path / "cli.html")])
    assert run.code == 0, run.err
    assert (tmp_path / "cli.html").read_text().startswith("<!DOCTYPE html>")
    with pytest.raises(UserInputError, match=r"^out"):
        api.report_study(study, tmp_path / "r.txt")
    with pytest.raises(UserInputError, match=r"^from"):
        api.report_results(tmp_path / "missing.json", tmp_path / "x.html")
    assert api.REPORT_SUFFIXES == (".html", ".htm") and isinstance(fresh, api.Report)
