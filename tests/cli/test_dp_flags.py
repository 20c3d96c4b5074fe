"""The DP attention flags at the edge: a bad value is one line naming its field, exit 2."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import check_contract, run_cli

BASE = ["--model", "deepseek-v3", "--chip", "h200", "--context", "8K"]


@pytest.mark.parametrize(("argv", "field"), [
    (["eval", *BASE, "--phase", "decode", "--cp", "1", "--dp", "4", "--batch", "2"], "dp"),
    (["eval", *BASE, "--phase", "decode", "--cp", "1", "--dp", "0"], "dp"),
    (["eval", *BASE, "--phase", "prefill", "--cp", "1", "--dp", "2", "--batch", "2",
      "--handoff-to", "1", "--handoff-dp", "4"], "handoff_dp"),
    (["solve", *BASE, "--batch", "2", "--decode-dp", "4"], "decode_dp"),
    (["solve", *BASE, "--prefill-dp", "zero"], "prefill"),
])
def test_a_bad_dp_is_one_line_naming_its_field(argv: list[str], field: str) -> None:
    r = run_cli(argv)
    check_contract(r)
    assert r.code == 2 and field in r.err.replace("-", "_")


def test_eval_json_carries_dp() -> None:
    r = run_cli(["eval", *BASE, "--phase", "decode", "--cp", "1", "--tp", "4", "--dp", "2",
                 "--batch", "2", "--kv-tier", "mla-fp8", "--json"])
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["dp"] == 2 and out["chips"] == 8 and out["tpot_s"] > 0


def test_a_dp_prefill_hands_its_kv_over() -> None:
    r = run_cli(["eval", *BASE, "--phase", "prefill", "--cp", "1", "--tp", "4", "--dp", "2",
                 "--batch", "2", "--kv-tier", "mla-fp8", "--handoff-to", "1", "--handoff-tp",
                 "4", "--handoff-dp", "2", "--json"])
    assert r.code == 0, r.err
    h = json.loads(r.out)["handoff"]
    assert h["decode_dp"] == 2 and h["bytes_moved"] == h["decode_kv_bytes"] > 0
