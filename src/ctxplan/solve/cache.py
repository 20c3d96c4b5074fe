"""Evaluation results cached by the hash of their full configuration (``EvalConfig.key()``).

One cache is shared by every tier of a solve and every point of a sweep, so no configuration is
simulated twice. The store is any mutable mapping key -> EvalResult (a dict by default; a
persistent store can stand in for it). ``sim_calls`` counts simulations actually run (two for a
prefill whose ring is "auto", which simulates both), ``cache_hits`` the answers served from
the store.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from dataclasses import dataclass

from ctxplan.evaluate import TOO_LARGE, EvalConfig, EvalResult, evaluate


@dataclass(frozen=True)
class CacheCounts:
    sim_calls: int
    cache_hits: int
    earlier_hits: int = 0     # of the hits, results a store holds from earlier runs

    def __sub__(self, other: CacheCounts) -> CacheCounts:
        return CacheCounts(self.sim_calls - other.sim_calls, self.cache_hits - other.cache_hits,
                           self.earlier_hits - other.earlier_hits)


class EvalCache:
    def __init__(self, store: MutableMapping[str, EvalResult] | None = None,
                 on_eval: Callable[[EvalCache], None] | None = None,
                 on_step: Callable[[str, int, int], None] | None = None) -> None:
        self.store: MutableMapping[str, EvalResult] = {} if store is None else store
        self.sim_calls = 0
        self.cache_hits = 0
        self.earlier_hits = 0   # hits on results the store held from earlier runs
        self.on_eval = on_eval   # called after every evaluation (progress bars)
        # The solver's progress callback (what runs, sub-problems done, in all) that a progress
        # bar hands to solve() with the cache (report.progress.progress_of).
        self.on_step = on_step

    def counts(self) -> CacheCounts:
        return CacheCounts(self.sim_calls, self.cache_hits, self.earlier_hits)

    def evaluate(self, cfg: EvalConfig) -> tuple[EvalResult, bool]:
        """The result of ``cfg`` and whether it came from the cache."""
        key = cfg.key()
        hit = self.store.get(key)
        if hit is not None:
            self.cache_hits += 1
            earlier = getattr(self.store, "from_earlier_run", None)
            if earlier is not None and earlier(key):
                self.earlier_hits += 1
            self._report()
            return hit, True
        result, _ = evaluate(cfg)
        self.sim_calls += result.simulations   # "auto" prefill rings: both simulated
        if result.reason.startswith(TOO_LARGE):
            self._report()
            return result, False   # not a measurement: a larger budget may simulate it
        self.store[key] = result
        self._report()
        return result, False

    def _report(self) -> None:
        if self.on_eval is not None:
            self.on_eval(self)
