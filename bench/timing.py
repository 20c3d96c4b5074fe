"""Shared by the bench scripts (run as `python bench/<name>.py`, so bench/ is on sys.path)."""

from __future__ import annotations

import time
from typing import Any


def best_of(repeat: int, fn: Any) -> tuple[float, Any]:
    """Best wall time of ``repeat`` calls of ``fn`` (the least disturbed run) and its result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out
