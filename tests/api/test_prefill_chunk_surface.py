"""--prefill-chunk on every surface (issue 22): the CLI, the API, study and point files, and the
memory each result reports (simulated peak in eval and in solve's pools)."""

from __future__ import annotations

import json

import pytest

from ctxplan import api
from tests.helpers.cli import run_cli
from tests.helpers.inputs import point_data, study_data, write_yaml

MEMORY_KEYS = {"per_chip_bytes", "capacity_bytes", "fits", "weights_bytes", "kv_bytes",
               "activation_bytes", "reserved_bytes", "memory_headroom",
               "transient_peak_bytes", "activation_source"}


def test_eval_json_says_how_the_prompt_entered_and_where_its_memory_came_from():
    r = run_cli(["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "20K",
                 "--phase", "prefill", "--cp", "2", "--prefill-chunk", "8K", "--json"])
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["prefill_chunk"] == {"policy": "size", "tokens": 8192, "chunks": 3,
                                  "why": "chunks of 8,192 tokens, as asked"}
    assert set(d["memory"]) == MEMORY_KEYS
    assert d["memory"]["activation_source"] == "simulated"


def test_the_eval_table_names_the_chunks():
    r = run_cli(["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "20K",
                 "--phase", "prefill", "--cp", "2", "--prefill-chunk", "8K"])
    assert r.code == 0, r.err
    assert "3 chunks of 8,192 tokens" in r.out


@pytest.mark.parametrize("value", ["0", "xyz", "-5"])
def test_a_bad_chunk_is_one_line_naming_the_field_and_exit_2(value):
    r = run_cli(["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "20K",
                 "--phase", "prefill", "--cp", "2", "--prefill-chunk", value])
    assert r.code == 2
    assert "prefill_chunk" in r.err and "auto, dynamic or off" in r.err
    assert "Traceback" not in r.err


def test_the_api_and_a_point_file_take_the_chunk(tmp_path):
    by_api = api.evaluate("llama3.1-8b", "h100-sxm", "20K", "prefill", 2, prefill_chunk="8K")
    data = {**point_data(), "model": "llama3.1-8b", "cluster": None, "context": "20K",
            "phase": "prefill", "cp": 2, "kv_tier": "kv-bf16", "prefill_chunk": "8K"}
    by_file = api.evaluate_point(write_yaml(tmp_path / "p.yaml", data))
    assert by_api.prefill_chunk.chunks == by_file.prefill_chunk.chunks == 3
    assert by_api.latency_s == by_file.latency_s


def test_a_study_file_takes_the_chunk_and_solve_reports_each_pools_memory(tmp_path):
    data = {**study_data(), "contexts": [3000], "prefill_chunk": 1024}
    study = api.load_study(write_yaml(tmp_path / "s.yaml", data))
    assert study.options["prefill_chunk"] == 1024
    d = api.solve_study(study).points[0].to_dict()
    pre, dec = d["prefill"], d["decode"]
    assert set(pre["memory"]) == set(dec["memory"]) == MEMORY_KEYS
    assert pre["memory"]["activation_source"] == "simulated"
    assert pre["prefill_chunk"]["tokens"] == 1024 and pre["prefill_chunk"]["chunks"] == 3
