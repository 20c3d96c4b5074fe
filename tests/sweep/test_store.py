"""The SQLite result store: exact round trip of EvalResult, reuse across solves (hits, not
simulations), output that does not depend on where a result came from, the CLI
(`--store`, `--no-store`, `ctxplan store list|export|clear`) and its error lines."""

from __future__ import annotations

import csv
import io
import json
import pickle
import sqlite3
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

import pytest

from ctxplan import api
from ctxplan.api import point as api_point
from ctxplan.cli import main
from ctxplan.errors import UserInputError
from ctxplan.evaluate import (
    SIM_VERSION,
    CommReport,
    EvalResult,
    MemoryReport,
    MoeChoice,
    RingChoice,
)
from ctxplan.evaluate import evaluate as run_evaluate
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.solve import EvalCache
from ctxplan.sweep.store import (
    ResultStore,
    default_store_path,
    open_store,
    round_trips,
)
from tests.helpers.cli import run_cli

ACCOUNTING = ("sim_calls", "cache_hits", "cache_hit", "earlier_run_hits")




def _same_fields(a: EvalResult, b: EvalResult) -> None:
    for f in fields(EvalResult):
        x, y = getattr(a, f.name), getattr(b, f.name)
        assert x == y and type(x) is type(y), f.name


def _without_accounting(node: Any) -> Any:
    """The solve / sweep JSON less the fields that count where results came from."""
    if isinstance(node, dict):
        return {k: _without_accounting(v) for k, v in node.items() if k not in ACCOUNTING}
    if isinstance(node, list):
        return [_without_accounting(v) for v in node]
    return node


CONFIGS = [  # both phases, MLA / GQA, MoE / dense, TP, batch, and one that does not fit
    ("deepseek-v3", "sg2262", "1M", "prefill", 16, {}),
    ("deepseek-v3", "sg2262", "1M", "decode", 64, {"kv_tier": "mla-fp8"}),
    ("llama3.1-8b", "h100-sxm", "32K", "prefill", 2, {"tp": 2}),
    ("llama3.1-8b", "h100-sxm", "32K", "decode", 4, {"batch": 3}),
    ("deepseek-v3", "sg2262", "1M", "decode", 1, {}),
]


@pytest.mark.parametrize("args", CONFIGS, ids=lambda a: f"{a[0]}-{a[3]}-{a[4]}")
def test_a_result_from_the_store_equals_the_fresh_one_field_by_field(
    args: tuple[Any, ...], tmp_path: Path,
) -> None:
    model, chip, s, phase, n, kw = args
    cfg = api.eval_config(model, chip, s, phase, n, **kw)
    fresh, _ = run_evaluate(cfg)
    with ResultStore(tmp_path / "r.sqlite") as st:
        st[cfg.key()] = fresh
    with ResultStore(tmp_path / "r.sqlite") as st:   # a new handle: read from the file
        back = st[cfg.key()]
    assert back is not fresh
    _same_fields(back, fresh)
    assert json.dumps(back.to_dict()) == json.dumps(fresh.to_dict())
    if n == 1:
        assert not fresh.simulated and back.latency_s is None and back.comm is None


def test_every_evalresult_field_round_trips() -> None:
    """A synthetic result with every field away from its default: a field added to EvalResult
    that to_dict / from_dict do not carry fails here (set it below too)."""
    r = EvalResult(
        phase="decode", model="m", chip="c", cluster="k", context_length=3, batch=2,
        kv_tier="t", c_kv_bytes=5, cp=7, tp=2, chips=14, mla_mode="absorbed",
        latency_s=0.1 + 0.2,   # a float with a long repr
        memory=MemoryReport(11, 13, True, 1, 2, 3, 4, memory_headroom=0.9),
        comm=CommReport("pass-q", 0, 9, 123456789012345, 123456789012345,
                        (KindComm("sliding_attention", "halo", 3, 1, 4, 5),)),
        events=17, tasks=19, simulated=True, reason="r",
        busy_s_by_kind={"b": 1e-9 / 3, "a": 2.5}, max_compute_utilisation=0.123456789,
        max_link_utilisation=0.987654321, key="deadbeef", layers_simulated=7,
        **_extra_fields(),
    )
    for f in fields(EvalResult):
        if f.default is not MISSING:
            assert getattr(r, f.name) != f.default, f"give {f.name} a non-default value here"
        elif f.default_factory is not MISSING:
            assert getattr(r, f.name) != f.default_factory(), f.name
    assert round_trips(r)
    _same_fields(EvalResult.from_dict(json.loads(json.dumps(r.to_dict()))), r)
    prefill = EvalResult(**{**{f.name: getattr(r, f.name) for f in fields(EvalResult)},
                            "phase": "prefill", "comm": None})
    assert round_trips(prefill)


def _extra_fields() -> dict[str, Any]:
    """Values for fields added to EvalResult after this test was written."""
    from ctxplan.evaluate import HandoffReport
    from ctxplan.evaluate.results import ChunkChoice, PPComm

    return {"cached": 29, "ring": RingChoice("auto", "pass-q", "pass-kv", 0.1 + 0.2, 1 / 3,
                                             0.5, 0.25, 0.75),
            "handoff": HandoffReport("after", 3, 2, 14, 123456789012345, 123456789012345, 61,
                                     0.1 + 0.2, 1e-9 / 3),
            "breakdown": {"critical_path_s": 0.1 + 0.2, "layers": 3,
                          "op_cost_per_layer_s": {"merge_send": 1e-9 / 3},
                          "outside_layers_s": {"lm_head": 2.5},
                          "per_layer_s": {"merge_send": 1e-9 / 7, "partial_attn": 0.5}},
            "simulations": 2, "warnings": ("context_length = 2: a warning", "another"),
            "moe": MoeChoice("auto", "tp", 0.1 + 0.2, 1 / 3), "tokens_per_step": 1.85,
            "prefill_chunk": ChunkChoice("auto", 16384, 64, "one pass peaks at 1/3 GB"),
            "pp": 2, "stages": ((0, 3), (4, 6)), "pp_comm": PPComm(2, 123456789012345, 5, 2),
            "dp": 3}


def test_solve_through_the_store_reuses_every_simulation(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    kw: dict[str, Any] = dict(max_chips=16, kv_tiers="mla-fp8")
    plain = api.solve("deepseek-v3", "sg2262", "128K", **kw)
    first = api.solve("deepseek-v3", "sg2262", "128K", store=path, **kw)
    assert first.sim_calls == plain.sim_calls > 0 and first.cache_hits == 0
    assert json.dumps(first.to_dict()) == json.dumps(plain.to_dict())
    # one stored result per point; a point may take several simulations (prefill_chunk auto:
    # one pass over the memory, then chunks)
    stored = len(ResultStore(path))
    assert 0 < stored <= first.sim_calls
    # A new store handle (as a new process would have): every point is a store hit.
    again = api.solve("deepseek-v3", "sg2262", "128K", store=ResultStore(path), **kw)
    assert again.sim_calls == 0 and again.cache_hits == stored
    assert all(c.cache_hit for c in again.candidates if c.simulated)
    assert (json.dumps(_without_accounting(again.to_dict()))
            == json.dumps(_without_accounting(first.to_dict())))


def test_a_store_hit_is_a_cache_hit_not_a_simulation(tmp_path: Path) -> None:
    cfg = api.eval_config("llama3.1-8b", "h100-sxm", "8K", "decode", 2)
    st = ResultStore(tmp_path / "r.sqlite")
    c1 = EvalCache(store=st)
    r1, hit1 = c1.evaluate(cfg)
    c2 = EvalCache(store=ResultStore(tmp_path / "r.sqlite"))
    r2, hit2 = c2.evaluate(cfg)
    assert (hit1, c1.sim_calls, c1.cache_hits) == (False, 1, 0)
    assert (hit2, c2.sim_calls, c2.cache_hits) == (True, 0, 1)
    _same_fields(r1, r2)


def test_an_unreadable_row_is_a_miss_and_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    cfg = api.eval_config("llama3.1-8b", "h100-sxm", "8K", "decode", 2)
    good = api.evaluate("llama3.1-8b", "h100-sxm", "8K", "decode", 2, store=path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE results SET result = '{\"phase\": 1}' WHERE key = ?", (cfg.key(),))
    st = ResultStore(path)
    assert st.get(cfg.key()) is None and cfg.key() not in st
    cache = EvalCache(store=st)
    again, hit = cache.evaluate(cfg)
    assert not hit and cache.sim_calls == 1
    _same_fields(again, good)
    _same_fields(ResultStore(path)[cfg.key()], good)


def test_the_store_pickles_as_its_path(tmp_path: Path) -> None:
    st = ResultStore(tmp_path / "r.sqlite")
    api.evaluate("llama3.1-8b", "h100-sxm", "8K", "decode", 2, store=st)
    blob = pickle.dumps(st)
    assert len(blob) < 500   # the path, not the results
    copy = pickle.loads(blob)
    assert copy.path == st.path and len(copy) == len(st) == 1


def test_eval_cli_answers_from_the_store_byte_identically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    argv = ["eval", "--model", "deepseek-v3", "--chip", "sg2262", "--context", "1M",
            "--phase", "decode", "--cp", "16", "--json", "--store", str(tmp_path / "e.sqlite")]
    code, first, err = run_cli(argv)
    assert code == 0, err

    def no_simulation(*a: Any, **k: Any) -> Any:
        raise AssertionError("simulated although the store has the result")

    monkeypatch.setattr(api_point, "_evaluate", no_simulation)
    code, second, err = run_cli(argv)
    assert code == 0, err
    assert second == first
    with pytest.raises(AssertionError, match="simulated although"):   # --no-store simulates
        main([*argv[:-2], "--no-store"])


def test_default_path_env_and_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXPLAN_STORE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_store_path() == tmp_path / "xdg" / "ctxplan" / "results.sqlite"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_store_path() == tmp_path / "home" / ".cache" / "ctxplan" / "results.sqlite"
    monkeypatch.setenv("CTXPLAN_STORE", str(tmp_path / "env.sqlite"))
    assert default_store_path() == tmp_path / "env.sqlite"
    st = open_store(True)
    assert st is not None and st.path == tmp_path / "env.sqlite"
    for off in ("off", "OFF", "none"):
        monkeypatch.setenv("CTXPLAN_STORE", off)
        assert default_store_path() is None and open_store(True) is None
    assert open_store(None) is None and open_store(False) is None


def test_cli_writes_the_default_store_unless_told_not_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "default.sqlite"
    monkeypatch.setenv("CTXPLAN_STORE", str(path))
    argv = ["solve", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "8K",
            "--max-chips", "8", "--json"]
    code, out, err = run_cli([*argv, "--no-store"])
    assert code == 0, err
    assert not path.exists()
    code, out, err = run_cli(argv)
    assert code == 0, err
    first = json.loads(out)
    assert first["sim_calls"] > 0 and len(ResultStore(path)) >= first["sim_calls"]
    code, out, err = run_cli(argv)
    again = json.loads(out)
    assert again["sim_calls"] == 0 and again["cache_hits"] == first["sim_calls"]
    code, out, err = run_cli([*argv, "--no-store", "--store", str(path)])
    assert code == 2 and err.count("\n") == 1 and "--no-store" in err


def test_store_list_export_clear(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    sweep = api.sweep("llama3.1-8b", "h100-sxm", "8K,32K", max_chips=8, store=path)
    n = len(ResultStore(path))
    assert n >= sweep.sim_calls > 0
    flag = ["--store", str(path)]

    code, out, err = run_cli(["store", "list", *flag])
    assert code == 0, err
    assert out.startswith(f"{n} results in {path}") and "llama3.1-8b" in out
    code, out, _ = run_cli(["store", "list", *flag, "--json", "--limit", "2"])
    d = json.loads(out)
    assert d["results"] == n and d["by_sim_version"] == {SIM_VERSION: n}
    assert len(d["recent"]) == 2

    code, out, _ = run_cli(["store", "export", *flag])
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == n and len({x["key"] for x in lines}) == n
    stored = ResultStore(path)
    for x in lines:
        assert x["sim_version"] == SIM_VERSION
        _same_fields(EvalResult.from_dict(x["result"]), stored[x["key"]])
    out_csv = tmp_path / "all.csv"
    code, _, err = run_cli(["store", "export", *flag, "--out", str(out_csv)])
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out_csv.read_text())))
    assert len(rows) == n and {r["model"] for r in rows} == {"llama3.1-8b"}
    assert {int(r["context_length"]) for r in rows} == {8192, 32768}

    code, _, err = run_cli(["store", "clear", *flag])      # asks for --yes
    assert code == 2 and err.count("\n") == 1 and "--yes" in err
    assert len(ResultStore(path)) == n
    with sqlite3.connect(path) as db:                          # a row of another version
        db.execute("UPDATE results SET sim_version = 'old' WHERE rowid = "
                   "(SELECT MIN(rowid) FROM results)")
    code, out, _ = run_cli(["store", "clear", *flag, "--yes", "--stale"])
    assert code == 0 and "deleted 1 results" in out and len(ResultStore(path)) == n - 1
    code, out, _ = run_cli(["store", "clear", *flag, "--yes"])
    assert code == 0 and len(ResultStore(path)) == 0
    code, out, _ = run_cli(["store", "list", "--store", str(tmp_path / "none.sqlite")])
    assert code == 0 and out.startswith("0 results")
    assert not (tmp_path / "none.sqlite").exists()   # listing creates nothing


@pytest.mark.parametrize("what", ["text file", "directory"])
def test_a_bad_store_path_is_one_line_exit_2(
    what: str, tmp_path: Path,
) -> None:
    bad = tmp_path / "bad"
    if what == "directory":
        bad.mkdir()
    else:
        bad.write_text("not a database, just words\n" * 100)
    code, out, err = run_cli(["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm",
                           "--context", "8K", "--phase", "decode", "--cp", "2",
                           "--store", str(bad)])
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: store")
    with pytest.raises(UserInputError):
        ResultStore(bad)


def test_a_shared_cache_and_a_store_are_not_both_taken() -> None:
    with pytest.raises(UserInputError, match="either cache= or store="):
        api.solve("llama3.1-8b", "h100-sxm", "8K", cache=EvalCache(), store="x.sqlite")
