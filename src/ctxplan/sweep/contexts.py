"""A context-length sweep: one solve per S, the N*(S) curve."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from ctxplan.solve import EvalCache, SolveRequest, SolveResult, solve
from ctxplan.sweep.executor import Executor, SerialExecutor

OnPoint = Callable[[SolveResult], None]


@dataclass(frozen=True)
class SweepResult:
    points: tuple[SolveResult, ...]   # in the order of the contexts asked for

    @property
    def sim_calls(self) -> int:
        return sum(p.sim_calls for p in self.points)

    @property
    def cache_hits(self) -> int:
        return sum(p.cache_hits for p in self.points)

    def to_dict(self, *, candidates: bool = True) -> dict[str, Any]:
        first = self.points[0] if self.points else None
        points = []
        for p in self.points:
            d = p.to_dict()
            if not candidates:
                d.pop("candidates")
            points.append(d)
        return {
            "model": first.model if first else None,
            "chip": first.chip if first else None,
            "cluster": first.cluster if first else None,
            "contexts": [p.context_length for p in self.points],
            "sim_calls": self.sim_calls,
            "cache_hits": self.cache_hits,
            "points": points,
        }

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per context length (the CSV)."""
        out = []
        for p in self.points:
            b = p.best
            out.append({
                "context_length": p.context_length,
                "feasible": p.feasible,
                "total_chips": p.total_chips,
                "kv_tier": b.kv_tier if b else None,
                "np": b.prefill.answer if b else None,
                "prefill_tp": b.prefill.tp if b else None,
                "prefill_chips": b.prefill.chips if b else None,
                "ttft_s": b.prefill.latency_s if b else None,
                "nd": b.decode.answer if b else None,
                "decode_tp": b.decode.tp if b else None,
                "decode_chips": b.decode.chips if b else None,
                "tpot_s": b.decode.latency_s if b else None,
                "tps_per_seq": (1.0 / b.decode.latency_s) if b and b.decode.latency_s else None,
                "tpot_limit_s": p.sla.tpot_limit_s(p.batch),
                "sim_calls": p.sim_calls,
                "cache_hits": p.cache_hits,
                "fallback": p.fallback,
                "infeasible_reason": p.infeasible_reason,
            })
        return out


def sweep_contexts(
    request: SolveRequest,
    contexts: Sequence[int],
    *,
    executor: Executor | None = None,
    cache: EvalCache | None = None,
    on_point: OnPoint | None = None,
) -> SweepResult:
    """Solve ``request`` at every context length (duplicates solved once, kept in place)."""
    executor = executor or SerialExecutor()
    cache = cache if cache is not None else EvalCache()
    requests = [replace(request, context_length=s) for s in dict.fromkeys(contexts)]
    solved: dict[int, SolveResult] = {}
    for result in executor.map(partial(solve, cache=cache), requests):
        solved[result.context_length] = result
        if on_point is not None:
            on_point(result)
    return SweepResult(tuple(solved[s] for s in contexts))
