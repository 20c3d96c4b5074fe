"""The same command on the same state gives byte-identical JSON, and wall-clock figures appear
only with --timings."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import Run, run_cli
from tests.helpers.inputs import point_data, study_data, write_yaml

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "examples" / "study-deepseek-1m.yaml"
TIME_WORDS = ("time", "wall", "elapsed", "seconds_taken", "duration")


def _fresh_store_flags() -> list[str]:
    """`--no-store` once a persistent result store exists (each run then starts fresh);
    without one, every solve already starts from a fresh in-process cache."""
    r = run_cli(["solve", "--help"])
    return ["--no-store"] if "--no-store" in r.out else []


def _ok(r: Run) -> str:
    assert r.code == 0, r.err
    return r.out


def _keys(node: Any) -> set[str]:
    if isinstance(node, dict):
        return set(node) | {k for v in node.values() for k in _keys(v)}
    if isinstance(node, list):
        return {k for v in node for k in _keys(v)}
    return set()


def _no_clock(out: str) -> None:
    keys = _keys(json.loads(out))
    assert not [k for k in keys if any(w in k.lower() for w in TIME_WORDS)], keys


def test_solve_json_is_byte_identical(tmp_path: Path) -> None:
    # 128K: the same path as 1M (both KV tiers, TP searched, the handoff checked) at a fifth of
    # the cost; the 1M solve's determinism in-process: tests/solve/test_solve_budget.py
    argv = ["solve", "--config", str(STUDY), "--set", "contexts=128K", "--max-chips", "16",
            "--json"]
    if _fresh_store_flags():   # a result store exists: give each run a fresh one
        runs = [[*argv, "--store", str(tmp_path / f"store-{i}.sqlite")] for i in range(2)]
    else:
        runs = [argv, argv]
    first, second = (_ok(run_cli(a)) for a in runs)
    assert first == second
    _no_clock(first)
    d = json.loads(first)
    assert d["context_length"] == 2**17 and d["sim_calls"] > 0 and d["cache_hits"] == 0
    if _fresh_store_flags():
        assert _ok(run_cli([*argv, "--no-store"])) == first


def test_study_and_eval_json_are_byte_identical(tmp_path: Path) -> None:
    study = write_yaml(tmp_path / "s.yaml", study_data())
    point = write_yaml(tmp_path / "p.yaml", point_data())
    for argv in (["solve", "--config", str(study), "--json", *_fresh_store_flags()],
                 ["sweep", "--config", str(study), "--json", *_fresh_store_flags()],
                 ["eval", "--config", str(point), "--json"],
                 ["eval", "--config", str(point), "--set", "phase=prefill", "--json"]):
        first = _ok(run_cli(argv))
        assert first == _ok(run_cli(argv)), argv
        _no_clock(first)


def test_timings_only_when_asked(tmp_path: Path) -> None:
    point = write_yaml(tmp_path / "p.yaml", point_data())
    study = write_yaml(tmp_path / "s.yaml", study_data())
    for argv in (["eval", "--config", str(point)],
                 ["solve", "--config", str(study), "--set", "contexts=1K"],
                 ["solve", "--config", str(study)], ["sweep", "--config", str(study)]):
        plain = json.loads(_ok(run_cli([*argv, "--json"])))
        timed = json.loads(_ok(run_cli([*argv, "--json", "--timings"])))
        assert "timings" not in plain and timed["timings"]["wall_s"] > 0
        assert {k: v for k, v in timed.items() if k != "timings"} == plain
        assert "wall time" not in _ok(run_cli(argv))
        assert "wall time" in _ok(run_cli([*argv, "--timings"]))


@pytest.mark.skipif(shutil.which("ctxplan") is None, reason="console script not installed")
def test_another_process_gives_the_same_bytes(tmp_path: Path) -> None:
    """A fresh interpreter (another hash seed) prints the same JSON as this process."""
    study = write_yaml(tmp_path / "s.yaml", study_data())
    argv = ["solve", "--config", str(study), "--json", *_fresh_store_flags()]
    here = _ok(run_cli(argv))
    env = dict(os.environ, PYTHONHASHSEED="12345")
    proc = subprocess.run([shutil.which("ctxplan") or "ctxplan", *argv], capture_output=True,
                          text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == here
