"""Small studies for the report tests (the tiny model: every simulation takes milliseconds)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxplan import api
from tests.helpers.inputs import study_data, write_yaml


def tiny_study(tmp_path: Path, *, contexts: list[Any] | None = None, **extra: Any) -> Path:
    """A study file of the tiny model on h100-sxm (its tiny cluster), one context by default."""
    data = study_data()
    data["contexts"] = contexts or ["2K"]
    data.update(extra)
    return write_yaml(tmp_path / "study.yaml", data)


def write_json(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data, indent=2))
    return path


def solve_report(tmp_path: Path, *, sensitivity: bool = False) -> api.Report:
    return api.report_study(tiny_study(tmp_path), tmp_path / "solve.html",
                            sensitivity=sensitivity, store=False)


def sweep_report(tmp_path: Path) -> api.Report:
    return api.report_study(tiny_study(tmp_path, contexts=["1K", "4K", "16K"]),
                            tmp_path / "sweep.html", store=False)


def capacity_report(tmp_path: Path) -> api.Report:
    study = tiny_study(tmp_path, serving={"rates": ["1/s", "4/s"], "requests": 200,
                                          "output_tokens": 20})
    return api.report_study(study, tmp_path / "capacity.html", store=False)
