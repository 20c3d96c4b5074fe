"""Run the ``ctxplan`` command line in this process, and check its output contract."""

from __future__ import annotations

import contextlib
import io
import json
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ctxplan.cli import main


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
    """One CLI call: its arguments, exit code, stdout and stderr. Unpacks as
    ``code, out, err = run_cli(argv)``."""

    argv: list[str]
    code: int
    out: str
    err: str

    def __iter__(self) -> Iterator[Any]:
        return iter((self.code, self.out, self.err))


def run_cli(argv: list[str], seconds: int = 60) -> Run:
    """``ctxplan argv`` in this process, through the console entry point and its error handling.
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


def drop_counts(node: Any) -> Any:
    """A JSON document without its simulation accounting (sim_calls, cache_hits, cache_hit,
    earlier_run_hits), which is all that may differ between a run from scratch and one reusing
    stored results."""
    if isinstance(node, dict):
        return {k: drop_counts(v) for k, v in node.items()
                if k not in ("sim_calls", "cache_hits", "cache_hit", "earlier_run_hits")}
    if isinstance(node, list):
        return [drop_counts(v) for v in node]
    return node
