"""Benchmark the compiled kernel against the pure-Python reference kernel and the SimPy oracle
on a contended ring workload.

    python bench/bench_kernel.py [--tasks N] [--compare-tasks M] [--repeat R]

The workload: 64 chips, each with a compute engine, an outgoing link to the next chip and an
incoming port. Two sequences (think two requests, or two layers) run a pass-KV ring at the same
time and contend for every resource: at each step every chip computes on its current KV block
while sending it on (the transfer holds the sender's link and the receiver's port at once), and
the next step waits for the compute, the send and the block arriving from the previous chip.
Durations are jittered (seeded), with ties, and transfers have a tail (link latency).

The compiled kernel and the reference kernel run the full graph (N tasks, default 1M) for
their throughput (the compiled kernel's code is loaded from numba's cache by a warm-up run
first); compiled kernel and SimPy oracle then run the same M-task graph (default 50k) for the
ratio. Every pair's makespans, starts and ends must agree exactly.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from timing import best_of

from ctxplan.sim import TaskGraph

CHIPS = 64
SEQUENCES = 2
ROOT = Path(__file__).resolve().parents[1]


def load_oracle() -> ModuleType:
    path = ROOT / "tests" / "sim" / "oracle.py"
    spec = importlib.util.spec_from_file_location("ctxplan_bench_oracle", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load the SimPy oracle from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def ring_workload(n_tasks: int, seed: int = 0, ports: bool = True) -> dict[str, Any]:
    """Plain per-task lists (the oracle's arguments) for about ``n_tasks`` tasks.

    ``ports=False`` drops the receiver port from transfers (one resource per task), the only
    shape the textbook SimPy model (processes + PriorityResource) can run.
    """
    rng = random.Random(seed)
    per_step = SEQUENCES * CHIPS * 2
    steps = max(1, n_tasks // per_step)
    comp = [3 * c for c in range(CHIPS)]
    link = [3 * c + 1 for c in range(CHIPS)]
    port = [3 * c + 2 for c in range(CHIPS)]
    duration: list[int] = []
    tail: list[int] = []
    resources: list[tuple[int, ...]] = []
    deps: list[tuple[int, ...]] = []

    def add(d: int, res: tuple[int, ...], ds: tuple[int, ...], x: int = 0) -> int:
        duration.append(d)
        tail.append(x)
        resources.append(res)
        deps.append(ds)
        return len(duration) - 1

    # prev[s][i] = (compute id, transfer id) of sequence s, chip i at the previous step.
    prev: list[list[tuple[int, int]]] = [[] for _ in range(SEQUENCES)]
    for j in range(steps):
        for s in range(SEQUENCES):
            cur = []
            for i in range(CHIPS):
                if j == 0:
                    ds: tuple[int, ...] = ()
                else:
                    c_prev, t_prev = prev[s][i]
                    ds = (c_prev, t_prev, prev[s][(i - 1) % CHIPS][1])
                c = add(1000 + 100 * rng.randrange(8) + 500 * s, (comp[i],), ds)
                t = add(
                    800 + 100 * rng.randrange(6),
                    (link[i], port[(i + 1) % CHIPS]) if ports else (link[i],),
                    ds,
                    300,
                )
                cur.append((c, t))
            prev[s] = cur
    return {
        "n_resources": 3 * CHIPS,
        "duration": duration,
        "tail": tail,
        "resources": resources,
        "deps": deps,
    }


def build(w: dict[str, Any]) -> TaskGraph:
    g = TaskGraph()
    for r in range(w["n_resources"]):
        g.add_resource(f"r{r}")
    for t, (d, x, res, ds) in enumerate(
        zip(w["duration"], w["tail"], w["resources"], w["deps"], strict=True)
    ):
        g.add_task(f"t{t}", d, res, ds, tail_ns=x)
    return g


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tasks", type=int, default=1_000_000, help="kernel-only run size")
    ap.add_argument("--compare-tasks", type=int, default=50_000, help="kernel vs SimPy size")
    ap.add_argument("--repeat", type=int, default=3, help="best of R runs")
    args = ap.parse_args()

    build(ring_workload(1000)).run()   # load the compiled code (numba's cache) once
    w = ring_workload(args.tasks)
    n = len(w["duration"])
    t0 = time.perf_counter()
    g = build(w)
    t_build = time.perf_counter() - t0
    t_run, res = best_of(args.repeat, g.run)
    print(f"workload: {CHIPS} chips x {SEQUENCES} contending pass-KV rings, 3 resources per chip")
    print(
        f"compiled  {n:>8} tasks: build {t_build:6.2f} s, run {t_run:6.2f} s = "
        f"{n / t_run:>10,.0f} tasks/s  ({res.events} events, makespan {res.makespan_ns} ns)"
    )
    r_run, r_res = best_of(1, lambda: g.run(kernel="reference"))
    print(f"reference {n:>8} tasks: run {r_run:6.2f} s = {n / r_run:>10,.0f} tasks/s; compiled is "
          f"{r_run / t_run:.1f}x faster; schedules "
          f"{'identical' if r_res == res else 'DIFFER'}")
    if r_res != res:
        raise SystemExit("compiled and reference kernels disagree")

    oracle = load_oracle()
    w = ring_workload(min(args.compare_tasks, args.tasks))
    m = len(w["duration"])
    k_run, k_res = best_of(args.repeat, build(w).run)
    s_run, s_res = best_of(args.repeat, lambda: oracle.simulate(**w))
    same = (k_res.start_ns.tolist(), k_res.end_ns.tolist()) == (s_res.start_ns, s_res.end_ns)
    print(f"compiled  {m:>8} tasks: run {k_run:6.2f} s = {m / k_run:>10,.0f} tasks/s")
    print(f"SimPy     {m:>8} tasks: run {s_run:6.2f} s = {m / s_run:>10,.0f} tasks/s")
    print(
        f"makespan kernel {k_res.makespan_ns} ns, SimPy {s_res.makespan_ns} ns; "
        f"per-task schedules {'identical' if same else 'DIFFER'}"
    )
    ratio = s_run / k_run
    print(f"compiled kernel / SimPy oracle speed ratio: {ratio:.1f}x")
    if not same or k_res.makespan_ns != s_res.makespan_ns:
        raise SystemExit("kernel and SimPy oracle disagree")

    # Reference point: the textbook SimPy model (one generator process per task, AllOf(deps),
    # PriorityResource) on the one-resource-per-task variant. It is not exact on ties (see
    # tests/sim/oracle.py), so only its speed and makespan are shown.
    w = ring_workload(min(args.compare_tasks, args.tasks), ports=False)
    k_run, k_res = best_of(args.repeat, build(w).run)
    i_run, i_res = best_of(1, lambda: oracle.simulate_idiomatic(**w))
    print(
        f"one resource per task, {m} tasks: kernel {m / k_run:,.0f} tasks/s, textbook SimPy "
        f"{m / i_run:,.0f} tasks/s, ratio {i_run / k_run:.1f}x "
        f"(makespan {k_res.makespan_ns} vs {i_res.makespan_ns} ns)"
    )


if __name__ == "__main__":
    main()
