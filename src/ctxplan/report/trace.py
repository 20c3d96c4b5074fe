"""Export a simulated op graph as a Chrome trace-event JSON that ui.perfetto.dev opens.

Layout of the trace (docs/architecture.md, "Trace"):

* **one process per chip**: pid = chip + 1, named ``chip N`` (pid 0 is the idle task to some
  importers, so ids start at 1);
* **one thread (track) per resource that was busy**, inside the process of the chip that owns it
  (``GraphBuilder.resource_chip``): the compute engine, and every link direction or port the
  transfers held (``chip3.L1.tx``, ``chip5.L1.rx``, ``chip0->chip1.L0``, ...). tid = resource
  id + 1, unique over the whole trace, so (pid, tid) never clashes; the thread is named after
  the resource. Resources that no drawn task held get no track.
* **one "X" (complete) event per task per resource it held**: a compute op appears once, on its
  chip's compute track; a transfer appears on *every* resource it held (on a switch the
  sender's tx port, in the sender's process, and the receiver's rx port, in the receiver's
  process; on a full mesh its one directional link), so every track shows that link's true
  occupancy. ``dur`` is the time the resources were held; a transfer's latency tail (which
  does not hold the link) is in ``args.latency_ns`` and ``args.end_ns``.
* Zero-duration tasks (syncs, empty transfers) are not drawn: they occupy nothing.
* The fixed cost of a communication operation (launch, proxy, synchronisation: a task that
  holds no resource, kind ``<kind>.op``) is drawn on a track of its chip, ``chipN.ops`` (more
  lanes, ``chipN.ops2`` ..., where two overlap; tid = number of resources + 1 + lane x chips +
  chip), so the gaps it leaves on the compute and link tracks are explained. For the flow
  arrows it is a join, like a zero-time one.
* **one memory counter track per chip** ("C" events named ``memory (live KV + buffers)``,
  ``args.live_bytes``): the bytes of KV and transient buffers live on the chip from each
  instant they change, by the buffers the graph declares (mapping/buffers.py; the weights,
  static, are not in it).
* **flow arrows** ("s" / "f" with a shared id, ``"bp": "e"``) from each drawn transfer to every
  drawn compute op that depends on it, directly or through undrawn zero-time joins. The "s" end
  sits mid-slice on the transfer's first resource (the sender's tx / the link); the "f" end
  mid-slice on the consumer's compute track, so both bind to their enclosing slice.

The trace is the graph :func:`ctxplan.evaluate.evaluate` simulated: every layer and the LM head
(``api.evaluate`` with a ``trace_path`` never takes the periodic-layer shortcut). A trace of an
evaluation that took the shortcut (``EvalResult.layers_simulated`` below the model's layers)
would show the first few layers only and end before the reported latency.

Times are microseconds as the format requires, with nanosecond precision: ``ts`` and ``dur``
are floats chosen so that both an exact decimal parse and a ``value * 1000`` truncation (what
some importers do) recover the simulator's integer nanoseconds; slices that touch therefore
never overlap by a rounding nanosecond. The output is deterministic: events in task-id order,
one event per line.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from ctxplan.evaluate import Trace

FLOW_NAME = "depends"
FLOW_CAT = "dep"
MEMORY_COUNTER = "memory (live KV + buffers)"


def _us(ns: int) -> float:
    """``ns`` in microseconds, nudged up by ulps until ``int(us * 1000) == ns`` holds too."""
    v = ns / 1000.0
    while int(v * 1000.0) < ns:
        v = math.nextafter(v, math.inf)
    return v


def chrome_trace(trace: Trace) -> dict[str, Any]:
    """The trace-event JSON object (``{"traceEvents": [...], "displayTimeUnit": "ns"}``)."""
    b = trace.builder
    g = b.graph
    res = trace.result
    n_tasks = g.n_tasks
    compute_res = set(b.compute_res.tolist())
    # Plain Python lists of the per-task arrays (JSON wants Python numbers).
    duration, tail, nbytes, start_ns, end_ns = (a.tolist() for a in (
        g.duration_ns, g.tail_ns, g.nbytes, res.start_ns, res.end_ns))
    layer_of, step_of, chip_of, peer_of, flops_of = (a.tolist() for a in (
        b.layer, b.step, b.chip_of, b.peer, b.flops))
    resources = g.resources.rows()
    deps = g.deps.rows()
    kinds = b.kind
    drawn = [duration[t] > 0 and bool(resources[t]) for t in range(n_tasks)]
    op_cost = [duration[t] > 0 and not resources[t] for t in range(n_tasks)]
    n_res = g.n_resources

    def owner_pid(rid: int) -> int:
        chip = b.resource_chip[rid]
        return (chip if chip >= 0 else b.n_chips) + 1

    used: set[int] = set()
    for t in range(n_tasks):
        if drawn[t]:
            used.update(resources[t])

    events: list[dict[str, Any]] = []
    # -- metadata: processes (chips) and threads (busy resources) -------------------------------
    pids = sorted({owner_pid(r) for r in used})
    for pid in pids:
        name = f"chip {pid - 1}" if pid <= b.n_chips else "links"
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                       "args": {"name": name}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                       "args": {"sort_index": pid}})
    for rid in sorted(used):
        pid, tid = owner_pid(rid), rid + 1
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                       "args": {"name": g.resource_names[rid]}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                       "args": {"sort_index": 0 if rid in compute_res else rid + 1}})
    # Operation costs hold no resource, so two of one chip may overlap in time: each goes to
    # the chip's first ops lane free at its start (lanes: chipN.ops, chipN.ops2, ...).
    lane_of: dict[int, int] = {}
    lane_end: dict[int, list[int]] = defaultdict(list)
    for t in sorted((t for t in range(n_tasks) if op_cost[t]), key=lambda t: (start_ns[t], t)):
        ends = lane_end[chip_of[t]]
        lane = next((i for i, e in enumerate(ends) if e <= start_ns[t]), len(ends))
        if lane == len(ends):
            ends.append(0)
        ends[lane] = start_ns[t] + duration[t]
        lane_of[t] = lane

    def op_tid(chip: int, lane: int) -> int:
        return n_res + 1 + lane * b.n_chips + chip

    named = {e["pid"] for e in events if e["name"] == "process_name"}
    for chip in sorted(lane_end):
        pid = chip + 1
        if pid not in named:
            events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                           "args": {"name": f"chip {chip}"}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                           "args": {"sort_index": pid}})
        for lane in range(len(lane_end[chip])):
            tid = op_tid(chip, lane)
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": f"chip{chip}.ops" + (f"{lane + 1}" if lane else "")}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                           "args": {"sort_index": n_res + 1 + lane}})

    # -- slices -----------------------------------------------------------------------------
    for t in range(n_tasks):
        if op_cost[t]:
            args_op: dict[str, Any] = {"task": t, "kind": kinds[t], "layer": layer_of[t],
                                       "chip": chip_of[t], "start_ns": start_ns[t],
                                       "dur_ns": duration[t], "end_ns": end_ns[t]}
            if step_of[t] >= 0:
                args_op["step"] = step_of[t]
            events.append({"ph": "X", "name": b.task_name(t), "cat": kinds[t],
                           "pid": chip_of[t] + 1, "tid": op_tid(chip_of[t], lane_of[t]),
                           "ts": _us(start_ns[t]), "dur": _us(duration[t]), "args": args_op})
            continue
        if not drawn[t]:
            continue
        start, dur = start_ns[t], duration[t]
        is_transfer = peer_of[t] >= 0
        args: dict[str, Any] = {"task": t, "kind": kinds[t], "layer": layer_of[t]}
        if step_of[t] >= 0:
            args["step"] = step_of[t]
        if is_transfer:
            args.update(src_chip=chip_of[t], dst_chip=peer_of[t], bytes=nbytes[t],
                        latency_ns=tail[t],
                        links=[g.resource_names[r] for r in resources[t]])
        else:
            args.update(chip=chip_of[t], flops=flops_of[t])
        args.update(start_ns=start, dur_ns=dur, end_ns=end_ns[t])
        for rid in resources[t]:
            events.append({"ph": "X", "name": b.task_name(t), "cat": kinds[t],
                           "pid": owner_pid(rid), "tid": rid + 1, "ts": _us(start),
                           "dur": _us(dur), "args": args})

    # -- flows: transfer -> compute that waits on it ----------------------------------------
    sources: dict[int, tuple[int, ...]] = {}   # per undrawn task: the drawn transfers behind it

    def transfers_behind(t: int) -> tuple[int, ...]:
        """Drawn transfers that ``t`` (an undrawn non-transfer join) passes on."""
        out = sources.get(t)
        if out is not None:
            return out
        found: dict[int, None] = {}
        stack = [t]
        seen = {t}
        while stack:
            u = stack.pop()
            for d in deps[u]:
                if d in seen:
                    continue
                seen.add(d)
                if drawn[d]:
                    if peer_of[d] >= 0:
                        found[d] = None
                elif peer_of[d] < 0:
                    stack.append(d)
        out = tuple(sorted(found))
        sources[t] = out
        return out

    flow_id = 0
    for t in range(n_tasks):
        if not drawn[t] or peer_of[t] >= 0:
            continue
        senders: dict[int, None] = {}
        for d in deps[t]:
            if drawn[d]:
                if peer_of[d] >= 0:
                    senders[d] = None
            elif peer_of[d] < 0:
                senders.update(dict.fromkeys(transfers_behind(d)))
        if not senders:
            continue
        c_rid = resources[t][0]
        f_ts = _us(start_ns[t]) + _us(duration[t]) / 2
        for s in sorted(senders):
            flow_id += 1
            s_rid = resources[s][0]
            s_ts = _us(start_ns[s]) + _us(duration[s]) / 2
            events.append({"ph": "s", "name": FLOW_NAME, "cat": FLOW_CAT, "id": flow_id,
                           "pid": owner_pid(s_rid), "tid": s_rid + 1, "ts": s_ts})
            events.append({"ph": "f", "bp": "e", "name": FLOW_NAME, "cat": FLOW_CAT,
                           "id": flow_id, "pid": owner_pid(c_rid), "tid": c_rid + 1,
                           "ts": f_ts})

    # -- memory: one counter track per chip, its live bytes from the simulated schedule ------
    # (mapping/buffers.py: KV and transient buffers; weights are static and left out)
    for chip, (times, live) in sorted(b.buffers.series(res.start_ns, res.end_ns,
                                                       res.makespan_ns).items()):
        for ts, value in zip(times.tolist(), live.tolist(), strict=True):
            events.append({"ph": "C", "name": MEMORY_COUNTER, "pid": chip + 1, "tid": 0,
                           "ts": _us(ts), "args": {"live_bytes": value}})

    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"makespan_ns": res.makespan_ns, "chips": b.n_chips, "tasks": n_tasks,
                      "generator": "ctxplan"},
    }


def write_chrome_trace(trace: Trace, path: str | Path) -> None:
    """Write :func:`chrome_trace` to ``path`` (one event per line, deterministic bytes)."""
    data = chrome_trace(trace)
    encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
    lines = ",\n".join(map(encode, data["traceEvents"]))
    rest = encode({k: v for k, v in data.items() if k != "traceEvents"})
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"traceEvents":[\n' + lines + "\n],\n" + rest[1:] + "\n")
