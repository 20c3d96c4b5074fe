"""Shared pieces of the reliability tests: a tiny model / cluster, valid study and point files,
and an in-process CLI runner that checks the error contract."""

from __future__ import annotations

import contextlib
import io
import json
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ctxplan.cli import main

# Small enough that any valid configuration simulates in milliseconds.
TINY_MODEL: dict[str, Any] = {
    "name": "tiny", "weight_dtype": "bf16", "num_hidden_layers": 2, "hidden_size": 256,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512,
    "vocab_size": 1000,
}
TINY_CLUSTER: dict[str, Any] = {
    "name": "tiny-cluster", "chip": "h100-sxm", "source": "tests", "verified": False,
    "levels": [
        {"name": "board", "chips_per_group": 4, "fabric": "full_mesh", "bandwidth_gbps": 100.0,
         "latency_us": 2.0, "efficiency": 0.8},
        {"name": "pod", "chips_per_group": 16, "fabric": "switch", "bandwidth_gbps": 25.0,
         "latency_us": 10.0, "efficiency": 0.8},
    ],
}


def study_data() -> dict[str, Any]:
    return {"version": 1, "model": dict(TINY_MODEL), "chip": "h100-sxm",
            "cluster": json.loads(json.dumps(TINY_CLUSTER)), "contexts": ["1K", 3000],
            "sla": {"tpot_max": "20ms", "ttft_max": None, "tps_reading": "per-seq"},
            "kv_tiers": ["kv-bf16", "kv-fp8"], "batch": 1, "strategy": "galloping",
            "candidates": "all", "max_chips": 8, "prefill_tp": 1, "decode_tp": 1}


def point_data() -> dict[str, Any]:
    return {"version": 1, "model": dict(TINY_MODEL), "chip": "h100-sxm",
            "cluster": json.loads(json.dumps(TINY_CLUSTER)), "context": 3000,
            "phase": "decode", "cp": 2, "tp": 1, "kv_tier": "kv-bf16", "batch": 1}


def write_yaml(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


class Hang(Exception):
    """A CLI call took longer than the test allows."""


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def _raise(signum: int, frame: Any) -> None:
        raise Hang(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Run:
    argv: list[str]
    code: int
    out: str
    err: str


def run_cli(argv: list[str], seconds: int = 60) -> Run:
    """``ctxplan argv`` in this process (the console entry point with its error handling).
    Any exception other than SystemExit propagates: that is a failure of the contract."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with time_limit(seconds), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return Run(argv, code, out.getvalue(), err.getvalue())


def check_contract(r: Run) -> None:
    """Exit 0, or exit 2 with exactly one stderr line 'error: ...' and no traceback."""
    assert r.code in (0, 2), f"exit {r.code} for {r.argv}: {r.err[-2000:]}"
    assert "Traceback" not in r.err, f"traceback for {r.argv}: {r.err[-2000:]}"
    if r.code == 2:
        lines = r.err.strip().splitlines()
        assert len(lines) == 1, f"{len(lines)} stderr lines for {r.argv}: {r.err[-2000:]}"
        assert lines[0].startswith("error: ") and len(lines[0]) > len("error: "), r.err
        assert r.out == "", f"stdout on error for {r.argv}: {r.out[:500]}"
    else:
        assert r.out.strip(), f"no output for {r.argv}"
        if "--json" in r.argv:
            json.loads(r.out)
