"""The Perfetto / Chrome trace export: format rules, and that it shows what the simulation did.

``validate_trace`` checks the trace-event format (the JSON Object form of the Chrome "Trace
Event Format" document, as ui.perfetto.dev imports it): required keys per phase type, numeric
non-negative times, integer pids / tids, metadata names, flow "s" / "f" pairs that bind to a
slice on their track, and slices that never overlap on one track (each track is one exclusive
resource), also after the ``ts * 1000`` truncation some importers apply.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import json
import math
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxplan import api
from ctxplan.cli import main
from ctxplan.config.hardware_presets import load_chip, load_cluster
from ctxplan.config.model_presets import load_model
from ctxplan.evaluate import Trace, evaluate
from ctxplan.mapping import ops
from ctxplan.mapping.builder import GraphBuilder, Work
from ctxplan.report.trace import _us, chrome_trace, write_chrome_trace

METADATA_NAMES = {"process_name", "thread_name", "process_sort_index", "thread_sort_index",
                  "process_labels"}
PHASES = {"X", "M", "s", "f", "C"}


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_time(x: object) -> bool:
    return (isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            and x >= 0)


def validate_trace(data: object) -> None:
    """Raise AssertionError unless ``data`` is a valid trace-event JSON object."""
    assert isinstance(data, dict), "top level must be an object"
    events = data.get("traceEvents")
    assert isinstance(events, list), "traceEvents must be a list"
    assert data.get("displayTimeUnit", "ms") in ("ms", "ns")
    json.loads(json.dumps(data, allow_nan=False))   # plain JSON, no NaN / Infinity

    process_names: dict[int, str] = {}
    thread_names: dict[tuple[int, int], str] = {}
    slices: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    flows: dict[Any, dict[str, dict[str, Any]]] = defaultdict(dict)
    counters: dict[tuple[int, str], float] = {}
    for e in events:
        assert isinstance(e, dict), e
        ph = e.get("ph")
        assert ph in PHASES, f"unexpected phase {ph!r}"
        assert isinstance(e.get("name"), str) and e["name"], e
        assert _is_int(e.get("pid")) and _is_int(e.get("tid")), e
        if "args" in e:
            assert isinstance(e["args"], dict), e
        if ph == "M":
            assert e["name"] in METADATA_NAMES, e
            if e["name"].endswith("_name"):
                assert isinstance(e["args"].get("name"), str) and e["args"]["name"], e
                if e["name"] == "process_name":
                    assert e["pid"] not in process_names, "process named twice"
                    process_names[e["pid"]] = e["args"]["name"]
                else:
                    key = (e["pid"], e["tid"])
                    assert key not in thread_names, "thread named twice"
                    thread_names[key] = e["args"]["name"]
            elif e["name"].endswith("_sort_index"):
                assert _is_int(e["args"].get("sort_index")), e
            continue
        assert _is_time(e.get("ts")), e
        if "cat" in e:
            assert isinstance(e["cat"], str), e
        if ph == "X":
            assert _is_time(e.get("dur")), e
            slices[(e["pid"], e["tid"])].append((e["ts"], e["dur"]))
        elif ph == "C":   # a counter: values that are whole bytes, at non-decreasing times
            values = e.get("args", {})
            assert values and all(_is_int(v) and v >= 0 for v in values.values()), e
            key = (e["pid"], e["name"])
            assert e["ts"] >= counters.get(key, 0.0), f"counter {key} goes back in time"
            counters[key] = e["ts"]
        else:  # flow
            assert isinstance(e.get("cat"), str), e
            assert _is_int(e.get("id")) or isinstance(e.get("id"), str), e
            if ph == "f":
                assert e.get("bp", "e") == "e", e
            else:
                assert "bp" not in e, e
            assert ph not in flows[e["id"]], f"flow {e['id']} has two {ph!r} events"
            flows[e["id"]][ph] = e

    for pid, _ in counters:
        assert pid in process_names, f"process {pid} has a counter but no process_name"
    for key in slices:
        assert key in thread_names, f"track {key} has slices but no thread_name"
        assert key[0] in process_names, f"process {key[0]} has no process_name"
    for key, spans in slices.items():
        spans.sort()
        for conv in (lambda v: round(v * 1000), lambda v: int(v * 1000)):
            ns = [(conv(ts), conv(ts) + conv(dur)) for ts, dur in spans]
            for (_, end), (start, _) in itertools.pairwise(ns):
                assert start >= end, f"overlapping slices on track {key}"

    starts = {key: [ts for ts, _ in spans] for key, spans in slices.items()}

    def enclosed(e: dict[str, Any]) -> bool:
        key = (e["pid"], e["tid"])
        i = bisect.bisect_right(starts.get(key, []), e["ts"]) - 1  # last slice starting before
        return i >= 0 and e["ts"] <= slices[key][i][0] + slices[key][i][1]

    for fid, pair in flows.items():
        assert set(pair) == {"s", "f"}, f"flow {fid} is missing an end: {sorted(pair)}"
        s, f = pair["s"], pair["f"]
        assert (s["name"], s["cat"]) == (f["name"], f["cat"]), fid
        assert s["ts"] <= f["ts"], f"flow {fid} goes back in time"
        assert enclosed(s) and enclosed(f), f"flow {fid} does not bind to a slice"


# -- fixtures ----------------------------------------------------------------------------------

def _small(name: str, layers: int) -> Any:
    return dataclasses.replace(load_model(name), num_hidden_layers=layers)


def _trace(model: Any, chip: str, S: int, phase: str, cp: int, **kw: Any) -> Trace:
    cfg = api.eval_config(model, chip, S, phase, cp, **kw)
    result, trace = evaluate(cfg, trace=True)
    assert result.simulated and trace is not None
    return trace


@pytest.fixture(scope="module")
def prefill_trace() -> Trace:
    """Llama 3.1 8B cut to 3 layers, Np = 4 x TP 2 on one H100 host (switch ports)."""
    return _trace(_small("llama3.1-8b", 3), "h100-sxm", 3000, "prefill", 4, tp=2)


@pytest.fixture(scope="module")
def decode_trace() -> Trace:
    """DeepSeek-V3 cut to 5 layers (MoE), Nd = 12 on SG2262: a board mesh and a switch."""
    return _trace(_small("deepseek-v3", 5), "sg2262", 4096, "decode", 12, batch=3)


# -- format ------------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["prefill_trace", "decode_trace"])
def test_trace_is_valid_and_loads(which: str, request: pytest.FixtureRequest,
                                  tmp_path: Path) -> None:
    trace: Trace = request.getfixturevalue(which)
    path = tmp_path / "t.json"
    write_chrome_trace(trace, path)
    data = json.loads(path.read_text())
    validate_trace(data)
    assert data["displayTimeUnit"] == "ns"
    assert data == json.loads(json.dumps(chrome_trace(trace)))


def test_validator_rejects_broken_traces(prefill_trace: Trace) -> None:
    """The validator can fail: each rule catches a hand-made violation."""
    good = chrome_trace(prefill_trace)
    validate_trace(good)

    def broken(mutate: Any) -> dict[str, Any]:
        data = json.loads(json.dumps(good))
        mutate(data["traceEvents"])
        return data

    def first(events: list[dict[str, Any]], ph: str) -> dict[str, Any]:
        return next(e for e in events if e["ph"] == ph)

    mutations = [
        lambda ev: first(ev, "X").update(ts=-1.0),
        lambda ev: first(ev, "X").pop("dur"),
        lambda ev: first(ev, "X").update(pid="1"),
        lambda ev: first(ev, "X").update(tid=True),
        lambda ev: ev.remove(first(ev, "f")),
        lambda ev: first(ev, "M").update(name="process_title"),
        lambda ev: ev.remove(next(e for e in ev if e.get("name") == "thread_name")),
        lambda ev: ev.append(dict(first(ev, "X"))),             # a second slice on top
        lambda ev: first(ev, "s").update(ts=first(ev, "s")["ts"] + 1e9),
        lambda ev: first(ev, "C").update(args={"live_bytes": -1}),
        lambda ev: ev.append({**first(ev, "C"), "ts": -0.5}),  # a counter back in time
    ]
    for mutate in mutations:
        with pytest.raises(AssertionError):
            validate_trace(broken(mutate))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**13))
def test_times_keep_nanoseconds(ns: int) -> None:
    us = _us(ns)
    assert round(us * 1000) == ns          # an exact reader
    assert int(us * 1000) == ns            # a reader that truncates ts * 1000
    assert abs(us - ns / 1000) <= 4 * math.ulp(ns / 1000 or 1.0)


# -- content -----------------------------------------------------------------------------------

def _tracks(data: dict[str, Any]) -> tuple[dict[int, str], dict[tuple[int, int], str]]:
    procs, threads = {}, {}
    for e in data["traceEvents"]:
        if e["ph"] == "M" and e["name"] == "process_name":
            procs[e["pid"]] = e["args"]["name"]
        elif e["ph"] == "M" and e["name"] == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
    return procs, threads


@pytest.mark.parametrize("which", ["prefill_trace", "decode_trace"])
def test_slices_show_every_task_on_every_resource_it_held(which: str,
                                                         request: pytest.FixtureRequest) -> None:
    trace: Trace = request.getfixturevalue(which)
    b, res, g = trace.builder, trace.result, trace.builder.graph
    data = chrome_trace(trace)
    procs, threads = _tracks(data)
    every = [e for e in data["traceEvents"] if e["ph"] == "X"]
    # Operation costs (no resource) are drawn once, on an ops track of their chip.
    op_tasks = [t for t in range(g.n_tasks) if g.duration_ns[t] > 0 and not g.resources[t]]
    assert op_tasks and all(b.kind[t] in ops.OP_KINDS for t in op_tasks)
    op_xs = [e for e in every if e["args"]["task"] in set(op_tasks)]
    assert sorted(e["args"]["task"] for e in op_xs) == op_tasks
    for e in op_xs:
        t = e["args"]["task"]
        assert procs[e["pid"]] == f"chip {b.chip_of[t]}"
        assert re.fullmatch(rf"chip{b.chip_of[t]}\.ops\d*", threads[(e["pid"], e["tid"])])
        assert e["name"] == b.task_name(t) and e["cat"] == b.kind[t]
        assert round(e["ts"] * 1000) == res.start_ns[t]
        assert round(e["dur"] * 1000) == g.duration_ns[t]
    xs = [e for e in every if e not in op_xs]
    drawn = [t for t in range(g.n_tasks) if g.duration_ns[t] > 0 and g.resources[t]]
    # One X event per (task, resource held); zero-duration tasks are not drawn.
    assert len(xs) == sum(len(g.resources[t]) for t in drawn)
    assert Counter(e["args"]["task"] for e in xs) == {t: len(g.resources[t]) for t in drawn}
    assert set(procs.values()) == {f"chip {c}" for c in range(b.n_chips)}
    busy = {r for t in drawn for r in g.resources[t]}
    assert sorted(v for v in threads.values() if ".ops" not in v) == sorted(
        g.resource_names[r] for r in busy)
    seen: dict[int, set[str]] = defaultdict(set)
    for e in xs:
        t = e["args"]["task"]
        track = threads[(e["pid"], e["tid"])]
        seen[t].add(track)
        # The track is a resource of this task, in the process of the chip that owns it.
        rid = g.resource_names.index(track)
        assert rid in g.resources[t]
        assert procs[e["pid"]] == f"chip {b.resource_chip[rid]}"
        assert e["name"] == b.task_name(t) and e["cat"] == b.kind[t]
        assert round(e["ts"] * 1000) == res.start_ns[t]
        assert round(e["dur"] * 1000) == g.duration_ns[t]
        assert re.fullmatch(r"L\d+\.\w+(\[\d+\])?( \d+->\d+)?", e["name"]), e["name"]
        if b.peer[t] >= 0:
            assert e["args"]["bytes"] == g.nbytes[t] > 0
            assert e["name"].endswith(f" {b.chip_of[t]}->{b.peer[t]}")
        else:
            assert e["args"]["flops"] == b.flops[t]
            assert procs[e["pid"]] == f"chip {b.chip_of[t]}"
    for t in drawn:
        assert seen[t] == {g.resource_names[r] for r in g.resources[t]}


def test_switch_transfers_show_on_sender_and_receiver(prefill_trace: Trace) -> None:
    b = prefill_trace.builder
    data = chrome_trace(prefill_trace)
    procs, threads = _tracks(data)
    ring = [e for e in data["traceEvents"] if e["ph"] == "X" and e["cat"] == ops.PASS_KV_SEND]
    assert ring
    by_task: dict[int, set[str]] = defaultdict(set)
    for e in ring:
        by_task[e["args"]["task"]].add(f"{procs[e['pid']]}: {threads[(e['pid'], e['tid'])]}")
    for t, where in by_task.items():
        src, dst = b.chip_of[t], b.peer[t]
        assert where == {f"chip {src}: chip{src}.L0.tx", f"chip {dst}: chip{dst}.L0.rx"}
    # Ring steps are in the names.
    assert any("passkv_attn[3]" in e["name"] for e in data["traceEvents"] if e["ph"] == "X")


@pytest.mark.parametrize("which", ["prefill_trace", "decode_trace"])
def test_flows_link_each_transfer_to_the_compute_waiting_on_it(which: str,
                                                             request: pytest.FixtureRequest
                                                             ) -> None:
    trace: Trace = request.getfixturevalue(which)
    b, g = trace.builder, trace.builder.graph
    data = chrome_trace(trace)
    # Which slice each flow end sits in: the "s" on the transfer's first resource, the "f" on
    # the consumer's compute track.
    by_track: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in data["traceEvents"]:
        if e["ph"] == "X":
            by_track[(e["pid"], e["tid"])].append(e)

    def task_at(e: dict[str, Any]) -> int:
        hits = [x["args"]["task"] for x in by_track[(e["pid"], e["tid"])]
                if x["ts"] <= e["ts"] <= x["ts"] + x["dur"]]
        assert len(hits) == 1
        return int(hits[0])

    ends: dict[int, dict[str, int]] = defaultdict(dict)
    for e in data["traceEvents"]:
        if e["ph"] in ("s", "f"):
            ends[e["id"]][e["ph"]] = task_at(e)
    got = {(v["s"], v["f"]) for v in ends.values()}
    assert len(got) == len(ends)  # no duplicate arrows
    # Consumers are drawn compute ops; operation costs pass flows through, like joins.
    def behind(t: int) -> set[int]:
        out: set[int] = set()
        for d in g.deps[t]:
            if b.peer[d] >= 0 and g.duration_ns[d] > 0:
                out.add(d)
            elif b.peer[d] < 0 and not (g.duration_ns[d] > 0 and g.resources[d]):
                out |= behind(d)
        return out

    want = {(d, t) for t in range(g.n_tasks)
            if b.peer[t] < 0 and g.duration_ns[t] > 0 and g.resources[t] for d in behind(t)}
    assert got == want and want
    kinds = Counter((b.kind[s], b.kind[f]) for s, f in got)
    if which == "prefill_trace":
        assert kinds[(ops.PASS_KV_SEND, ops.PASS_KV_ATTN)] > 0
    else:
        assert kinds[(ops.PASS_Q_SEND, ops.PARTIAL_ATTN)] > 0
        assert kinds[(ops.MERGE_SEND, ops.ATTN_MERGE)] > 0
        assert kinds[(ops.MOE_DISPATCH, ops.EXPERTS)] > 0


def test_flows_pass_through_zero_time_joins_and_skip_empty_transfers() -> None:
    chip = load_chip("h100-sxm")
    b = GraphBuilder(chip, load_cluster("hgx-h100-ib"), 2)
    w = [Work("matmul", 1e9, 1e6, "bf16")]
    # One task per call: each call returns an array of one id.
    (a,) = b.compute(0, "ffn", w, layer=0).tolist()
    (s,) = b.send(0, 1, 10**6, ops.PASS_KV_SEND, (a,), layer=0, step=0).tolist()
    (empty,) = b.send(0, 1, 0, ops.PASS_KV_SEND, (a,), layer=0, step=1).tolist()
    (j,) = b.sync(1, "join", (s, empty), layer=0).tolist()
    (c,) = b.compute(1, ops.PASS_KV_ATTN, w, (j,), layer=0, step=1).tolist()
    res = b.run()
    data = chrome_trace(Trace(b, res))
    validate_trace(data)
    xs = {e["args"]["task"] for e in data["traceEvents"] if e["ph"] == "X"}
    assert xs == {a, s, c}                       # the join and the empty transfer: not drawn
    flows = [e for e in data["traceEvents"] if e["ph"] in ("s", "f")]
    assert len(flows) == 2                       # one arrow, s -> c, through the join
    assert {e["ph"]: e["pid"] for e in flows} == {"s": 1, "f": 2}


def test_deterministic_bytes(tmp_path: Path) -> None:
    paths = []
    for i in range(2):
        trace = _trace(_small("qwen3-235b-a22b", 2), "h100-sxm", 1000, "prefill", 3)
        paths.append(tmp_path / f"t{i}.json")
        write_chrome_trace(trace, paths[-1])
    assert paths[0].read_bytes() == paths[1].read_bytes()


# -- through the API and the CLI -----------------------------------------------------------------

def test_cli_trace_1m_decode_deepseek(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "decode.json"
    main(["eval", "--model", "deepseek-v3", "--chip", "sg2262", "--context", "1M", "--phase",
          "decode", "--cp", "16", "--trace", str(path)])
    assert "perfetto" in capsys.readouterr().out
    data = json.loads(path.read_text())
    validate_trace(data)
    names = {e["args"]["name"] for e in data["traceEvents"] if e["name"] == "process_name"}
    assert names == {f"chip {c}" for c in range(16)}
    kinds = {e["cat"] for e in data["traceEvents"] if e["ph"] == "X"}
    assert {ops.PASS_Q_SEND, ops.MERGE_SEND, ops.PARTIAL_ATTN, ops.ATTN_MERGE} <= kinds


def test_api_trace_prefill(tmp_path: Path) -> None:
    path = tmp_path / "prefill.json"
    result = api.evaluate("llama3.1-8b", "h100-sxm", "16K", "prefill", 16, trace_path=path)
    data = json.loads(path.read_text())
    validate_trace(data)
    # The trace is the graph evaluate() simulated, so it never ends after the TTFT ...
    assert result.latency_s is not None
    assert 0 < data["otherData"]["makespan_ns"] <= round(result.latency_s * 1e9)
    # ... and a trace simulates every layer, even when the periodic shortcut is asked for, so
    # it ends exactly at the TTFT.
    full = api.evaluate("llama3.1-8b", "h100-sxm", "16K", "prefill", 16, trace_path=path,
                        periodic_shortcut=True)
    data = json.loads(path.read_text())
    validate_trace(data)
    assert full.latency_s == result.latency_s
    assert data["otherData"]["makespan_ns"] == round(full.latency_s * 1e9)  # type: ignore[operator]
    # Ranks 7 -> 8 and 15 -> 0 cross hosts: their ring sends hold the scale-out ports.
    threads = {e["args"]["name"] for e in data["traceEvents"] if e["name"] == "thread_name"}
    assert {"chip7.L1.tx", "chip8.L1.rx", "chip15.L1.tx", "chip0.L1.rx"} <= threads
    layers = {e["args"]["layer"] for e in data["traceEvents"] if e["ph"] == "X"}
    assert layers == set(range(33))  # 32 layers and the LM head


def test_the_memory_counters_peak_at_the_simulated_peak(prefill_trace: Trace) -> None:
    """One counter track per chip; the fullest chip's counter peaks at the result's simulated
    live bytes (per_chip_bytes less weights and reserve)."""
    from ctxplan.report.trace import MEMORY_COUNTER

    events = [e for e in chrome_trace(prefill_trace)["traceEvents"]
              if e["ph"] == "C" and e["name"] == MEMORY_COUNTER]
    b, res = prefill_trace.builder, prefill_trace.result
    peaks = b.buffers.peaks(res.start_ns, res.end_ns, res.makespan_ns)
    by_chip: dict[int, int] = defaultdict(int)
    for e in events:
        by_chip[e["pid"] - 1] = max(by_chip[e["pid"] - 1], e["args"]["live_bytes"])
    assert sorted(by_chip) == [c for c in range(b.n_chips) if peaks.total[c] > 0]
    assert [by_chip[c] for c in sorted(by_chip)] == [int(peaks.total[c]) for c in sorted(by_chip)]
