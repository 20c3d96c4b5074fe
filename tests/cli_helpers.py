"""Helpers for tests of the CLI and its JSON output.

Importable from every test module: pytest puts tests/ on sys.path for tests/conftest.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from ctxplan.cli import main


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``ctxplan argv`` through the console entry point: (exit code, stdout, stderr)."""
    code = 0
    try:
        main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def drop_counts(node: Any) -> Any:
    """A JSON document without its simulation accounting (sim_calls, cache_hits, cache_hit),
    which is all that may differ between a run from scratch and one reusing stored results."""
    if isinstance(node, dict):
        return {k: drop_counts(v) for k, v in node.items()
                if k not in ("sim_calls", "cache_hits", "cache_hit")}
    if isinstance(node, list):
        return [drop_counts(v) for v in node]
    return node
