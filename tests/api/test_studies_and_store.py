"""Study and point files (api/studies.py) and the result store (api/store.py), against the
command line run from the same files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxplan import api
from ctxplan.errors import UserInputError
from tests.api.conftest import cli_json
from tests.helpers.cli import run_cli
from tests.helpers.inputs import point_data, study_data, write_yaml


def test_a_point_file_evaluates_as_eval_config_does(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "p.yaml", point_data())
    point = api.load_point(path, flags={"batch": 2})
    assert point.batch == 2 and point.phase == "decode"
    result = api.evaluate_point(path)
    run = run_cli(["eval", "--config", str(path), "--json", "--no-store"])
    assert run.code == 0, run.err
    assert result.to_dict() == cli_json(run.out)
    assert api.evaluate_point(point).batch == 2


def test_a_study_file_solves_sweeps_and_moves_figures(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "s.yaml", study_data())
    study = api.load_study(path, sets=["max_chips=4"])
    assert study.max_chips == 4 and list(study.contexts) == [1024, 3000]
    swept = api.solve_study(study)
    run = run_cli(["sweep", "--config", str(path), "--set", "max_chips=4", "--backend",
                   "serial", "--json", "--no-store"])
    assert run.code == 0, run.err
    assert [p.total_chips for p in swept.points] == \
        [p["total_chips"] for p in cli_json(run.out)["points"]]
    with pytest.raises(UserInputError, match="one context length for a sensitivity study"):
        api.sensitivity_study(study)
    one = api.load_study(path, sets=["contexts=[3000]", "max_chips=4"],
                         flags={"sensitivity.figures": "chip.memory_bandwidth"})
    moved = api.sensitivity_study(one)
    assert [r.figure for r in moved.rows] == ["chip.memory_bandwidth"]
    served = api.capacity_study(api.load_study(path, sets=[
        "contexts=[3000]", "max_chips=4", "serving.rates=2/s", "serving.requests=30",
        "serving.output_tokens=10"]))
    assert served.to_dict()["points"]


def test_file_schema_describes_both_files() -> None:
    for kind in ("study", "point"):
        schema = api.file_schema(kind)
        assert schema["type"] == "object" and "model" in schema["properties"]
    assert "contexts" in api.file_schema("study")["properties"]
    assert "phase" in api.file_schema("point")["properties"]


def test_the_store_records_answers_and_exports_them(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "r.sqlite"
    assert api.open_store(None) is None and api.open_store(False) is None
    assert api.store_choice(None, no_store=True) is False
    assert api.store_choice(str(db)) == str(db)
    path = write_yaml(tmp_path / "p.yaml", point_data())
    first = api.evaluate_point(path, store=db)
    assert api.evaluate_point(path, store=db) == first
    rows = [json.loads(line) for line in api.export_store(db).splitlines()]
    assert len(rows) == 1
    assert api.export_store(db, "csv").splitlines()[0].startswith("key")
    assert api.export_store(tmp_path / "missing.sqlite") == ""
    with pytest.raises(UserInputError, match="use jsonl or csv"):
        api.export_store(db, "xml")
    assert api.store_path(str(db)) == db
    monkeypatch.setenv("CTXPLAN_STORE", "off")
    with pytest.raises(UserInputError, match="the store is turned off"):
        api.store_path()
