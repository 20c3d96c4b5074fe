"""Benchmark single-point evaluation: DeepSeek-V3 on SG2262 at 1M tokens.

    python bench/bench_eval.py                 # the issue's matrix, shortcut and full simulation
    python bench/bench_eval.py --quick         # shortcut only
    python bench/bench_eval.py --scaling       # also: cost against S at fixed N

Prefill at Np = 16, 64, 128 and decode at Nd = 16, 64, 256, each with every layer simulated
(the default) and with the opt-in periodic-layer shortcut (--periodic-shortcut). Each point
runs in a fresh child process so that its peak memory is its own: wall time of ``evaluate``
alone (imports and preset loading excluded), simulated events and tasks, layers simulated, and
the process's peak resident memory (``ru_maxrss``; the interpreter and imports account for the
baseline shown). With --tracemalloc the Python heap's peak is measured too (slower).

Targets (issue 6): one 1M prefill evaluation at Np = 64 under 2 s and under 1 GiB.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from typing import Any

MODEL, CHIP, CONTEXT = "deepseek-v3", "sg2262", "1M"
MATRIX = [("prefill", 16), ("prefill", 64), ("prefill", 128),
          ("decode", 16), ("decode", 64), ("decode", 256)]
SCALING = [("prefill", 64, s) for s in ("128K", "256K", "512K", "1M")] + \
          [("decode", 64, s) for s in ("128K", "256K", "512K", "1M")]
TARGET_S, TARGET_BYTES = 2.0, 2**30


def _rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # Linux: KiB


def one(phase: str, n: int, context: str, full: bool, trace_malloc: bool) -> dict[str, Any]:
    """Evaluate one point in this process and return its figures."""
    from ctxplan import api
    from ctxplan.evaluate import evaluate

    cfg = api.eval_config(MODEL, CHIP, context, phase, n, periodic_shortcut=not full)
    baseline = _rss_bytes()
    if trace_malloc:
        import tracemalloc

        tracemalloc.start()
    t0 = time.perf_counter()
    result, _ = evaluate(cfg)
    wall = time.perf_counter() - t0
    heap_peak = None
    if trace_malloc:
        import tracemalloc

        heap_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return {"phase": phase, "n": n, "context": context, "full_sim": full, "wall_s": wall,
            "events": result.events, "tasks": result.tasks,
            "layers_simulated": result.layers_simulated, "latency_s": result.latency_s,
            "peak_rss_bytes": _rss_bytes(), "baseline_rss_bytes": baseline,
            "heap_peak_bytes": heap_peak}


def run_child(phase: str, n: int, context: str, full: bool, trace_malloc: bool) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--one", phase, str(n), context]
    if full:
        cmd.append("--full-sim")
    if trace_malloc:
        cmd.append("--tracemalloc")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    data: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return data


def _mb(x: int | None) -> str:
    return "-" if x is None else f"{x / 2**20:,.0f}"


def show(rows: list[dict[str, Any]]) -> None:
    head = (f"{'phase':8} {'N':>4} {'S':>5} {'mode':9} {'wall s':>8} {'events':>10} "
            f"{'tasks':>9} {'layers':>6} {'us/task':>8} {'peak RSS MB':>11} {'base MB':>8} "
            f"{'heap MB':>8} {'latency s':>12}")
    print(head)
    print("-" * len(head))
    for r in rows:
        per = r["wall_s"] / r["tasks"] * 1e6 if r["tasks"] else 0.0
        print(f"{r['phase']:8} {r['n']:>4} {r['context']:>5} "
              f"{'full-sim' if r['full_sim'] else 'shortcut':9} {r['wall_s']:>8.2f} "
              f"{r['events']:>10,} {r['tasks']:>9,} {r['layers_simulated']:>6} {per:>8.1f} "
              f"{_mb(r['peak_rss_bytes']):>11} {_mb(r['baseline_rss_bytes']):>8} "
              f"{_mb(r['heap_peak_bytes']):>8} {r['latency_s']:>12.6f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--one", nargs=3, metavar=("PHASE", "N", "S"), help=argparse.SUPPRESS)
    ap.add_argument("--full-sim", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="shortcut only (no --full-sim runs)")
    ap.add_argument("--scaling", action="store_true", help="also vary S at N = 64")
    ap.add_argument("--tracemalloc", action="store_true",
                    help="also measure the Python heap's peak (slows the run)")
    args = ap.parse_args()
    if args.one:
        phase, n, context = args.one
        print(json.dumps(one(phase, int(n), context, args.full_sim, args.tracemalloc)))
        return

    print(f"{MODEL} on {CHIP}, S = {CONTEXT}; each point in a fresh process")
    rows = []
    modes = (False,) if args.quick else (False, True)
    for full in modes:
        for phase, n in MATRIX:
            rows.append(run_child(phase, n, CONTEXT, full, args.tracemalloc))
    show(rows)
    for r in rows:
        if r["full_sim"]:
            short = next(x for x in rows if not x["full_sim"] and x["phase"] == r["phase"]
                         and x["n"] == r["n"])
            same = "identical" if short["latency_s"] == r["latency_s"] else "DIFFERENT"
            print(f"{r['phase']} N = {r['n']}: shortcut {short['wall_s']:.2f} s vs full "
                  f"{r['wall_s']:.2f} s ({r['wall_s'] / short['wall_s']:.1f}x), latency {same}")
    target = next(r for r in rows if r["phase"] == "prefill" and r["n"] == 64
                  and not r["full_sim"])
    ok = target["wall_s"] < TARGET_S and target["peak_rss_bytes"] < TARGET_BYTES
    print(f"target: 1M prefill Np = 64 in {target['wall_s']:.2f} s (< {TARGET_S} s), peak RSS "
          f"{_mb(target['peak_rss_bytes'])} MB (< 1024 MB): {'met' if ok else 'MISSED'}")
    if args.scaling:
        print("\ncost against S at N = 64 (shortcut)")
        show([run_child(phase, n, s, False, args.tracemalloc) for phase, n, s in SCALING])


if __name__ == "__main__":
    main()
