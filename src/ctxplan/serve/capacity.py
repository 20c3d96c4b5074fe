"""``ctxplan capacity``: prefill and decode instances (xPyD) and chips for an arrival rate.

1. Solve the instance shapes at the mix's longest context (:func:`ctxplan.solve.solve`, with
   the SLAs and search options given, under ``--batch auto``): its KV tier and pipeline depths
   hold for every shape below. The decode batches are the request-level simulation's, by the
   rule ``--batch auto`` applies once (:func:`check_batch`).
2. The shapes (:mod:`ctxplan.serve.shapes`): prefill and decode instance shapes per TP, every
   prefill shape paired with every decode shape, the solve's pair first; each pair bounded
   from below in chips per rate from a few simulations, and simulated only when its bound can
   beat the best pair found at some rate.
3. For a pair simulated, what the request-level simulation needs, through the evaluation
   cache: the TTFT of its prefill instance at each context length of the mix (with the KV
   handoff to its decode instance), and decode steps at the batches and context lengths the
   decode instances reach (asked for lazily, kept). Rate by rate, in increasing order, the
   request-level simulation (:mod:`ctxplan.serve.des`) sizes the pools
   (:mod:`ctxplan.serve.search`) on one seeded arrival sequence scaled by the rate; the pools
   of a rate also meet the targets at every lower rate given.
4. Per rate the pair of the fewest chips wins (ties: the solve's pair, then the smaller
   instances). Every pair is on record (``shapes``), simulated or cut with its bound.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ctxplan.errors import UserInputError
from ctxplan.serve.instances import (
    InstanceShape,
    SimulatedDecode,
    context_grid,
    max_batch,
    rate_bound,
)
from ctxplan.serve.result import CapacityPoint, CapacityResult
from ctxplan.serve.search import (
    Targets,
    Workload,
    decode_stable_min,
    fewest_prefill,
    prefill_stable_min,
    size_curve,
)
from ctxplan.serve.shapes import (
    CUT,
    INFEASIBLE,
    SEARCHED,
    ShapePair,
    ShapeRecord,
    candidate_pairs,
)
from ctxplan.serve.traffic import ContextMix, arrivals
from ctxplan.solve import EvalCache, SolveRequest
from ctxplan.solve import solve as solve_shapes
from ctxplan.solve.request import AUTO
from ctxplan.solve.wall import boundary

DEFAULT_REQUESTS = 2000
MAX_REQUESTS = 1_000_000
BATCH_AUTO = "auto"   # the only batch capacity takes (solve.request.AUTO)


def check_batch(batch: object) -> None:
    """capacity's decode batches follow the rule of ``solve --batch auto`` (docs/serving.md,
    "Decode batches"): a fixed batch is refused, naming the fix."""
    if batch != BATCH_AUTO:
        raise UserInputError(
            "batch", batch, "drop --batch, or give --batch auto: capacity prefills one request "
            "at a time and fills each decode instance itself, at every step, by the rule of "
            "solve's --batch auto (a sequence joins while the batch fits memory and its "
            "simulated step meets the TPOT target)", "capacity does not take a fixed batch")


@dataclass(frozen=True)
class CapacityRequest:
    """A capacity study's inputs. ``solve`` is the solve of the instance shapes: its context
    length is the mix's longest and its SLA the targets."""

    solve: SolveRequest
    mix: ContextMix
    rates_per_s: tuple[float, ...]
    output_tokens: int = 1000
    percentile: float = 90.0
    requests: int = DEFAULT_REQUESTS
    seed: int = 0

    def validated(self) -> CapacityRequest:
        if not self.rates_per_s:
            raise UserInputError("rates", None, "give at least one arrival rate, e.g. --rate "
                                 "0.2/s or --rates 0.05/s,0.2/s,0.5/s")
        for rate in self.rates_per_s:
            if not (rate > 0 and rate < float("inf")):
                raise UserInputError("rates", rate, "give arrival rates > 0, such as 0.2/s",
                                     "not a positive rate")
        p = self.percentile
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p < 100:
            raise UserInputError("percentile", p, "give a percentile strictly between 0 and "
                                 "100, such as 90 or 99")
        out = self.output_tokens
        if isinstance(out, bool) or not isinstance(out, int) or out < 2:
            raise UserInputError("output_tokens", out, "give at least 2 output tokens (the "
                                 "first comes from prefill; TPOT is measured over the rest)")
        n = self.requests
        if isinstance(n, bool) or not isinstance(n, int) or not 10 <= n <= MAX_REQUESTS:
            raise UserInputError("requests", n, f"give a whole number of requests from 10 to "
                                 f"{MAX_REQUESTS:,} (a few thousand measure a 90th "
                                 "percentile well)")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise UserInputError("seed", self.seed, "give a whole number >= 0")
        check_batch(self.solve.batch)   # the shapes are solve --batch auto's
        if self.solve.sla.tps_reading != "per-seq":
            raise UserInputError("tps_reading", self.solve.sla.tps_reading, "drop it, or give "
                                 "per-seq: capacity holds the TPOT target per request (its "
                                 "mean time per output token), which is the per-seq reading")
        if self.solve.context_length != self.mix.longest:
            raise ValueError("the instance shapes are solved at the mix's longest context")
        solve = self.solve.validated()
        if solve.decode_pp == AUTO:
            # Capacity's shapes are at the solve's depths, and DP attention only at one stage:
            # a searched decode depth would take the DP shapes away (docs/serving.md), so its
            # decode pool is at one stage unless a depth is given.
            solve = replace(solve, decode_pp=1)
        return replace(self, solve=solve, percentile=float(p),
                       rates_per_s=tuple(sorted(set(self.rates_per_s))))


def capacity(request: CapacityRequest, cache: EvalCache | None = None) -> CapacityResult:
    """Size the pools at every rate of ``request`` (see the module docstring)."""
    req = request.validated()
    cache = cache if cache is not None else EvalCache()
    before = cache.counts()
    plan = solve_shapes(req.solve, cache)
    sla = req.solve.sla
    s = req.solve
    head = dict(model=s.model.name, chip=s.chip.name, cluster=s.cluster.name,
                decode_chip=s.pool_chip("decode").name,
                decode_cluster=s.pool_cluster("decode").name, mix=req.mix,
                output_tokens=req.output_tokens, percentile=req.percentile,
                requests=req.requests, seed=req.seed, ttft_max_s=sla.ttft_max_s,
                tpot_max_s=sla.tpot_max_s, solve=plan.to_dict(), tdp_w=s.chip.tdp_w,
                price_per_chip_hour=s.price_per_chip_hour,
                decode_chip_own=s.decode_chip is not None,
                decode_tdp_w=s.pool_chip("decode").tdp_w,
                decode_price_per_chip_hour=s.decode_price_per_chip_hour)
    best = plan.best
    if best is None or best.prefill.answer is None or best.decode.answer is None:
        used = cache.counts() - before
        return CapacityResult(
            kv_tier=None, prefill_shape=None, decode_shape=None, prefill_service_s=(),
            decode_max_batch=(), decode_steps=(), points=(), sim_calls=used.sim_calls,
            cache_hits=used.cache_hits, earlier_run_hits=used.earlier_hits,
            reason=f"no instance shape meets the SLAs at "
                   f"{req.mix.longest:,} tokens: {plan.infeasible_reason}",
            **head)  # type: ignore[arg-type]
    # every point below at the chosen pools' pipeline depths
    req = replace(req, solve=req.solve.with_pp(best.prefill.pp, best.decode.pp))
    pools = _Pools(req, best.kv_tier, cache)
    pairs = candidate_pairs(req.solve, best, cache)
    records, chosen = _search_pairs(pools, pairs)
    solved = records[0]
    assert solved.pair.solved and solved.status == SEARCHED
    points = tuple(c if c is not None else p
                   for c, p in zip(chosen, pools.points[solved.pair], strict=True))
    used = cache.counts() - before
    d = solved.pair.decode
    steps_seen = tuple((b, n, t) for (b, n), t in pools.decode(d).evaluated.items())
    return CapacityResult(
        kv_tier=best.kv_tier, prefill_shape=solved.pair.prefill, decode_shape=d,
        prefill_service_s=solved.service_s, decode_max_batch=solved.max_batch,
        decode_steps=steps_seen, points=points, sim_calls=used.sim_calls,
        cache_hits=used.cache_hits, earlier_run_hits=used.earlier_hits,
        kv_handoff=solved.kv_handoff, shapes=tuple(records),
        **head)  # type: ignore[arg-type]


Chosen = list[CapacityPoint | None]


def _search_pairs(pools: _Pools, pairs: list[ShapePair], *, prune: bool = True
                  ) -> tuple[list[ShapeRecord], Chosen]:
    """Every pair of ``pairs`` (the solve's first) simulated or cut by its bound
    (serve/shapes.py), and per rate the point of the fewest chips (ties: ShapePair.tie_key).
    ``prune=False`` simulates every pair (the tests' reference)."""
    k_rates = len(pools.req.rates_per_s)
    bounds = {p: pools.bound(p, tight=False) for p in pairs}
    order = pairs[:1] + sorted(pairs[1:], key=lambda p: (
        bounds[p][-1] is None, bounds[p][-1] or 0, p.tie_key))
    chosen: Chosen = [None] * k_rates
    keys: list[tuple[int, tuple[int, ...]] | None] = [None] * k_rates
    records: list[ShapeRecord] = []

    def can_win(pair: ShapePair, bound: tuple[int | None, ...]) -> bool:
        for b, best in zip(bound, keys, strict=True):
            if b is not None and (best is None or (b, pair.tie_key) < best):
                return True
        return False

    for pair in order:
        bound = bounds[pair]
        if prune and not pair.solved:
            if can_win(pair, bound):   # the cheap bound lets it through: tighten it
                bound = pools.bound(pair, tight=True)
            if not can_win(pair, bound):
                why = ("no pool of this shape meets the targets (its bound)" if all(
                    b is None for b in bound) else "its bound is no better than the pair "
                    "chosen at every rate")
                records.append(ShapeRecord(pair, CUT, bound, why=why))
                continue
        record = pools.evaluate(pair, pools.bound(pair, tight=True))
        records.append(record)
        for k, point in enumerate(pools.points.get(pair, ())):
            chips, held = point.total_chips, keys[k]
            if chips is not None and (held is None or (chips, pair.tie_key) < held):
                keys[k], chosen[k] = (chips, pair.tie_key), point
    return records, chosen


class _Pools:
    """Each instance's figures, simulated once through the evaluation cache: the prefill
    services (alone, and with a handoff to each decode shape), the decode instances; and each
    pair's points."""

    def __init__(self, req: CapacityRequest, tier: str, cache: EvalCache) -> None:
        self.req, self.tier, self.cache = req, tier, cache
        sla = req.solve.sla
        self.targets = Targets(sla.ttft_max_s, sla.tpot_max_s, req.percentile)
        self.steps = req.output_tokens - 1
        self.arr = arrivals(req.mix, req.requests, req.seed)
        self.lengths = np.array(req.mix.lengths, np.int64)[self.arr.classes]
        self.grid = context_grid(req.mix.lengths)
        self._services: dict[tuple[InstanceShape, InstanceShape | None],
                             tuple[float | None, ...]] = {}
        self._decodes: dict[InstanceShape, SimulatedDecode] = {}
        self._floors: dict[InstanceShape, tuple[int | None, ...]] = {}
        self._rates: dict[tuple[InstanceShape, bool], float | None] = {}
        self.points: dict[ShapePair, tuple[CapacityPoint, ...]] = {}

    # -- instances

    def service(self, shape: InstanceShape, to: InstanceShape | None
                ) -> tuple[float | None, ...]:
        """The TTFT of one prefill instance per context length of the mix (None: it does not
        fit), with its KV handoff to a decode instance ``to``."""
        key = (shape, to)
        got = self._services.get(key)
        if got is None:
            got = self._services[key] = tuple(
                _prefill_service_s(self.req, self.tier, shape, to, n, self.cache)
                for n in self.req.mix.lengths)
        return got

    def handoff(self, pair: ShapePair) -> bool:
        """Whether the pair's handoff is simulated: as the solve's pair check does it (on, and
        the two instances fit the cluster together)."""
        solve, colocate = self.req.solve, self.req.solve.policy.colocate_pools
        if solve.policy.kv_handoff == "off":
            return False
        # A DP prefill's requests each go to a decode group of their own (pair_config).
        receiving = pair.decode.chips if pair.prefill.dp == 1 else \
            pair.prefill.dp * pair.decode.pp * pair.decode.cp * pair.decode.tp
        if solve.decode_cluster is not None:   # each instance on its own cluster
            return pair.prefill.chips <= solve.cluster.max_chips and \
                receiving <= solve.decode_cluster.max_chips
        return solve.cluster.decode_start(pair.prefill.chips, colocate) + \
            receiving <= solve.cluster.max_chips

    def decode(self, shape: InstanceShape) -> SimulatedDecode:
        got = self._decodes.get(shape)
        if got is None:
            got = self._decodes[shape] = SimulatedDecode(
                self.req.solve.eval_config("decode", self.tier, shape.cp, shape.tp,
                                           dp=shape.dp), self.cache)
        return got

    def workloads(self, service: tuple[float, ...], decode_max_rate: float | None,
                  servers: int = 1) -> list[Workload]:
        """Each rate's requests with these prefill service times (``servers``: requests a
        prefill instance serves at once, its DP ranks)."""
        mean = self.req.mix.mean(service)
        service_of = np.array(service, np.float64)[self.arr.classes]
        return [Workload(rate_per_s=r, arrival_s=self.arr.times_at(r), lengths=self.lengths,
                         service_s=service_of, steps_per_request=self.steps, grid=self.grid,
                         prefill_stable_min=prefill_stable_min(r, mean, servers),
                         decode_stable_min=(0 if decode_max_rate is None
                                            else decode_stable_min(r, decode_max_rate)),
                         prefill_servers=servers)
                for r in self.req.rates_per_s]

    # -- the bound (serve/shapes.py)

    def bound(self, pair: ShapePair, *, tight: bool) -> tuple[int | None, ...]:
        """Per rate, the fewest chips any pools of this pair can be (None: none meet). The
        cheap bound takes the decode instance's largest batch within memory; the tight one
        its largest batch within the TPOT target too (a few decode steps more, which the
        pair's own simulation reuses)."""
        x_floor = self._prefill_floor(pair.prefill)
        r_max = self._decode_rate_bound(pair.decode, tight)
        if r_max is None:
            return (None,) * len(x_floor)
        return tuple(None if x is None else
                     x * pair.prefill.chips + decode_stable_min(r, r_max) * pair.decode.chips
                     for x, r in zip(x_floor, self.req.rates_per_s, strict=True))

    def _prefill_floor(self, shape: InstanceShape) -> tuple[int | None, ...]:
        """Per rate, the fewest prefill instances meeting the TTFT target with the prefill-alone
        service times (None: none do, or the instance does not hold the mix)."""
        got = self._floors.get(shape)
        if got is None:
            alone = self.service(shape, None)
            if any(s is None for s in alone):
                got = (None,) * len(self.req.rates_per_s)
            else:
                works = self.workloads(tuple(s for s in alone if s is not None), None,
                                       shape.dp)
                got = tuple(fewest_prefill(w, self.targets) for w in works)
            self._floors[shape] = got
        return got

    def _decode_rate_bound(self, shape: InstanceShape, tight: bool) -> float | None:
        """More requests per second than one decode instance can finish. Cheap: its largest
        batch of the shortest requests within the capacity wall over their one-sequence step.
        Tight: over the batches up to the largest whose step meets the TPOT target (found by
        doubling and bisection), b_next / step(b) between consecutive batches simulated. None
        when one sequence misses the TPOT target or does not fit."""
        key = (shape, tight)
        if key in self._rates:
            return self._rates[key]
        decode = self.decode(shape)
        shortest = min(self.req.mix.lengths)
        limit = self.targets.tpot_max_s
        # Every step is at least this one (more sequences, or longer ones, never step faster),
        # so when it misses the target every request does.
        step1 = decode.step_s(1, shortest)
        got: float | None = None
        if decode.fits(1, shortest) and step1 <= limit:
            cap = self.req.requests
            hi = 2
            while hi < cap and decode.fits(hi, shortest):
                hi *= 2
            b_mem = cap if hi >= cap and decode.fits(cap, shortest) else \
                boundary(lambda b: decode.fits(b, shortest), 1, min(hi, cap))
            got = b_mem / (self.steps * step1)
            if tight:
                got = self._tight_rate(decode, shortest, b_mem)
        self._rates[key] = got
        return got

    def _tight_rate(self, decode: SimulatedDecode, shortest: int, b_mem: int) -> float:
        limit = self.targets.tpot_max_s

        def holds(b: int) -> bool:
            return b <= b_mem and decode.step_s(b, shortest) <= limit

        ok, hi = 1, 2
        while holds(hi):
            ok, hi = hi, 2 * hi
        b_top = boundary(holds, ok, hi)
        return rate_bound(decode, shortest, b_top) / self.steps

    # -- one pair, simulated

    def evaluate(self, pair: ShapePair, bound: tuple[int | None, ...]) -> ShapeRecord:
        p, d = pair.prefill, pair.decode
        handoff = self.handoff(pair)
        service = self.service(p, d if handoff else None)
        kv_handoff = self.req.solve.policy.kv_handoff if handoff else None
        missing = [n for n, s in zip(self.req.mix.lengths, service, strict=True) if s is None]
        if missing:
            if pair.solved:
                raise UserInputError("contexts", missing[0], "give context lengths the "
                                     "prefill instance can hold", "the prefill instance does "
                                     "not fit it")
            return ShapeRecord(pair, INFEASIBLE, bound, kv_handoff=kv_handoff,
                               why=f"the prefill instance does not hold {missing[0]:,} tokens")
        times = tuple(s for s in service if s is not None)
        decode = self.decode(d)
        limit = self.targets.tpot_max_s
        batches = tuple(max_batch(decode, n, limit, self.req.requests)
                        for n in self.req.mix.lengths)
        # At least the most requests per second one decode instance can finish: batches of
        # the shortest requests up to the largest within TPOT (a longer context never makes a
        # step faster), bounded from the batches max_batch simulated (instances.rate_bound);
        # fewer instances than rate / max_rate cannot keep up.
        shortest = min(self.req.mix.lengths)
        b_short = batches[self.req.mix.lengths.index(shortest)]
        max_rate = rate_bound(decode, shortest, b_short) / self.steps
        points = size_curve(self.workloads(times, max_rate, p.dp), decode, self.targets,
                            p.chips, d.chips)
        self.points[pair] = tuple(replace(x, prefill_shape=p, decode_shape=d) for x in points)
        return ShapeRecord(pair, SEARCHED, bound, tuple(x.total_chips for x in points), times,
                           batches, kv_handoff)


def _prefill_service_s(req: CapacityRequest, tier: str, shape: InstanceShape,
                       to: InstanceShape | None, context_length: int,
                       cache: EvalCache) -> float | None:
    """The simulated TTFT of one prefill instance at ``context_length``: with its KV handoff
    to a decode instance ``to`` (the unhidden part included); None when it does not fit."""
    base = (req.solve.eval_config("prefill", tier, shape.cp, shape.tp, shape.dp, dp=shape.dp)
            if to is None else req.solve.pair_config(tier, shape.cp, shape.tp, to.cp, to.tp,
                                                     prefill_dp=shape.dp))
    result, _ = cache.evaluate(replace(base, context_length=context_length))
    return result.latency_s
