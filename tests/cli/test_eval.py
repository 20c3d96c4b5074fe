"""`ctxplan eval` end to end: DeepSeek-V3 on SG2262 at 1M, both phases, JSON keys, table, errors.

Runs go through ``ctxplan.cli.main`` (the console entry point, with its error handling) in
process; one run goes through the installed ``ctxplan`` script in a subprocess.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.helpers.cli import run_cli

BASE = ["eval", "--model", "deepseek-v3", "--chip", "sg2262", "--context", "1M"]

TOP_KEYS = {"phase", "model", "chip", "cluster", "context_length", "batch", "kv_tier",
            "c_kv_bytes", "cp", "tp", "chips", "memory", "comm", "events"}
MEMORY_KEYS = {"per_chip_bytes", "capacity_bytes", "fits", "weights_bytes", "kv_bytes",
               "activation_bytes"}
COMM_KEYS = {"pattern", "ring_steps_per_layer", "analytic_bytes", "simulated_bytes"}




@pytest.mark.parametrize(("phase", "cp", "latency_key", "pattern"), [
    ("prefill", 16, "ttft_s", "pass-kv"),
    ("decode", 16, "tpot_s", "pass-q"),
])
def test_eval_json_1m_deepseek_sg2262(phase: str, cp: int, latency_key: str, pattern: str) -> None:
    code, out, err = run_cli([*BASE, "--phase", phase, "--cp", str(cp), "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d.keys() >= TOP_KEYS | {latency_key}
    assert d["memory"].keys() >= MEMORY_KEYS and d["comm"].keys() >= COMM_KEYS
    assert d["phase"] == phase and d["model"] == "deepseek-v3" and d["chip"] == "sg2262"
    assert d["cluster"] == "sg2262-c2c" and d["context_length"] == 2**20
    assert d["kv_tier"] == "mla-bf16" and d["c_kv_bytes"] == 1152
    assert d["cp"] == cp and d["tp"] == 1 and d["chips"] == cp and d["batch"] == 1
    assert d["memory"]["fits"] and d["events"] > 0
    assert d[latency_key] > 0
    comm = d["comm"]
    assert comm["pattern"] == pattern
    assert comm["simulated_bytes"] == comm["analytic_bytes"] > 0
    if phase == "prefill":
        assert comm["ring_steps_per_layer"] == cp - 1
        assert comm["analytic_bytes"] == 61 * (cp - 1) * 2**20 * 1152


def test_eval_table() -> None:
    code, out, _ = run_cli([*BASE, "--phase", "decode", "--cp", "16"])
    assert code == 0
    assert "TPOT" in out and "pass-q" in out and "deepseek-v3" in out


def test_eval_shows_the_critical_path_per_layer_by_op_kind() -> None:
    """Meta's pass-Q across two hosts: the table lists the op kinds on the critical path per
    layer; --json has them under "breakdown", and every charge adds up to the latency."""
    args = ["eval", "--model", "llama3.1-8b", "--chip", "h100-gt500", "--cluster",
            "grand-teton-rdma", "--context", "32K", "--phase", "decode", "--cp", "2", "--tp",
            "8", "--pass-q", "ring"]
    code, out, _ = run_cli(args)
    assert code == 0
    assert "critical path per layer" in out
    for kind in ("passq_send", "merge_send", "partial_attn", "tp_allreduce", "lm_head (once)"):
        assert kind in out, kind
    code, out, _ = run_cli([*args, "--json"])
    d = json.loads(out)
    bd = d["breakdown"]
    assert set(bd) == {"critical_path_s", "layers", "per_layer_s", "op_cost_per_layer_s",
                       "outside_layers_s"}
    assert bd["layers"] == 32 and bd["critical_path_s"] == pytest.approx(d["tpot_s"], abs=1e-9)
    charged = bd["layers"] * sum(bd["per_layer_s"].values()) + sum(
        bd["outside_layers_s"].values())
    assert charged == pytest.approx(bd["critical_path_s"], rel=1e-9)
    # The SendRecv and the All2All carry their operations' fixed costs.
    for kind in ("passq_send", "merge_send"):
        assert 0 < bd["op_cost_per_layer_s"][kind] < bd["per_layer_s"][kind]


def test_eval_point_that_does_not_fit() -> None:
    code, out, _ = run_cli([*BASE, "--phase", "decode", "--cp", "1", "--json"])
    assert code == 0
    d = json.loads(out)
    assert d["simulated"] is False and d["tpot_s"] is None and d["comm"] is None
    assert d["memory"]["fits"] is False
    assert d["memory"]["kv_bytes"] == 2**20 * 1152 * 61


@pytest.mark.parametrize(("args", "field"), [
    (["--phase", "decode", "--cp", "2048"], "cp"),                       # over 1024 chips
    (["--phase", "decode", "--cp", "4", "--tp", "3"], "tp"),             # 3 does not divide 128
    (["--phase", "prefill", "--cp", "4", "--kv-tier", "mla-int3"], "kv_tier"),
    (["--phase", "train", "--cp", "4"], "phase"),
    (["--phase", "decode", "--cp", "1", "--trace", "x.json"], "trace"),  # nothing to trace
])
def test_user_errors_exit_2_with_one_line(args: list[str], field: str) -> None:
    code, out, err = run_cli([*BASE, *args])
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {field} = ")
    assert "Fix:" in lines[0] and "Traceback" not in err
    assert out == ""


def test_console_script(tmp_path: object) -> None:
    exe = shutil.which("ctxplan")
    cmd = [exe] if exe else [sys.executable, "-m", "ctxplan.cli"]
    proc = subprocess.run([*cmd, *BASE, "--phase", "decode", "--cp", "16", "--json"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["comm"]["pattern"] == "pass-q"
    bad = subprocess.run([*cmd, *BASE, "--phase", "decode", "--cp", "2048"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error: cp = 2048")
