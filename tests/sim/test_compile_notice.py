"""The one-time numba compilation says what it is doing and for how long, on stderr only, and
nothing when the cache is warm (issue 24, item 5; ctxplan.sim.notice)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from numba import njit

from ctxplan.sim.notice import DONE, STARTING, compile_notice

_DONE = re.compile(re.escape(DONE.split("{")[0]) + r"\d+\.\d s$")


def _fresh_function():  # type: ignore[no-untyped-def]
    """An njit function numba has never seen (no disk cache): its first call compiles."""
    @njit
    def add(a, b):  # type: ignore[no-untyped-def]
        return a + b
    return add


def test_a_compilation_prints_what_and_how_long() -> None:
    add = _fresh_function()
    out = io.StringIO()
    with compile_notice(out):
        assert add(1, 2) == 3
    lines = out.getvalue().splitlines()
    assert lines[0] == STARTING
    assert _DONE.match(lines[1]), lines
    assert len(lines) == 2


def test_nothing_compiled_prints_nothing() -> None:
    add = _fresh_function()
    add(1, 2)                   # compiled here, outside any block
    out = io.StringIO()
    with compile_notice(out):
        assert add(3, 4) == 7   # already compiled: loaded, not compiled
    assert out.getvalue() == ""


def test_nested_blocks_and_several_functions_print_one_pair() -> None:
    first, second = _fresh_function(), _fresh_function()
    out = io.StringIO()
    with compile_notice(out):
        with compile_notice():
            first(1, 2)
        with compile_notice():
            second(1.0, 2.0)
    lines = out.getvalue().splitlines()
    assert lines[0] == STARTING and _DONE.match(lines[1]) and len(lines) == 2


_EVAL = ["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "1K",
         "--phase", "decode", "--cp", "1", "--json", "--no-store"]


@pytest.mark.slow
def test_a_cold_cache_announces_itself_on_stderr_and_a_warm_one_does_not(
        tmp_path: Path) -> None:
    """A fresh NUMBA_CACHE_DIR: the CLI compiles (about 10-20 s), says so on stderr, and its
    --json stdout is the same as the warm run's, which prints no notice."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"))

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ctxplan.cli", *_EVAL], env=env,
                              capture_output=True, text=True, check=True)

    cold, warm = run(), run()
    cold_lines = cold.stderr.splitlines()
    assert STARTING in cold_lines
    assert any(_DONE.match(line) for line in cold_lines), cold.stderr
    assert STARTING not in cold.stdout
    assert json.loads(cold.stdout) == json.loads(warm.stdout)
    assert cold.stdout == warm.stdout
    assert STARTING not in warm.stderr and "compiled in" not in warm.stderr
