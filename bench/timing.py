"""Shared by the bench scripts (run as `python bench/<name>.py`, so bench/ is on sys.path)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def best_of(repeat: int, fn: Any) -> tuple[float, Any]:
    """Best wall time of ``repeat`` calls of ``fn`` (the least disturbed run) and its result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _cli_json(args: list[str], store: Path) -> tuple[float, dict[str, Any]]:
    """Run ``ctxplan ARGS --store STORE`` in a fresh process: wall time and its JSON."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "ctxplan.cli", *args, "--store", str(store)],
                         check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - t0, json.loads(out)


def cold_and_warm(args: list[str], repeat: int
                  ) -> tuple[float, float, dict[str, Any], dict[str, Any]]:
    """A command through a fresh result store (cold), then again through the filled one
    (warm), best of ``repeat`` each: (cold s, warm s, cold JSON, warm JSON)."""
    cold, warm = float("inf"), float("inf")
    first: dict[str, Any] = {}
    again: dict[str, Any] = {}
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            store = Path(tmp) / "bench.sqlite"
            t_cold, first = _cli_json(args, store)
            t_warm, again = _cli_json(args, store)
        cold, warm = min(cold, t_cold), min(warm, t_warm)
    return cold, warm, first, again
