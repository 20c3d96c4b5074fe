"""CLI options that change what is simulated: weight dtypes per part and decode's pass-Q."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxplan import api
from ctxplan.cli import app, main
from ctxplan.model.precision import Precision

runner = CliRunner()


def _json(args: list[str]) -> dict:
    res = runner.invoke(app, [*args, "--json", "--no-store"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_ffn_weights_flag_is_the_precision_the_api_takes() -> None:
    args = ["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "32K",
            "--phase", "prefill", "--cp", "2", "--tp", "2"]
    fp8 = _json([*args, "--ffn-weights", "fp8"])
    bf16 = _json(args)
    expected = api.evaluate("llama3.1-8b", "h100-sxm", "32K", "prefill", 2, tp=2,
                            precision=Precision(attention_weights="bf16", ffn_weights="fp8"))
    assert fp8["ttft_s"] == expected.ttft_s
    # FP8 FFN weights halve the FFN's weight bytes and run FP8 GEMMs: faster, smaller.
    assert fp8["ttft_s"] < bf16["ttft_s"]
    assert fp8["memory"]["weights_bytes"] < bf16["memory"]["weights_bytes"]


def test_a_dtype_the_chip_has_no_peak_for_is_a_user_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "8K",
              "--phase", "decode", "--cp", "1", "--attention-weights", "fp32", "--no-store"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: attention_weights = 'fp32'") and "\n" not in err
    assert "bf16, fp8" in err  # the fix names the dtypes the chip has


def test_pass_q_ring_moves_the_same_bytes_and_is_never_faster() -> None:
    args = ["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "128K",
            "--phase", "decode", "--cp", "8"]
    ring = _json([*args, "--pass-q", "ring"])
    star = _json(args)
    assert ring["comm"]["simulated_bytes"] == star["comm"]["simulated_bytes"]
    assert ring["comm"]["simulated_bytes"] == ring["comm"]["analytic_bytes"]
    assert ring["tpot_s"] > star["tpot_s"]  # Nd - 1 hops in sequence instead of one


def test_every_layer_is_simulated_unless_the_periodic_shortcut_is_asked_for() -> None:
    args = ["eval", "--model", "deepseek-v3", "--chip", "sg2262", "--context", "128K",
            "--phase", "prefill", "--cp", "8"]
    full = _json(args)
    short = _json([*args, "--periodic-shortcut"])
    assert full["layers_simulated"] == 61
    assert short["layers_simulated"] < 61
    assert short["ttft_s"] == full["ttft_s"]  # the shortcut is exact here (see its own tests)
    assert short["key"] != full["key"]        # a different configuration in the store
    # --full-sim is a deprecated no-op: the same result, byte for byte.
    assert _json([*args, "--full-sim"]) == full
    assert "Deprecated, no effect" in runner.invoke(app, ["eval", "--help"]).stdout


def test_periodic_shortcut_in_point_files_and_the_api(tmp_path: Path) -> None:
    from tests.helpers.inputs import point_data, write_yaml

    short = point_data() | {"model": "deepseek-v3", "chip": "sg2262", "cluster": None,
                            "context": "128K", "phase": "prefill", "cp": 8,
                            "kv_tier": "default", "periodic_shortcut": True}
    point = api.load_point(write_yaml(tmp_path / "p.yaml", short))
    assert point.periodic_shortcut is True
    from_file = api.evaluate_point(point)
    from_api = api.evaluate("deepseek-v3", "sg2262", "128K", "prefill", 8,
                            periodic_shortcut=True)
    assert from_file.to_dict() == from_api.to_dict() and from_api.layers_simulated < 61
    old = point_data() | {"full_simulation": True}   # still read, and ignored
    assert api.load_point(write_yaml(tmp_path / "o.yaml", old)).full_simulation is True
    study = api.load_study(None, flags={"model": "llama3.1-8b", "chip": "h100-sxm",
                                        "contexts": "8K"}, sets=["periodic_shortcut=true"])
    assert study.solve_options()["periodic_shortcut"] is True
