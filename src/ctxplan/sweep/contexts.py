"""A context-length sweep: one solve per S, the N*(S) curve; one curve per model when several
models are swept side by side (``ctxplan sweep --model a,b``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctxplan.evaluate import EvalResult
from ctxplan.run_warnings import merged
from ctxplan.solve import EvalCache, SolveRequest, SolveResult, solve
from ctxplan.sweep.executor import Executor, SerialExecutor
from ctxplan.sweep.store import ResultStore

OnPoint = Callable[[SolveResult], None]


@dataclass(frozen=True)
class SweepResult:
    points: tuple[SolveResult, ...]   # model by model, each in the order of the contexts asked

    @property
    def models(self) -> tuple[str, ...]:
        """The models swept, in order (one curve each)."""
        return tuple(dict.fromkeys(p.model for p in self.points))

    def curve(self, model: str) -> tuple[SolveResult, ...]:
        """One model's points, in the order of the contexts."""
        return tuple(p for p in self.points if p.model == model)

    @property
    def warnings(self) -> tuple[str, ...]:
        """The points' warnings together, in order, each once."""
        return merged(*(p.warnings for p in self.points))

    @property
    def sim_calls(self) -> int:
        return sum(p.sim_calls for p in self.points)

    @property
    def cache_hits(self) -> int:
        return sum(p.cache_hits for p in self.points)

    @property
    def earlier_run_hits(self) -> int:
        return sum(p.earlier_run_hits for p in self.points)

    def to_dict(self, *, candidates: bool = True) -> dict[str, Any]:
        first = self.points[0] if self.points else None
        points = []
        for p in self.points:
            d = p.to_dict()
            if not candidates:
                d.pop("candidates")
            points.append(d)
        models = self.models
        return {
            "model": models[0] if len(models) == 1 else None,
            "models": list(models),
            "chip": first.chip if first else None,
            "cluster": first.cluster if first else None,
            "contexts": [p.context_length for p in self.curve(models[0])] if models else [],
            "sim_calls": self.sim_calls,
            "cache_hits": self.cache_hits,
            "earlier_run_hits": self.earlier_run_hits,
            "points": points,
            "warnings": list(self.warnings),
        }

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per context length (the CSV)."""
        out = []
        for p in self.points:
            b = p.best
            out.append({
                "model": p.model,
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
                "batch": p.chosen_batch,
                "tokens_per_s": b.decode.tokens_per_s if b else None,
                "tokens_per_s_per_decode_chip": (b.decode.tokens_per_s or 0.0)
                / (b.decode.chips or 1) if b else None,
                "tokens_per_s_per_chip": b.tokens_per_s_per_chip if b else None,
                "tpot_limit_s": p.sla.tpot_limit_s(p.chosen_batch or 1),
                "sim_calls": p.sim_calls,
                "cache_hits": p.cache_hits,
                "fallback": p.fallback,
                "infeasible_reason": p.infeasible_reason,
            })
        return out


def sweep_contexts(
    request: SolveRequest | Sequence[SolveRequest],
    contexts: Sequence[int],
    *,
    executor: Executor | None = None,
    cache: EvalCache | None = None,
    on_point: OnPoint | None = None,
) -> SweepResult:
    """Solve ``request`` at every context length (duplicates solved once, kept in place); with
    several requests (one per model), each at every context length, model by model, the
    points of all of them spread over the executor at once."""
    executor = executor or SerialExecutor()
    cache = cache if cache is not None else EvalCache()
    bases = [request] if isinstance(request, SolveRequest) else list(request)
    requests = [replace(r, context_length=s) for r in bases for s in dict.fromkeys(contexts)]
    shares = getattr(executor, "shares_filesystem", None)
    task = SolvePoint(cache)   # workers open the store themselves (or get the dict)
    if shares is not None and not shares():
        seeds = {_point_key(r): _stored_for(cache.store, r) for r in requests}
        earlier = getattr(cache.store, "from_earlier_run", None)
        task = SolvePoint(cache, seeds, earlier=frozenset(
            k for seed in seeds.values() for k in seed if earlier is not None and earlier(k)))
    solved: dict[tuple[str, int], SolveResult] = {}
    for point in executor.map(task, requests):
        result = point.result
        if not point.in_place:
            # Solved on a copy (another process, a remote node): bring the results and the
            # counts home. Results a worker already wrote to the shared store are skipped.
            for fresh in point.fresh:
                if fresh.key not in cache.store:
                    cache.store[fresh.key] = fresh
            cache.sim_calls += result.sim_calls
            cache.cache_hits += result.cache_hits
            cache.earlier_hits += result.earlier_run_hits
        solved[(result.model, result.context_length)] = result
        if on_point is not None:
            on_point(result)
    return SweepResult(tuple(solved[(r.model.name, s)] for r in bases for s in contexts))


def _point_key(request: SolveRequest) -> str:
    """A sweep point's name (seeds for remote workers are keyed by it)."""
    return f"{request.model.name}@{request.context_length}"


# ---------------------------------------------------------------------- the unit of work


@dataclass(frozen=True)
class PointOutcome:
    result: SolveResult
    fresh: tuple[EvalResult, ...]   # the results this solve simulated (not found in the store)
    in_place: bool = False          # solved on the caller's own cache (nothing to bring home)


@dataclass(frozen=True)
class SolvePoint:
    """One sweep point: solve one request on a cache over ``cache``'s store. Pickles for worker
    processes and Ray: a ResultStore travels as its path (each worker opens the shared SQLite
    file and writes every result as it finishes, so a killed sweep keeps them), a dict store as
    its entries. With ``seeds`` (for workers that cannot open the file: the stored results of
    each point, by ``_point_key``) the worker's cache starts from its point's seed instead,
    and the parent writes what comes back. Run without a copy (a serial executor), it solves
    on the caller's cache itself, as ``solve(request, cache)`` would."""

    cache: EvalCache
    seeds: dict[str, dict[str, EvalResult]] | None = None
    copied: bool = False   # True once pickled: this is a worker's copy
    # Of the seeds, the results the store held from earlier runs: a worker's cache counts its
    # hits on them as earlier-run hits, as the caller's would (the same JSON on every backend).
    earlier: frozenset[str] = frozenset()

    def __reduce__(self) -> tuple[Any, ...]:
        # A copy needs only the store (none at all with seeds), not the caller's cache object,
        # which may be a subclass holding unpicklable hooks (a progress display).
        store = {} if self.seeds is not None else self.cache.store
        return (SolvePoint, (EvalCache(store=store), self.seeds, True, self.earlier))

    def __call__(self, request: SolveRequest) -> PointOutcome:
        if not self.copied and self.seeds is None:
            return PointOutcome(solve(request, cache=self.cache), (), in_place=True)
        base: MutableMapping[str, EvalResult] = self.cache.store
        earlier = getattr(base, "from_earlier_run", None)
        if self.seeds is not None:
            base = dict(self.seeds.get(_point_key(request), {}))
            earlier = self.earlier.__contains__
        recording = _Recording(base, earlier)
        result = solve(request, cache=EvalCache(store=recording))
        return PointOutcome(result, tuple(recording.written))


class _Recording(MutableMapping[str, EvalResult]):
    """A store that remembers what was written through it, and says which of its results an
    earlier run wrote (``from_earlier_run``, as a ResultStore does: EvalCache counts them)."""

    def __init__(self, inner: MutableMapping[str, EvalResult],
                 earlier: Callable[[str], bool] | None = None) -> None:
        self.inner = inner
        self.written: list[EvalResult] = []
        self._earlier = earlier

    def from_earlier_run(self, key: str) -> bool:
        return self._earlier is not None and self._earlier(key)

    def get(self, key: str, default: Any = None) -> Any:
        return self.inner.get(key, default)

    def __getitem__(self, key: str) -> EvalResult:
        return self.inner[key]

    def __setitem__(self, key: str, value: EvalResult) -> None:
        self.inner[key] = value
        self.written.append(value)

    def __delitem__(self, key: str) -> None:
        del self.inner[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)


def _stored_for(store: MutableMapping[str, EvalResult],
                request: SolveRequest) -> dict[str, EvalResult]:
    """The stored results a remote worker may need for ``request`` (same model, chip, cluster
    and S); with an in-memory store, all of it."""
    if isinstance(store, ResultStore):
        return store.matching(model=request.model.name, chip=request.chip.name,
                              cluster=request.cluster.name,
                              context_length=request.context_length)
    return {k: v for k, v in store.items() if v.context_length == request.context_length
            and v.model == request.model.name}
