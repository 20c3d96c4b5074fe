"""Benchmark: a DeepSeek-V4-Pro 1M prefill evaluation against DeepSeek-V3's (issue 27's target:
no slower at Np = 64 on the same machine).

    python bench/bench_v4.py                  # h20-96, Np = 64, 5 rounds
    python bench/bench_v4.py --chip gb300 --np 64 --rounds 7

Each measurement is one ``evaluate`` (every layer simulated) in a fresh child process, the
models alternating round by round so that the machine's load falls on both alike; reported:
the best and the median wall time of each, tasks and events, and the ratio V4 / V3 of the bests
and of the medians, with the CPU model and the load average (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

MODELS = (("deepseek-v3", "pass-kv"), ("deepseek-v4-pro", "pass-kv"),
          ("deepseek-v4-pro", "all-gather"))


def one(model: str, ring: str, chip: str, np_: int, context: str) -> dict[str, Any]:
    from ctxplan import api
    from ctxplan.evaluate import evaluate

    cfg = api.eval_config(model, chip, context, "prefill", np_, prefill_ring=ring)
    t0 = time.perf_counter()
    result, _ = evaluate(cfg)
    return {"wall_s": time.perf_counter() - t0, "tasks": result.tasks, "events": result.events,
            "ttft_s": result.latency_s}


def child(model: str, ring: str, chip: str, np_: int, context: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--one", model, ring, chip, str(np_), context]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    data: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return data


def cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", nargs=5, metavar=("MODEL", "RING", "CHIP", "NP", "S"))
    ap.add_argument("--chip", default="h20-96")
    ap.add_argument("--np", type=int, default=64)
    ap.add_argument("--context", default="1M")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if args.one:
        model, ring, chip, np_, context = args.one
        print(json.dumps(one(model, ring, chip, int(np_), context)))
        return
    child(*MODELS[0], args.chip, args.np, args.context)   # compile the kernel once, untimed
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {m: [] for m in MODELS}
    for _ in range(args.rounds):
        for m in MODELS:
            runs[m].append(child(*m, args.chip, args.np, args.context))
    print(f"CPU: {cpu_model()}; load average {os.getloadavg()[0]:.2f} "
          f"(1 min, at the end); {args.rounds} rounds, models alternating")
    print(f"{args.context} prefill, Np = {args.np}, chip {args.chip}, every layer simulated")
    print(f"{'model':18} {'ring':11} {'tasks':>10} {'events':>10} {'best s':>7} {'median s':>8}"
          f" {'TTFT s':>9}")
    best: dict[tuple[str, str], float] = {}
    median: dict[tuple[str, str], float] = {}
    for m, rs in runs.items():
        walls = [r["wall_s"] for r in rs]
        best[m], median[m] = min(walls), statistics.median(walls)
        r = rs[0]
        print(f"{m[0]:18} {m[1]:11} {r['tasks']:>10,} {r['events']:>10,} {best[m]:>7.2f} "
              f"{median[m]:>8.2f} {r['ttft_s']:>9.3f}")
    base = MODELS[0]
    for m in MODELS[1:]:
        print(f"{m[0]} {m[1]} / {base[0]}: best {best[m] / best[base]:.2f}x, "
              f"median {median[m] / median[base]:.2f}x")


if __name__ == "__main__":
    main()
