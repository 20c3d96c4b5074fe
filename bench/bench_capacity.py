"""Benchmark ``ctxplan capacity``: DeepSeek-V3 on SG2262 at 128K, four arrival rates.

    python bench/bench_capacity.py [--repeat 3]

Cold: a fresh SQLite result store (every instance-level evaluation simulated, plus the solve
of the shapes); warm: the same command through the filled store (every evaluation reused: the
request-level simulations and the searches over (x, y) are what is left). Each through the
command line, as a user runs it, in a fresh process.

Targets (issue 14): <= 30 s cold, <= 3 s warm.
"""

from __future__ import annotations

import argparse

from timing import cold_and_warm

COLD_TARGET_S = 30.0
WARM_TARGET_S = 3.0
ARGS = ["capacity", "--model", "deepseek-v3", "--chip", "sg2262", "--contexts", "128K",
        "--rates", "0.05/s,0.1/s,0.2/s,0.5/s", "--ttft-max", "60s", "--json"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="best of R runs")
    args = ap.parse_args()
    print("ctxplan " + " ".join(ARGS))
    cold, warm, d, again = cold_and_warm(ARGS, args.repeat)
    for p in d["points"]:  # type: ignore[union-attr]
        print(f"  {p['rate_per_s']:>6}/s  {p['layout']:>7}  {p['total_chips']:>4} chips  TTFT "
              f"p90 {p['ttft_percentile_s']:.1f} s  TPOT p90 {1e3 * p['tpot_percentile_s']:.2f}"
              " ms")
    print(f"cold store: {cold:.2f} s ({d['sim_calls']} simulations)  target <= "
          f"{COLD_TARGET_S:.0f} s: {'met' if cold <= COLD_TARGET_S else 'MISSED'}")
    print(f"warm store: {warm:.2f} s ({again['sim_calls']} simulations, {again['cache_hits']} "
          f"reused)  target <= {WARM_TARGET_S:.0f} s: "
          f"{'met' if warm <= WARM_TARGET_S else 'MISSED'}")


if __name__ == "__main__":
    main()
