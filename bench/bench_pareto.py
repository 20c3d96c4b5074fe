"""Benchmark ``ctxplan pareto``: DeepSeek-V3 on H200 at 128K, the prefill pool sized for a 10 s
TTFT, both MLA tiers, TP searched.

    python bench/bench_pareto.py [--repeat 3]

Cold: a fresh SQLite result store, through the command line in a fresh process (every shape
simulated); warm: the same command again over the filled store.

Targets (issue 25): <= 60 s and <= 200 simulations cold; the front monotone (tokens/s per chip
never rising along it as tokens/s per user rises).
"""

from __future__ import annotations

import argparse
from itertools import pairwise

from timing import cold_and_warm

COLD_TARGET_S = 60.0
SIM_TARGET = 200
ARGS = ["pareto", "--model", "deepseek-v3", "--chip", "h200", "--context", "128K",
        "--ttft-max", "10s", "--json"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="best of R runs")
    args = ap.parse_args()
    print("ctxplan " + " ".join(ARGS))
    cold, warm, d, again = cold_and_warm(ARGS, args.repeat)
    front = d["front"]
    assert isinstance(front, list)
    per_chip = [p["tokens_per_s_per_chip"] for p in front]
    monotone = all(b <= a for a, b in pairwise(per_chip))
    sims = d["sim_calls"]
    assert isinstance(sims, int)
    print(f"{len(d['points'])} shapes, {len(front)} on the front; "  # type: ignore[arg-type]
          f"monotone: {'yes' if monotone else 'NO'}")
    print(f"cold store: {cold:.2f} s ({sims} simulations)  targets <= {COLD_TARGET_S:.0f} s, "
          f"<= {SIM_TARGET} simulations: "
          f"{'met' if cold <= COLD_TARGET_S and sims <= SIM_TARGET else 'MISSED'}")
    print(f"warm store: {warm:.2f} s ({again['sim_calls']} simulations, "
          f"{again['cache_hits']} reused)")


if __name__ == "__main__":
    main()
