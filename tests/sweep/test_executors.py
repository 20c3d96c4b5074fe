"""Executors behind one interface: serial, local processes, and the path for workers that cannot
see the store (a remote Ray cluster). Same results, in order, byte for byte; errors come back
as the user errors they are; the CLI's --backend / --workers / --address, and a missing Ray."""

from __future__ import annotations

import json
import operator
import os
import pickle
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from unittest import mock

import pytest

from ctxplan import api
from ctxplan.errors import UserInputError
from ctxplan.report.progress import progress_wanted, sweep_progress
from ctxplan.solve import EvalCache
from ctxplan.sweep import (
    ProcessExecutor,
    RayExecutor,
    ResultStore,
    SerialExecutor,
    make_executor,
)
from ctxplan.sweep.executor import default_workers
from tests.helpers.cli import drop_counts, run_cli

T = TypeVar("T")
R = TypeVar("R")

SWEEP = dict(model="llama3.1-8b", chip="h100-sxm", contexts="8K,32K,16K", max_chips=8)




def _sweep_json(**kw: Any) -> str:
    opts = dict(SWEEP)
    r = api.sweep(opts.pop("model"), opts.pop("chip"), opts.pop("contexts"), **opts, **kw)
    return json.dumps(r.to_dict(), indent=2)


@pytest.fixture(scope="module")
def serial_json() -> str:
    return _sweep_json()


def test_process_executor_keeps_the_order_of_the_items() -> None:
    items = list(range(7, -3, -1))
    assert list(ProcessExecutor(2).map(operator.neg, items)) == [-x for x in items]
    assert list(ProcessExecutor(2).map(operator.neg, [])) == []
    assert list(SerialExecutor().map(operator.neg, items)) == [-x for x in items]


def test_process_sweep_is_byte_identical_to_serial(serial_json: str, tmp_path: Path) -> None:
    cache = EvalCache()
    out = _sweep_json(executor=ProcessExecutor(2), cache=cache)
    assert out == serial_json
    # The workers' results and counts came home to the parent's cache.
    d = json.loads(out)
    assert cache.sim_calls == d["sim_calls"] > 0 and len(cache.store) >= d["sim_calls"]
    again = _sweep_json(executor=ProcessExecutor(2), cache=cache)
    assert json.loads(again)["sim_calls"] == 0


def test_process_workers_share_one_store(serial_json: str, tmp_path: Path) -> None:
    """Two workers write the same SQLite file concurrently; the store ends up with exactly the
    rows a serial run writes, and a second run through it simulates nothing."""
    a, b = tmp_path / "serial.sqlite", tmp_path / "process.sqlite"
    assert _sweep_json(store=a) == serial_json
    assert _sweep_json(store=b, backend="process", workers=2) == serial_json
    assert sorted(ResultStore(a)) == sorted(ResultStore(b))
    again = json.loads(_sweep_json(store=b, backend="process", workers=2))
    assert again["sim_calls"] == 0 and again["cache_hits"] == json.loads(serial_json)["sim_calls"]


class _Remote(SerialExecutor):
    """Runs in this process but behaves like a remote cluster: every task and result crosses a
    pickle, and the workers cannot open this machine's files."""

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        for item in items:
            remote_fn = pickle.loads(pickle.dumps(fn))
            remote_item = pickle.loads(pickle.dumps(item))
            with mock.patch.object(ResultStore, "_connect",
                                   side_effect=AssertionError("a remote worker opened it")):
                out = remote_fn(remote_item)
            yield pickle.loads(pickle.dumps(out))

    def shares_filesystem(self) -> bool:
        return False


def test_workers_without_the_store_get_its_results_and_return_theirs(
    serial_json: str, tmp_path: Path,
) -> None:
    """The workers never open the file (they are given the stored results of their point),
    and the parent writes the results they bring back."""
    path = tmp_path / "r.sqlite"
    api.sweep("llama3.1-8b", "h100-sxm", "8K", max_chips=8, store=path)   # one point stored
    stored = len(ResultStore(path))
    out = _sweep_json(executor=_Remote(), store=path)
    d, ref = json.loads(out), json.loads(serial_json)
    assert drop_counts(d) == drop_counts(ref)
    assert d["points"][0]["sim_calls"] == 0 and d["points"][0]["cache_hits"] > 0   # seeded
    assert d["sim_calls"] == ref["sim_calls"] - ref["points"][0]["sim_calls"]
    assert len(ResultStore(path)) > stored        # the parent wrote what the workers ran
    assert json.loads(_sweep_json(executor=_Remote(), store=path))["sim_calls"] == 0




def test_a_user_error_in_a_worker_comes_back_whole() -> None:
    with pytest.raises(UserInputError) as info:
        api.sweep("llama3.1-8b", "h100-sxm", "8K,32K", max_chips=8, event_limit=10,
                  backend="process", workers=2)
    assert info.value.field == "event_limit" and "raise it" in info.value.fix


def test_make_executor_validates_its_inputs() -> None:
    assert isinstance(make_executor(None), ProcessExecutor)
    assert make_executor("process").workers == default_workers() == min(2, os.cpu_count() or 1)
    assert isinstance(make_executor("serial"), SerialExecutor)
    assert make_executor("process", workers=3).workers == 3
    for kw in ({"backend": "threads"}, {"backend": "process", "workers": 0},
               {"backend": "serial", "address": "auto"}, {"backend": "process", "workers": True}):
        with pytest.raises(UserInputError):
            make_executor(**kw)


def test_cli_backends_agree() -> None:
    base = ["sweep", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--contexts", "8K,32K",
            "--max-chips", "8", "--json", "--no-store"]
    outs = []
    for extra in (["--backend", "serial"], [], ["--workers", "1"], ["--backend", "process",
                                                                   "--workers", "2"]):
        code, out, err = run_cli([*base, *extra])
        assert code == 0 and err == "", err   # nothing on stderr under --json
        outs.append(out)
    assert len(set(outs)) == 1
    code, _, err = run_cli([*base, "--backend", "gpu"])
    assert code == 2 and err.count("\n") == 1 and "backend" in err
    code, _, err = run_cli([*base, "--address", "auto"])
    assert code == 2 and err.count("\n") == 1 and "--backend ray" in err


def test_a_missing_ray_is_one_line_saying_how_to_install_it(monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)   # `import ray` now raises ImportError
    code, out, err = run_cli(["sweep", "--model", "llama3.1-8b", "--chip", "h100-sxm",
                           "--contexts", "8K", "--backend", "ray", "--no-store"])
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "pip install 'ctxplan[ray]'" in err
    with pytest.raises(UserInputError, match=r"pip install 'ctxplan\[ray\]'"):
        list(RayExecutor().map(operator.neg, [1]))


class _Tty:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_progress_only_for_a_person_on_a_terminal() -> None:
    assert progress_wanted(False, _Tty(True))
    assert not progress_wanted(True, _Tty(True))      # --json
    assert not progress_wanted(False, _Tty(False))    # piped / redirected
    assert not progress_wanted(False, object())       # no isatty at all


def test_sweep_progress_counts_points_simulations_and_hits() -> None:
    import io

    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=150)
    with sweep_progress(2, enabled=True, console=console) as on_point:
        assert on_point is not None
        r = api.sweep("llama3.1-8b", "h100-sxm", "8K,32K", max_chips=8, on_point=on_point)
    text = buf.getvalue()
    assert "2/2" in text and f"{r.sim_calls} simulated" in text and "0 reused" in text
    assert "solved S = 32K" in text
    with sweep_progress(2, enabled=False) as nothing:
        assert nothing is None


def test_serial_sweeps_solve_on_the_callers_own_cache() -> None:
    """In this process the point is solved on the cache given (a subclass keeps its hooks, the
    counts are not added twice)."""
    seen: list[int] = []

    class Watching(EvalCache):
        def evaluate(self, cfg: Any) -> Any:
            seen.append(cfg.context_length)
            return super().evaluate(cfg)

    cache = Watching()
    r = api.sweep("llama3.1-8b", "h100-sxm", "8K,32K", max_chips=8, cache=cache)
    assert len(seen) == r.sim_calls + r.cache_hits and set(seen) == {8192, 32768}
    assert (cache.sim_calls, cache.cache_hits) == (r.sim_calls, r.cache_hits)


def test_solve_progress_shows_the_running_counts() -> None:
    import io

    from rich.console import Console

    from ctxplan.report.progress import solve_progress

    buf = io.StringIO()
    base = EvalCache()
    with solve_progress(base, "solving", enabled=True,
                        console=Console(file=buf, force_terminal=True, width=150)) as cache:
        assert cache is not base and cache.store is base.store
        r = api.solve("llama3.1-8b", "h100-sxm", "8K", max_chips=8, cache=cache)
    assert f"{r.sim_calls} simulated, 0 reused" in buf.getvalue()
    with solve_progress(base, "solving", enabled=False) as same:
        assert same is base
