"""docs/study-files.md shows the example files verbatim, and the examples load and solve."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ctxplan import api
from tests.helpers.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "study-files.md"
EXAMPLES = ROOT / "examples"


def _yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S)


@pytest.mark.parametrize("name", ["study-deepseek-1m.yaml", "point-deepseek-1m-decode.yaml"])
def test_docs_show_the_example_files(name: str) -> None:
    assert (EXAMPLES / name).read_text() in _yaml_blocks()


def test_the_documented_study_solves() -> None:
    r = run_cli(["solve", "--config", str(EXAMPLES / "study-deepseek-1m.yaml"), "--json"])
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["contexts"] == [2**17, 2**20]
    curve = [p["total_chips"] for p in d["points"]]
    assert all(p["feasible"] for p in d["points"]) and curve == sorted(curve)
    for p in d["points"]:
        assert p["decode"]["tpot_s"] <= 0.020
        assert p["kv_tier"] in ("mla-bf16", "mla-fp8") and p["max_chips"] == 32
    # the worked example's 1M answer agrees with the same solve given as flags
    flags = api.solve("deepseek-v3", "sg2262", "1M", kv_tiers="mla-bf16,mla-fp8", max_chips=32)
    assert flags.to_dict() == d["points"][1]


def test_the_documented_point_and_custom_study_run() -> None:
    r = run_cli(["eval", "--config", str(EXAMPLES / "point-deepseek-1m-decode.yaml"), "--json"])
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert (d["phase"], d["cp"], d["kv_tier"], d["context_length"]) == \
        ("decode", 16, "mla-bf16", 2**20)
    r = run_cli(["solve", "--config", str(EXAMPLES / "study-custom-chip.yaml"), "--set",
                 "contexts=32K", "--json"])
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["chip"] == "my-accelerator" and d["cluster"] == "my-cluster" and d["feasible"]


def test_schema_command_prints_valid_json() -> None:
    for kind in ("study", "point"):
        r = run_cli(["schema", "--kind", kind])
        assert r.code == 0, r.err
        schema = json.loads(r.out)
        assert schema["title"] == f"ctxplan {kind} file, version {2 if kind == 'study' else 1}"
        assert "version" in schema["required"]
    r = run_cli(["schema", "--kind", "sweep"])
    assert r.code == 2 and r.err.startswith("error: kind = 'sweep'")
