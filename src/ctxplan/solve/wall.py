"""The capacity wall: the smallest N whose per-chip memory fits, found without simulating.

Per-chip memory is non-increasing in N for the layouts we emit (KV shard ~ S / N, routed experts
~ E / N, prefill activations ~ S / N; the decode merge buffer grows with N but by kilobytes per
rank), so "fits" is monotone and galloping (1, 2, 4, ...) then binary search finds the wall in
O(log N) memory checks, each a few arithmetic operations.

Where the weight footprint per chip is a constant W (dense model, TP fixed: weights replicated
over CP ranks) this is the spec's  N_cap = ceil(b * S * c_kv * L / (C_chip - W_chip)),
with W_chip = weights + activations + reserve (tests/solve/test_solve_wall.py shows it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ctxplan.evaluate import MemoryReport

Memory = Callable[[int], MemoryReport]


@dataclass(frozen=True)
class Wall:
    n_cap: int | None                              # None: nothing up to the bound fits
    bound_n: int
    probes: tuple[tuple[int, MemoryReport], ...]   # memory checks in the order made

    def report(self, n: int) -> MemoryReport:
        return dict(self.probes)[n]


def capacity_wall(memory: Memory, bound_n: int) -> Wall:
    """Gallop 1, 2, 4, ... up to ``bound_n`` on ``memory(n).fits``, then binary-search."""
    probes: dict[int, MemoryReport] = {}

    def fits(n: int) -> bool:
        if n not in probes:
            probes[n] = memory(n)
        return probes[n].fits

    fail, hit, n = 0, None, 1
    while True:
        if fits(n):
            hit = n
            break
        fail = n
        if n >= bound_n:
            break
        n = min(2 * n, bound_n)
    if hit is not None:
        hit = boundary(fits, hit, fail)
    return Wall(hit, bound_n, tuple(probes.items()))


def boundary(holds: Callable[[int], bool], yes: int, no: int) -> int:
    """Binary search of a monotone ``holds`` between ``yes`` (it holds) and ``no`` (it does
    not), either above the other: the last value on the ``yes`` side, next to the first that
    fails. Each probe is the midpoint ``(yes + no) // 2``."""
    while abs(no - yes) > 1:
        mid = (yes + no) // 2
        if holds(mid):
            yes = mid
        else:
            no = mid
    return yes


def wall_reason(phase: str, wall: Wall) -> str:
    """Why nothing fits, with the numbers at the bound."""
    mem = wall.report(wall.bound_n)
    gb = 1e9
    fixed = mem.weights_bytes + mem.reserved_bytes
    head = f"{phase}: capacity wall: even N = {wall.bound_n} (the bound) does not fit"
    if fixed > mem.capacity_bytes:
        return (f"{head}: weights alone take {mem.weights_bytes / gb:.1f} GB per chip (plus "
                f"{mem.reserved_bytes / gb:.1f} GB reserve) of {mem.capacity_bytes / gb:.1f} GB")
    return (f"{head}: {mem.per_chip_bytes / gb:.1f} GB per chip > "
            f"{mem.capacity_bytes / gb:.1f} GB (weights {mem.weights_bytes / gb:.1f}, KV "
            f"{mem.kv_bytes / gb:.1f}, activations {mem.activation_bytes / gb:.1f}, reserve "
            f"{mem.reserved_bytes / gb:.1f})")
