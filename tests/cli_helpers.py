"""Running the CLI in-process from a test.

Importable from every test module: pytest puts tests/ on sys.path for tests/conftest.py.
"""

from __future__ import annotations

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
