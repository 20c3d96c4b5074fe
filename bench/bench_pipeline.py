"""Benchmark issue 23's two targets: what a pipeline buys a prefill, and what searching it costs.

    python bench/bench_pipeline.py

* DeepSeek-V3 128K prefill on H200 (MLA-FP8, chunks by ``auto``): PP4 x TP8 against PP1 x TP8,
  simulated TTFT; target at least 2x faster.
* Solves with TTFT and TPOT targets, PP searched (``--prefill-pp auto --decode-pp auto``)
  against PP fixed to 1, wall time on this machine, simulations and the answer: DeepSeek-V3
  at 128K on H200 (TTFT <= 3 s, TPOT <= 50 ms) and at 1M on SG2262 (TTFT <= 600 s, TPOT <= 20
  ms); target: the searched solve no slower.

Each solve runs in this process with no result store, after one warm-up evaluation (the
kernel's compilation is not counted). The CPU model is printed with the figures.
"""

from __future__ import annotations

import platform
import time
from pathlib import Path

from ctxplan import api


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def prefill() -> None:
    got = {}
    for pp in (1, 4):
        r = api.evaluate("deepseek-v3", "h200", "128K", "prefill", 1, tp=8, pp=pp,
                         kv_tier="mla-fp8", store=False)
        got[pp] = r.latency_s
        print(f"128K prefill PP{pp} x TP8 ({r.chips} chips): TTFT {r.latency_s:.3f} s, "
              f"{r.prefill_chunk.chunks} chunks of {r.prefill_chunk.tokens:,}, stages "
              f"{list(r.stages)}")
    print(f"  PP4 / PP1 speed-up: {got[1] / got[4]:.2f}x (target >= 2x)")


def solves() -> None:
    cases = [("128K", "h200", "3s", "50ms"), ("1M", "sg2262", "600s", "20ms")]
    for ctx, chip, ttft, tpot in cases:
        walls = {}
        for pp in ("auto", 1):
            started = time.perf_counter()
            r = api.solve("deepseek-v3", chip, ctx, ttft_max=ttft, tpot_max=tpot, store=False,
                          prefill_pp=pp, decode_pp=pp)
            walls[pp] = time.perf_counter() - started
            b = r.best
            plan = "infeasible" if b is None else (
                f"prefill PP{b.prefill.pp} x Np {b.prefill.answer} x TP{b.prefill.tp} "
                f"(TTFT {b.prefill.latency_s:.3f} s), decode PP{b.decode.pp} x Nd "
                f"{b.decode.answer} x TP{b.decode.tp} (TPOT {b.decode.latency_s * 1e3:.1f} ms)")
            print(f"{ctx} on {chip}, PP {pp}: {walls[pp]:.1f} s, {r.sim_calls} simulations, "
                  f"N* {r.total_chips}: {plan}")
        print(f"  searched / fixed: {walls['auto'] / walls[1]:.2f}x (target <= 1x)")


if __name__ == "__main__":
    print(f"CPU: {cpu_model()}")
    api.evaluate("llama3.1-8b", "h100-sxm", "8K", "prefill", 1, store=False)   # compile
    prefill()
    solves()
