"""Benchmark issue 22's two mechanisms: chunked prefill's cost per task, and the memory peak's.

    python bench/bench_memory.py

DeepSeek-V3 on SG2262 at 1M tokens, MLA-FP8, prefill, every layer simulated:

* time per task of a chunked evaluation (Np = 8, 64 chunks of 16K) against unchunked ones of
  about as many tasks (Np = 48 and 64, one pass): target within 1.2x;
* the memory peak (``BufferLog.peaks`` after the run) as a share of the evaluation's time,
  target under 15 %, and the buffers' storage per task, target under 30 B.

Best of three in-process evaluations each (the first run compiles and is not counted).
"""

from __future__ import annotations

import platform
import time
from pathlib import Path

from ctxplan import api
from ctxplan.evaluate import build_graph
from ctxplan.evaluate.simulate import paused_gc

POINTS = [("chunked, Np 8, 16K chunks", 8, 16384), ("one pass, Np 48", 48, "off"),
          ("one pass, Np 64", 64, "off")]


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def measure(cp: int, chunk: int | str) -> dict[str, float]:
    cfg = api.eval_config("deepseek-v3", "sg2262", "1M", "prefill", cp, kv_tier="mla-fp8",
                          prefill_chunk=chunk)
    best: dict[str, float] = {}
    for _ in range(3):
        with paused_gc():
            t0 = time.perf_counter()
            b = build_graph(cfg)
            res = b.run()
            t1 = time.perf_counter()
            b.buffers.peaks(res.start_ns, res.end_ns, res.makespan_ns)
            t2 = time.perf_counter()
        stored = sum(a.nbytes for blk in b.buffers._blocks
                     for a in (blk.chips, blk.nbytes, blk.alloc, blk.release))
        row = {"tasks": b.n_tasks, "eval_s": t2 - t0, "peak_s": t2 - t1,
               "us_per_task": (t1 - t0) / b.n_tasks * 1e6,
               "buffer_bytes_per_task": stored / b.n_tasks}
        if not best or row["eval_s"] < best["eval_s"]:
            best = row
    return best


def main() -> None:
    measure(8, 4096 * 64)   # compile and warm up
    print(f"CPU: {cpu_model()}")
    rows = {name: measure(cp, chunk) for name, cp, chunk in POINTS}
    print(f"{'point':28} {'tasks':>10} {'eval s':>8} {'us/task':>8} {'peak %':>7} "
          f"{'B/task':>7}")
    for name, r in rows.items():
        print(f"{name:28} {int(r['tasks']):>10,} {r['eval_s']:>8.2f} {r['us_per_task']:>8.3f} "
              f"{100 * r['peak_s'] / r['eval_s']:>6.1f}% {r['buffer_bytes_per_task']:>7.1f}")
    chunked = rows[POINTS[0][0]]["us_per_task"]
    for name, _, _ in POINTS[1:]:
        print(f"time per task, chunked / {name}: {chunked / rows[name]['us_per_task']:.2f}x "
              "(target <= 1.2x)")


if __name__ == "__main__":
    main()
