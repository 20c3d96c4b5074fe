"""A sweep killed part way (SIGKILL to the CLI and its workers) resumes from the result store:
the rerun completes, every point appears once, nothing stored is simulated again, and the
answer is the one a fresh run gives."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ctxplan import api
from ctxplan.evaluate import EvalResult
from ctxplan.sweep.store import ResultStore
from tests.helpers.cli import drop_counts

CONTEXTS = "8K,32K,128K,512K"
# A scan over 40 candidates per phase and tier at TP 1: 280 simulations, ~5 s with 2 workers.
OPTIONS = ["--strategy", "scan", "--max-chips", "40", "--prefill-tp", "1", "--decode-tp", "1"]
ARGV = ["sweep", "--model", "deepseek-v3", "--chip", "sg2262", "--contexts", CONTEXTS,
        *OPTIONS, "--workers", "2", "--json"]


def _rows(path: Path) -> int:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            return int(db.execute("SELECT COUNT(*) FROM results").fetchone()[0])
    except sqlite3.OperationalError:   # not created yet
        return 0


def _cli(store: Path, **kw: Any) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "CTXPLAN_STORE"}
    return subprocess.Popen([sys.executable, "-m", "ctxplan.cli", *ARGV, "--store", str(store)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, **kw)




def test_a_killed_sweep_resumes_without_losing_or_repeating_a_point(tmp_path: Path) -> None:
    store = tmp_path / "sweep.sqlite"
    proc = _cli(store)
    deadline = time.monotonic() + 60
    try:
        while _rows(store) < 3:
            assert proc.poll() is None, f"the sweep ended before it was killed: {proc.stderr}"
            assert time.monotonic() < deadline, "no result stored within 60 s"
            time.sleep(0.02)
        assert proc.poll() is None
    finally:
        os.killpg(proc.pid, signal.SIGKILL)   # the CLI and its worker processes, no cleanup
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL and out == ""   # killed before printing

    # What the killed run left: whole rows only, each a readable result of this sweep.
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    killed = ResultStore(store)
    kept = len(killed)
    assert kept >= 3
    kept_sims = _simulations(killed)
    for row in killed.rows():
        r = EvalResult.from_dict(row.result)
        assert r.key == row.columns["key"] and r.simulated and r.model == "deepseek-v3"
    killed.close()

    # The rerun: the same command completes and reuses every stored result.
    rerun = _cli(store)
    out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    d = json.loads(out)
    sizes = [p["context_length"] for p in d["points"]]
    assert sizes == d["contexts"] == [2**13, 2**15, 2**17, 2**19]   # each point exactly once
    total = len(ResultStore(store))   # every evaluation of the sweep, stored once (primary key)
    assert kept < total
    assert d["cache_hits"] == kept > 0
    # simulations, not results: a point may take several (prefill_chunk auto, issue 22)
    sims = _simulations(ResultStore(store))
    assert d["sim_calls"] == sims - kept_sims

    # A fresh run simulates all of them, and gets the same answer.
    fresh = api.sweep("deepseek-v3", "sg2262", CONTEXTS, strategy="scan", max_chips=40,
                      prefill_tp=1, decode_tp=1)
    assert fresh.sim_calls == sims > d["sim_calls"] and fresh.cache_hits == 0
    assert drop_counts(d) == drop_counts(fresh.to_dict())


def _simulations(store: ResultStore) -> int:
    """The simulations the results of ``store`` took, summed."""
    return sum(EvalResult.from_dict(row.result).simulations for row in store.rows())
