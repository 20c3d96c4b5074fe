"""Benchmark a context sweep: DeepSeek-V3 on SG2262, 8K, 32K, 128K, 512K, 1M (5 points).

    python bench/bench_sweep.py [--workers 2] [--heavy]

Wall time of the whole sweep (solves only, no store) on each backend: serial (this process)
and local processes (``--workers``, default 2), plus Ray on a local instance if the extra is
installed (its start-up time is shown apart). Then the process backend through a fresh SQLite
store, and again through the filled store (a resumed / repeated sweep). ``--heavy`` adds the
same sweep with ``--strategy scan --max-chips 64`` (about 117 simulations per point), where
the workers have enough to do to show their speed-up.

Target (issue 6): the 5-point sweep under 60 s with 2 local workers.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from ctxplan import api
from ctxplan.sweep import ProcessExecutor, SerialExecutor

CONTEXTS = "8K,32K,128K,512K,1M"
TARGET_S = 60.0


def timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def row(label: str, wall: float, r: Any) -> None:
    print(f"{label:44} {wall:>8.2f} {r.sim_calls:>9} {r.cache_hits:>6} "
          f"{','.join(str(p.total_chips) for p in r.points):>16}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--heavy", action="store_true", help="also a scan-strategy sweep")
    args = ap.parse_args()

    print(f"deepseek-v3 on sg2262, contexts {CONTEXTS}")
    print(f"{'case':44} {'wall s':>8} {'sim_calls':>9} {'hits':>6} {'N* per point':>16}")
    cases: list[tuple[str, dict[str, Any]]] = [("default (galloping)", {})]
    if args.heavy:
        cases.append(("scan, max-chips 64", {"strategy": "scan", "max_chips": 64}))
    headline = None
    for name, kw in cases:
        def sweep(kw: dict[str, Any] = kw, **more: Any) -> Any:
            return api.sweep("deepseek-v3", "sg2262", CONTEXTS, **kw, **more)

        t_serial, serial = timed(lambda: sweep(executor=SerialExecutor()))
        row(f"{name}: serial", t_serial, serial)
        t_proc, proc = timed(lambda: sweep(executor=ProcessExecutor(args.workers)))
        row(f"{name}: {args.workers} processes", t_proc, proc)
        same = json.dumps(proc.to_dict()) == json.dumps(serial.to_dict())
        print(f"{'':44} process == serial byte for byte: {same}")
        headline = headline or t_proc
        try:
            import ray
        except ImportError:
            print(f"{name}: ray not installed (pip install 'ctxplan[ray]'), skipped")
        else:
            from ctxplan.sweep import RayExecutor

            if not ray.is_initialized():
                t_init, _ = timed(lambda: ray.init(num_cpus=args.workers,
                                                   include_dashboard=False,
                                                   log_to_driver=False,
                                                   logging_level=logging.ERROR))
                print(f"{'ray: local instance start-up':44} {t_init:>8.2f}")
            t_ray, on_ray = timed(lambda: sweep(executor=RayExecutor()))
            row(f"{name}: ray, {args.workers} CPUs", t_ray, on_ray)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        t1, first = timed(lambda: api.sweep("deepseek-v3", "sg2262", CONTEXTS, store=path,
                                            backend="process", workers=args.workers))
        row(f"{args.workers} processes, new SQLite store", t1, first)
        t2, again = timed(lambda: api.sweep("deepseek-v3", "sg2262", CONTEXTS, store=path,
                                            backend="process", workers=args.workers))
        row(f"{args.workers} processes, filled store", t2, again)
    assert headline is not None
    print(f"target: 5-point sweep with {args.workers} workers in {headline:.2f} s "
          f"(< {TARGET_S:.0f} s): {'met' if headline < TARGET_S else 'MISSED'}")


if __name__ == "__main__":
    main()
