"""The search core: the first candidate N whose latency meets a limit.

Pure: it sees a sorted list of candidates (all at or above the capacity wall) and a callable
``latency(n) -> seconds | None`` (None: the point could not be run, e.g. it does not fit), so the
tests can drive it with synthetic curves. The answer it aims at is the spec's definition,
``min { N in candidates : latency(N) <= limit }``.

Strategies (docs/solver.md):
* ``linear``: from the wall upward, stop at the first pass. Exact by construction; O(N) probes.
* ``galloping`` (default): probe offsets 0, 1, 3, 7, 15 ... from the wall until one passes, then
  binary-search the bracket. O(log N) probes, exact when the passing set is upward-closed.
  Because it cannot be trusted blindly, it checks itself and falls back to a scan (below).
* ``scan``: every candidate up to the bound (verification and full curves).

Galloping's self-check, and what it does when the check fails:
1. The candidate just below the answer must fail (binary search guarantees it was probed) and
   the ``verify_above`` candidates just above must pass.
2. The failing probes below the answer, taken in order of N, must have non-increasing latency:
   a rise means the curve turned, and a pass window may hide between probes.
If 1 or 2 fails, scan linearly from the wall up to the first pass (at most up to the answer found).
If nothing passed up to the bound: with non-increasing probed latencies the point is infeasible;
otherwise (the curve turned, e.g. large N where pass-Q and merge outgrow the KV-read saving) scan
the bracket around the lowest probed latency, where a unimodal curve has its minimum.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

STRATEGIES = ("galloping", "linear", "scan")

Latency = Callable[[int], float | None]


@dataclass(frozen=True)
class Probe:
    """One evaluated candidate, in the order the search asked for it."""

    n: int
    latency_s: float | None   # None: not run (does not fit)
    passed: bool
    step: str                 # "linear" | "scan" | "gallop" | "binary" | "verify" | "fallback"


@dataclass(frozen=True)
class SearchOutcome:
    answer: int | None            # None: no candidate passes (as far as the strategy looked)
    probes: tuple[Probe, ...]
    strategy: str
    fallback: bool = False        # galloping distrusted itself and scanned
    fallback_reason: str = ""
    scanned: tuple[int, int] | None = None   # the N interval the fallback scanned

    def best(self) -> Probe | None:
        """The probe with the lowest latency (for infeasibility messages)."""
        run = [p for p in self.probes if p.latency_s is not None]
        return min(run, key=lambda p: (p.latency_s, p.n)) if run else None


class _Prober:
    """Memoises probes by N so no search step asks the evaluator twice for one point."""

    def __init__(self, cands: Sequence[int], latency: Latency, limit_s: float) -> None:
        self.cands = cands
        self.latency = latency
        self.limit_s = limit_s
        self.seen: dict[int, Probe] = {}
        self.order: list[Probe] = []

    def probe(self, i: int, step: str) -> Probe:
        n = self.cands[i]
        if n not in self.seen:
            lat = self.latency(n)
            p = Probe(n, lat, lat is not None and lat <= self.limit_s, step)
            self.seen[n] = p
            self.order.append(p)
        return self.seen[n]

    def passes(self, i: int, step: str) -> bool:
        return self.probe(i, step).passed

    def first_pass(self, lo: int, hi: int, step: str) -> int | None:
        """Index of the first passing candidate in [lo, hi], probing upward; None if none."""
        for i in range(lo, hi + 1):
            if self.passes(i, step):
                return i
        return None


def search(
    cands: Sequence[int],
    latency: Latency,
    limit_s: float,
    strategy: str = "galloping",
    *,
    verify_above: int = 2,
) -> SearchOutcome:
    """The first candidate meeting ``latency(n) <= limit_s`` (see the module docstring)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; use one of {STRATEGIES}")
    if list(cands) != sorted(set(cands)):
        raise ValueError("candidates must be strictly increasing")
    pr = _Prober(cands, latency, limit_s)
    if not cands:
        return SearchOutcome(None, (), strategy)
    last = len(cands) - 1
    if strategy == "linear":
        found = pr.first_pass(0, last, "linear")
        return _outcome(pr, found, strategy)
    if strategy == "scan":
        for i in range(len(cands)):
            pr.probe(i, "scan")
        passing = [i for i in range(len(cands)) if pr.seen[cands[i]].passed]
        return _outcome(pr, passing[0] if passing else None, strategy)
    return _galloping(pr, verify_above)


def _outcome(pr: _Prober, index: int | None, strategy: str, **kw: object) -> SearchOutcome:
    answer = pr.cands[index] if index is not None else None
    return SearchOutcome(answer, tuple(pr.order), strategy, **kw)  # type: ignore[arg-type]


def _galloping(pr: _Prober, verify_above: int) -> SearchOutcome:
    cands = pr.cands
    last = len(cands) - 1
    fail, hit, i, stride = -1, None, 0, 1
    while True:
        if pr.passes(i, "gallop"):
            hit = i
            break
        fail = i
        if i == last:
            break
        i = min(i + stride, last)
        stride *= 2
    if hit is None:
        return _all_failed(pr)
    while hit - fail > 1:
        mid = (fail + hit) // 2
        if pr.passes(mid, "binary"):
            hit = mid
        else:
            fail = mid
    doubt = _doubt_below(pr, hit)
    for j in range(hit + 1, min(hit + verify_above, last) + 1):
        if doubt:
            break  # already distrusted: the fallback scan only looks below the answer
        p = pr.probe(j, "verify")
        if not p.passed:
            doubt = (f"N={p.n} above the answer N={cands[hit]} misses the limit "
                     f"({fmt_seconds(p.latency_s)} > {fmt_seconds(pr.limit_s)})")
    if not doubt:
        return _outcome(pr, hit, "galloping")
    found = pr.first_pass(0, hit, "fallback")
    return _outcome(pr, found, "galloping", fallback=True,
                    fallback_reason=f"not monotone: {doubt}; scanned from the wall "
                    f"N={cands[0]} up to the first pass",
                    scanned=(cands[0], cands[found if found is not None else hit]))


def _doubt_below(pr: _Prober, hit: int) -> str:
    """Why the failing probes below the answer cast doubt on it ("" when they do not)."""
    below = sorted((p for p in pr.seen.values() if p.n < pr.cands[hit]), key=lambda p: p.n)
    return _first_rise(below)


def _first_rise(probes: list[Probe]) -> str:
    """The first place where latency rises with N among probes sorted by N ("" if none).

    A point that could not run counts as infinitely slow."""
    inf = float("inf")
    for a, b in pairwise(probes):
        la = inf if a.latency_s is None else a.latency_s
        lb = inf if b.latency_s is None else b.latency_s
        if lb > la:
            return (f"latency rises from {fmt_seconds(a.latency_s)} at N={a.n} to "
                    f"{fmt_seconds(b.latency_s)} at N={b.n}")
    return ""


def _all_failed(pr: _Prober) -> SearchOutcome:
    """Galloping reached the bound without a pass: trust it only if latency kept falling."""
    probed = sorted(pr.seen.values(), key=lambda p: p.n)
    rise = _first_rise(probed)
    if not rise:
        return _outcome(pr, None, "galloping")
    # Scan between the probes around the fastest one: a unimodal curve has its minimum there,
    # and any pass window of such a curve contains that minimum.
    run = [p for p in probed if p.latency_s is not None]
    k = min(range(len(run)), key=lambda j: (run[j].latency_s, run[j].n))
    # The bracket is inclusive of the two neighbouring probes (already probed, so free).
    index = {n: i for i, n in enumerate(pr.cands)}
    lo = index[run[k - 1].n] if k > 0 else 0
    hi = index[run[k + 1].n] if k + 1 < len(run) else len(pr.cands) - 1
    found = pr.first_pass(lo, hi, "fallback")
    return _outcome(pr, found, "galloping", fallback=True,
                    fallback_reason=f"not monotone: {rise}; scanned N in "
                    f"[{pr.cands[lo]}, {pr.cands[hi]}] around the lowest latency "
                    f"(N={run[k].n}), where a unimodal curve has its minimum",
                    scanned=(pr.cands[lo], pr.cands[hi]))


def fmt_seconds(x: float | None) -> str:
    if x is None:
        return "does not fit"
    if x >= 1:
        return f"{x:.3f} s"
    if x >= 1e-3:
        return f"{x * 1e3:.3f} ms"
    return f"{x * 1e6:.3f} us"
