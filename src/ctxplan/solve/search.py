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

Given a ``lower_bound(n)`` (a latency the simulation can never beat at n: the TTFT roofline of
:mod:`ctxplan.solve.roofline`), every candidate whose bound misses the limit is skipped (it cannot
pass), by ``linear`` and ``galloping`` alike, and galloping becomes the **guided** search for
expensive curves (docs/solver.md, "The TTFT search"): each probe goes where the curve of the
probes so far, fitted as latency = a / N + b, crosses the limit, safeguarded by bisection; it ends
with the answer and the candidate below it both probed (the one below failing).

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

import math
from bisect import bisect_left
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
    # The largest candidate skipped because its lower bound already misses the limit, and that
    # bound (None: nothing skipped). Every candidate below it is skipped too.
    bound_cut: tuple[int, float] | None = None

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
    lower_bound: Callable[[int], float] | None = None,
    hint: int | None = None,
) -> SearchOutcome:
    """The first candidate meeting ``latency(n) <= limit_s`` (see the module docstring).

    ``lower_bound(n)``, when given, must never exceed ``latency(n)``: candidates whose bound
    misses the limit are skipped (not by ``scan``, which looks at everything), and galloping
    becomes the guided search. ``hint`` is where the guided search probes first when it has
    no probe of its own (the answer another TP or KV tier predicts); None: the first candidate
    the bound lets through."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; use one of {STRATEGIES}")
    if list(cands) != sorted(set(cands)):
        raise ValueError("candidates must be strictly increasing")
    cut: tuple[int, float] | None = None
    if lower_bound is not None and strategy != "scan":
        first = _first_within_bound(cands, lower_bound, limit_s)
        if first > 0:
            cut = (cands[first - 1], lower_bound(cands[first - 1]))
    pr = _Prober(cands, latency, limit_s)
    if not cands:
        return SearchOutcome(None, (), strategy)
    last = len(cands) - 1
    if strategy == "linear":
        lo = 0 if cut is None else cands.index(cut[0]) + 1
        found = pr.first_pass(lo, last, "linear") if lo <= last else None
        if found is not None and found == lo and lo > 0 and pr.passes(lo - 1, "verify"):
            # The bound ruled out the answer's predecessor, which is simulated anyway (the
            # answer always has a simulated, failing predecessor) and passed: a wrong bound.
            found = pr.first_pass(0, lo - 1, "linear")
        return _outcome(pr, found, strategy, bound_cut=cut)
    if strategy == "scan":
        for i in range(len(cands)):
            pr.probe(i, "scan")
        passing = [i for i in range(len(cands)) if pr.seen[cands[i]].passed]
        return _outcome(pr, passing[0] if passing else None, strategy)
    if lower_bound is not None:
        lo = 0 if cut is None else cands.index(cut[0]) + 1
        if lo > last:
            return _outcome(pr, None, "galloping", bound_cut=cut)
        return _guided(pr, lo, hint, cut)
    return _galloping(pr, verify_above)


def _first_within_bound(cands: Sequence[int], lower_bound: Callable[[int], float],
                        limit_s: float) -> int:
    """Index of the first candidate whose lower bound meets the limit (len: none does). The
    bound falls with N (more chips share the same work), so binary search finds it."""
    lo, hi = 0, len(cands)
    while lo < hi:
        mid = (lo + hi) // 2
        if lower_bound(cands[mid]) <= limit_s:
            hi = mid
        else:
            lo = mid + 1
    return lo


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


def fit_inverse(points: Sequence[tuple[int, float]]) -> tuple[float, float] | None:
    """(a, b) of latency = a / N + b through two points (N1, T1), (N2, T2) with N1 != N2, or
    through one point with b = 0 (latency proportional to 1 / N). None when the points do not
    give a falling curve (a <= 0)."""
    if len(points) == 1:
        n, t = points[0]
        return (n * t, 0.0) if t > 0 else None
    (n1, t1), (n2, t2) = points[0], points[1]
    a = (t1 - t2) / (1.0 / n1 - 1.0 / n2)
    if not a > 0:
        return None
    return a, t1 - a / n1


def crossing(fit: tuple[float, float], limit_s: float) -> float:
    """The N at which a / N + b meets the limit (inf when b alone misses it)."""
    a, b = fit
    return a / (limit_s - b) if limit_s > b else float("inf")


def _guided(pr: _Prober, lo: int, hint: int | None,
            cut: tuple[int, float] | None) -> SearchOutcome:
    """The guided search (docs/solver.md, "The TTFT search"): candidates below ``lo`` cannot
    pass (lower bound). Each probe goes where a / N + b through the two probes nearest the
    limit (one probe: a / N through it) meets it; before any pass at least one candidate
    above the last failure, with a doubling minimum step after four misses; once bracketed,
    inside the bracket, or its middle when the bracket did not halve in two probes. It stops
    when the answer and the candidate below it are both probed (below: failing)."""
    cands = pr.cands
    last = len(cands) - 1
    fail, hit = lo - 1, None
    misses = 0
    widths: list[int] = []

    def index_at(n: float) -> int:
        """The first candidate index at or above N = n (last + 1 when none)."""
        if n == float("inf"):
            return last + 1
        return bisect_left(cands, math.ceil(n - 1e-9))

    def predict() -> int | None:
        run = [(p.n, p.latency_s, p.passed) for p in pr.seen.values()
               if p.latency_s is not None]
        if not run:
            if hint is None:
                return None
            return index_at(hint)
        fails = sorted((n, t) for n, t, ok in run if not ok)
        passes = sorted((n, t) for n, t, ok in run if ok)
        if fails and passes:
            pts = [fails[-1], passes[0]]
        else:
            pts = sorted(sorted(((n, t) for n, t, _ in run),
                                key=lambda q: abs(q[1] - pr.limit_s))[:2])
        fit = fit_inverse(pts)
        return None if fit is None else index_at(crossing(fit, pr.limit_s))

    real_fail = False           # a probe has failed (not only the bound's cut below lo)
    passes = 0                  # probes that passed before any failed
    while hit is None or hit - fail > 1:
        if hit is None and fail >= last:
            break
        guess = predict()
        if hit is None:
            # Climbing: at least one past the last failure; a doubling step after 4 misses.
            step = 1 if misses < 4 else 2 ** (misses - 3)
            i = min(max(guess if guess is not None else fail + step, fail + step), last)
        elif not real_fail:
            # Descending from a pass with nothing failed yet: the mirror image.
            step = 1 if passes < 4 else 2 ** (passes - 3)
            i = max(min(guess if guess is not None else hit - step, hit - step), fail + 1)
        else:
            i = guess if guess is not None else (fail + hit) // 2
            if len(widths) >= 3 and widths[-1] > widths[-3] // 2:
                i = (fail + hit) // 2     # the fit did not halve the bracket in two probes
            i = min(max(i, fail + 1), hit - 1)
        step_name = "model" if (guess is not None and i == guess) else (
            "gallop" if hit is None else "binary")
        if pr.passes(i, step_name):
            hit = i
            passes += 0 if real_fail else 1
        else:
            fail = i
            real_fail = True
            misses += 0 if hit is not None else 1
        if hit is not None and real_fail:
            widths.append(hit - fail)
        if hit is not None and hit - fail == 1 and fail >= 0 and cands[fail] not in pr.seen:
            # The candidate below the answer was skipped by the bound: probe it anyway, so the
            # answer always has a simulated, failing predecessor.
            if pr.passes(fail, "verify"):
                hit, fail, lo = fail, -1, 0   # the bound was wrong: search everything below
                widths.clear()
            else:
                fail, real_fail = fail, True
    if hit is None:
        out = _all_failed(pr)
        return SearchOutcome(out.answer, out.probes, out.strategy, out.fallback,
                             out.fallback_reason, out.scanned, cut)
    doubt = _doubt_below(pr, hit)
    if not doubt:
        return _outcome(pr, hit, "galloping", bound_cut=cut)
    found = pr.first_pass(lo, hit, "fallback")
    return _outcome(pr, found, "galloping", fallback=True,
                    fallback_reason=f"not monotone: {doubt}; scanned from N={cands[lo]} "
                    "(the first candidate the TTFT bound lets through) up to the first pass",
                    scanned=(cands[lo], cands[found if found is not None else hit]),
                    bound_cut=cut)


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
