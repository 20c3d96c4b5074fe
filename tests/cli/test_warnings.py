"""The command line prints warnings on stderr, never on stdout (--json stays parseable), and
goes on (exit 0); --strict-context turns the context warning into an error (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.config.test_edge_warnings import SHORT
from tests.helpers.cli import check_contract, run_cli
from tests.helpers.inputs import write_yaml


def test_a_context_beyond_the_model_warns_on_stderr_and_goes_on(tmp_path: Path) -> None:
    model = str(write_yaml(tmp_path / "short.yaml", SHORT))
    base = ["eval", "--model", model, "--chip", "h100-sxm", "--context", "4K", "--phase",
            "decode", "--cp", "1", "--no-store"]
    r = run_cli([*base, "--json"])
    check_contract(r)
    assert r.code == 0
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: context_length = 4,096")
    assert "2,048" in lines[0]
    assert json.loads(r.out)["warnings"] == [lines[0].removeprefix("warning: ")]
    table = run_cli(base)
    assert table.code == 0 and "warning:" not in table.out and table.err == r.err
    strict = run_cli([*base, "--strict-context"])
    check_contract(strict)
    assert strict.code == 2 and "2,048" in strict.err


def test_solve_prints_its_warnings_on_stderr(tmp_path: Path) -> None:
    model = str(write_yaml(tmp_path / "short.yaml", SHORT))
    r = run_cli(["solve", "--model", model, "--chip", "h100-sxm", "--context", "4K",
                 "--max-chips", "4", "--kv-tiers", "kv-bf16", "--prefill-tp", "1",
                 "--decode-tp", "1", "--no-store", "--json"])
    check_contract(r)
    assert r.code == 0 and r.err.startswith("warning: context_length = 4,096")
    assert len(json.loads(r.out)["warnings"]) == 1


def test_a_context_above_16m_is_refused(tmp_path: Path) -> None:
    r = run_cli(["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "17M",
                 "--phase", "decode", "--cp", "1", "--no-store"])
    check_contract(r)
    assert r.code == 2 and "16M" in r.err
