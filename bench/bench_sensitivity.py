"""Benchmark ``ctxplan sensitivity``: DeepSeek-V3 on SG2262 at 1M, the default figures and
steps (-25 %, -10 %, +10 %, +25 %).

    python bench/bench_sensitivity.py [--repeat 3]

Cold: a fresh SQLite result store, through the command line in a fresh process (every moved
solve simulated); warm: the same command again over the filled store.

Target (issue 14): <= 90 s cold.
"""

from __future__ import annotations

import argparse

from timing import cold_and_warm

COLD_TARGET_S = 90.0
ARGS = ["sensitivity", "--model", "deepseek-v3", "--chip", "sg2262", "--context", "1M",
        "--json"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="best of R runs")
    args = ap.parse_args()
    print("ctxplan " + " ".join(ARGS))
    cold, warm, d, again = cold_and_warm(ARGS, args.repeat)
    figures = d["figures"]
    assert isinstance(figures, list)
    print(f"{len(figures)} figures x {len(d['steps'])} steps "  # type: ignore[arg-type]
          f"(+ the base solve); base N* = {d['base']['total_chips']}")  # type: ignore[index]
    print(f"cold store: {cold:.2f} s ({d['sim_calls']} simulations)  target <= "
          f"{COLD_TARGET_S:.0f} s: {'met' if cold <= COLD_TARGET_S else 'MISSED'}")
    print(f"warm store: {warm:.2f} s ({again['sim_calls']} simulations, "
          f"{again['cache_hits']} reused)")


if __name__ == "__main__":
    main()
