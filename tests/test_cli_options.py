"""CLI options that change what is simulated: weight dtypes per part and decode's pass-Q."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ctxplan import api
from ctxplan.cli import app, main
from ctxplan.mapping.layout import Precision

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
              "--phase", "decode", "--cp", "1", "--attention-weights", "int4", "--no-store"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: attention_weights = 'int4'") and "\n" not in err
    assert "bf16, fp8" in err  # the fix names the dtypes the chip has


def test_pass_q_ring_moves_the_same_bytes_and_is_never_faster() -> None:
    args = ["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "128K",
            "--phase", "decode", "--cp", "8"]
    ring = _json([*args, "--pass-q", "ring"])
    star = _json(args)
    assert ring["comm"]["simulated_bytes"] == star["comm"]["simulated_bytes"]
    assert ring["comm"]["simulated_bytes"] == ring["comm"]["analytic_bytes"]
    assert ring["tpot_s"] > star["tpot_s"]  # Nd - 1 hops in sequence instead of one
