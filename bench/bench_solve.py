"""Benchmark the solver against the targets of issues 10 and 13.

    python bench/bench_solve.py            # every case (the 1M TTFT cases take minutes)
    python bench/bench_solve.py --quick    # without the 1M TTFT cases
    python bench/bench_solve.py --repeat 3 # best of 3 for the cheap cases
    python bench/bench_solve.py --budget   # the budget tables of docs/solver.md instead

Each solve runs with a fresh in-memory cache (no result store) in this process: wall time,
simulations run (``sim_calls``), the answer, and the target it is measured against. Then the
default solve through a fresh SQLite result store and again through the filled one.

Targets:
  issue 10: default solve 1M (TPOT only, TP fixed) <= 1 s; 128K --ttft-max 10s <= 3 s;
            1M --ttft-max 60s over two KV tiers <= 30 s
  issue 13: DeepSeek-V3 / SG2262 / 1M default with TP searched <= 2 s and <= 60 simulations;
            Llama 3.1 70B / H100 / 1M --ttft-max 60s --tpot-max 50ms, no TP flag: feasible,
            <= 56 chips, <= 10 s
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from timing import best_of

from ctxplan import api

DS = ("deepseek-v3", "sg2262")
TP1 = {"prefill_tp": 1, "decode_tp": 1}

# (label, model, chip, context, options, target seconds, extra check, heavy)
CASES: list[tuple[str, str, str, str, dict[str, Any], float | None, str, bool]] = [
    ("1M default, TP fixed 1", *DS, "1M", TP1, 1.0, "", False),
    ("1M default, TP searched", *DS, "1M", {}, 2.0, "sims<=60", False),
    ("1M linear, TP searched", *DS, "1M", {"strategy": "linear"}, None, "", False),
    ("1M TPOT <= 10 ms, TP searched", *DS, "1M", {"tpot_max": "10ms"}, None, "", False),
    ("1M batch auto, TP searched", *DS, "1M", {"batch": "auto"}, None, "", False),
    ("128K TTFT <= 10 s, TP fixed 1", *DS, "128K", {"ttft_max": "10s", **TP1}, 3.0, "",
     False),
    ("128K TTFT <= 10 s, TP searched", *DS, "128K", {"ttft_max": "10s"}, 3.0, "", False),
    ("70B/H100 1M TTFT 60 s TPOT 50 ms", "llama3.1-70b", "h100-sxm", "1M",
     {"ttft_max": "60s", "tpot_max": "50ms"}, 10.0, "chips<=56", False),
    ("1M TTFT <= 60 s, TP fixed 1", *DS, "1M", {"ttft_max": "60s", **TP1}, 30.0, "", True),
    ("1M TTFT <= 60 s, TP searched", *DS, "1M", {"ttft_max": "60s"}, 30.0, "", True),
]


BUDGET = [
    ("8K", "galloping", None, {}), ("8K", "linear", None, {}), ("8K", "scan", 64, {}),
    ("128K", "galloping", None, {}), ("128K", "scan", 64, {}),
    ("1M", "galloping", None, {}), ("1M", "linear", None, {}), ("1M", "scan", 64, {}),
    ("1M", "galloping", None, TP1), ("1M", "scan", 64, TP1),
]
TIGHT = [("11ms", "galloping", None), ("11ms", "linear", None), ("11ms", "scan", 128),
         ("10ms", "galloping", None), ("10ms", "linear", None), ("10ms", "scan", 128),
         ("1us", "galloping", None)]


def budget() -> None:
    """The rows of docs/solver.md, "Measured budget" (one run each, fresh cache)."""
    for context, strategy, bound, opts in BUDGET:
        kw: dict[str, Any] = {"strategy": strategy, **opts}
        if bound:
            kw["max_chips"] = bound
        wall, r = best_of(1, lambda s=context, k=kw: api.solve(*DS, s, **k))
        b = r.best
        assert b is not None
        print(f"| {context} | {strategy} | {1 if opts else 'searched'} | {bound or 1024} | "
              f"{r.sim_calls} | {r.total_chips} | {b.kv_tier} | {b.prefill.answer}x"
              f"{b.prefill.tp} + {b.decode.answer}x{b.decode.tp} | {wall:.1f} s |", flush=True)
    for tpot, strategy, bound in TIGHT:
        kw = {"strategy": strategy, "tpot_max": tpot}
        if bound:
            kw["max_chips"] = bound
        wall, r = best_of(1, lambda k=kw: api.solve(*DS, "1M", **k))
        b = r.best
        answer = (f"{r.total_chips} ({b.kv_tier}, {b.prefill.answer}x{b.prefill.tp} + "
                  f"{b.decode.answer}x{b.decode.tp})" if b else "infeasible")
        print(f"| {tpot} | {strategy} | {bound or 1024} | {r.sim_calls} | {answer} | "
              f"{'yes' if r.fallback else 'no'} | {wall:.1f} s |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="best of R runs (cheap cases)")
    ap.add_argument("--quick", action="store_true", help="skip the 1M TTFT cases")
    ap.add_argument("--budget", action="store_true", help="docs/solver.md's budget tables")
    args = ap.parse_args()
    if args.budget:
        budget()
        return

    print(f"{'case':36} {'wall s':>8} {'sims':>5} {'N*':>4} {'tier':>9} {'prefill':>9} "
          f"{'decode':>7} {'b':>3}  target")
    for label, model, chip, context, opts, target, check, heavy in CASES:
        if heavy and args.quick:
            continue
        repeat = 1 if heavy else args.repeat
        wall, r = best_of(repeat, lambda m=model, c=chip, s=context, o=opts:
                          api.solve(m, c, s, **o))
        b = r.best
        pre = f"{b.prefill.answer}x{b.prefill.tp}" if b else "-"
        dec = f"{b.decode.answer}x{b.decode.tp}" if b else "-"
        verdict = []
        if target is not None:
            verdict.append(f"<= {target:g} s: {'met' if wall <= target else 'MISSED'}")
        if check == "sims<=60":
            verdict.append(f"<= 60 sims: {'met' if r.sim_calls <= 60 else 'MISSED'}")
        if check == "chips<=56":
            ok = r.feasible and (r.total_chips or 10**9) <= 56
            verdict.append(f"feasible, <= 56 chips: {'met' if ok else 'MISSED'}")
        print(f"{label:36} {wall:>8.2f} {r.sim_calls:>5} {r.total_chips or '-':>4} "
              f"{b.kv_tier if b else '-':>9} {pre:>9} {dec:>7} "
              f"{b.decode.batch if b else '-':>3}  {'; '.join(verdict)}", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        t0 = time.perf_counter()
        first = api.solve(*DS, "1M", store=path)
        t_first = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = api.solve(*DS, "1M", store=api.open_store(path))
        t_again = time.perf_counter() - t0
    print(f"{'1M default, new SQLite store':36} {t_first:>8.2f} {first.sim_calls:>5}")
    print(f"{'again, every result from the store':36} {t_again:>8.2f} {again.sim_calls:>5} "
          f"({again.cache_hits} reused)")


if __name__ == "__main__":
    main()
