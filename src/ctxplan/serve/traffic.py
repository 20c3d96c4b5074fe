"""The traffic: a mix of context lengths and a seeded Poisson arrival sequence.

One seed gives one sequence of requests at rate 1/s: unit-mean exponential gaps (a Poisson
process) and, per request, a uniform draw that picks its context length from the mix. A rate
lambda scales the times by 1 / lambda and keeps the draws, so the curve over rates compares the
same requests arriving faster (common random numbers): what changes from one rate to the next is
the load, not the luck of the draw. numpy's PCG64 generator gives the same numbers on every
platform for a given seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctxplan.errors import UserInputError


@dataclass(frozen=True)
class ContextMix:
    """Context lengths (tokens) and the share of requests of each; shares sum to 1."""

    lengths: tuple[int, ...]
    shares: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.lengths or len(self.lengths) != len(self.shares):
            raise ValueError("a context mix needs one share per length")

    @classmethod
    def of(cls, pairs: list[tuple[int, float]]) -> ContextMix:
        """From (length, share) pairs, ordered by length."""
        ordered = sorted(pairs)
        return cls(tuple(n for n, _ in ordered), tuple(s for _, s in ordered))

    @property
    def longest(self) -> int:
        return max(self.lengths)

    def mean(self, per_class: tuple[float, ...]) -> float:
        """The mix's expectation of a per-length figure."""
        return float(sum(s * x for s, x in zip(self.shares, per_class, strict=True)))

    def to_list(self) -> list[dict[str, float | int]]:
        return [{"context_length": n, "share": s}
                for n, s in zip(self.lengths, self.shares, strict=True)]


@dataclass(frozen=True)
class Arrivals:
    """Requests at rate 1/s: arrival times (seconds) and the index of each one's length."""

    unit_times_s: npt.NDArray[np.float64]
    classes: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.unit_times_s)

    def times_at(self, rate_per_s: float) -> npt.NDArray[np.float64]:
        """The same arrivals at ``rate_per_s`` requests per second."""
        return self.unit_times_s / rate_per_s


def arrivals(mix: ContextMix, n_requests: int, seed: int) -> Arrivals:
    """``n_requests`` Poisson arrivals at rate 1/s, lengths drawn from ``mix`` (seeded)."""
    if isinstance(n_requests, bool) or not isinstance(n_requests, int) or n_requests < 10:
        raise UserInputError("requests", n_requests, "give a whole number of requests >= 10 "
                             "(a few thousand measure a 90th percentile well)")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UserInputError("seed", seed, "give a whole number >= 0")
    rng = np.random.Generator(np.random.PCG64(seed))
    gaps = rng.exponential(1.0, n_requests)
    draws = rng.random(n_requests)
    cumulative = np.cumsum(np.array(mix.shares, np.float64))
    cumulative[-1] = 1.0   # shares summing to 1 - 1e-12 must not leave a draw unassigned
    classes = np.searchsorted(cumulative, draws, side="right").astype(np.int64)
    return Arrivals(np.cumsum(gaps), np.minimum(classes, len(mix.lengths) - 1))
