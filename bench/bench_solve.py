"""Benchmark the solver: DeepSeek-V3 on SG2262 at 1M over its two MLA KV tiers.

    python bench/bench_solve.py [--context 1M] [--repeat 3]

Each solve runs with a fresh in-memory cache (no result store) in this process: wall time,
simulations run (``sim_calls``) and the answer, for the default strategy (galloping) and for
linear, and for a tight SLA (8 ms) that moves the answer away from the capacity wall. Then the
same solve through a fresh SQLite result store and again through the filled one (every result
reused: the store's cost per hit).

Target (issue 6): a 1M solve under 20 s.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from timing import best_of

from ctxplan import api

TARGET_S = 20.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--context", default="1M")
    ap.add_argument("--repeat", type=int, default=3, help="best of R runs")
    args = ap.parse_args()
    s = args.context

    print(f"deepseek-v3 on sg2262, S = {s}, KV tiers mla-bf16 and mla-fp8, fresh cache per run")
    print(f"{'case':34} {'wall s':>8} {'sim_calls':>9} {'hits':>5} {'N*':>4} {'tier':>9} "
          f"{'Np + Nd':>8}")
    headline = None
    for label, kw in (("galloping, TPOT <= 20 ms", {}),
                      ("linear, TPOT <= 20 ms", {"strategy": "linear"}),
                      ("galloping, TPOT <= 8 ms", {"tpot_max": "8ms"}),
                      ("linear, TPOT <= 8 ms", {"strategy": "linear", "tpot_max": "8ms"})):
        wall, r = best_of(args.repeat, lambda kw=kw: api.solve("deepseek-v3", "sg2262", s, **kw))
        b = r.best
        split = f"{b.prefill.answer} + {b.decode.answer}" if b else "-"
        print(f"{label:34} {wall:>8.3f} {r.sim_calls:>9} {r.cache_hits:>5} "
              f"{r.total_chips or '-':>4} {b.kv_tier if b else '-':>9} {split:>8}", flush=True)
        headline = headline or (wall, r)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        t0 = time.perf_counter()
        first = api.solve("deepseek-v3", "sg2262", s, store=path)
        t_first = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = api.solve("deepseek-v3", "sg2262", s, store=api.open_store(path))
        t_again = time.perf_counter() - t0
    print(f"{'through a new SQLite store':34} {t_first:>8.3f} {first.sim_calls:>9} "
          f"{first.cache_hits:>5}")
    print(f"{'again, every result from the store':34} {t_again:>8.3f} {again.sim_calls:>9} "
          f"{again.cache_hits:>5}")
    assert headline is not None
    wall, r = headline
    print(f"target: {s} solve in {wall:.3f} s (< {TARGET_S:.0f} s): "
          f"{'met' if wall < TARGET_S else 'MISSED'}")


if __name__ == "__main__":
    main()
