"""``ctxplan capacity``: prefill and decode instances (xPyD) and chips for an arrival rate.

1. Solve the instance shapes at the mix's longest context (:func:`ctxplan.solve.solve`, with
   the SLAs and search options given, under ``--batch auto``): one prefill instance is the
   solver's prefill pool (one sequence), one decode instance its decode pool, so every instance
   holds any request of the mix. The decode batches are then the request-level simulation's,
   by the rule ``--batch auto`` applies once (:func:`check_batch`).
2. Simulate what the request-level simulation needs, through the evaluation cache: the TTFT of
   the prefill instance at each context length of the mix, and decode steps at the batches and
   context lengths the decode instances reach (asked for lazily, kept).
3. Rate by rate, in increasing order, the request-level simulation (:mod:`ctxplan.serve.des`)
   sizes the pools (:mod:`ctxplan.serve.search`) on one seeded arrival sequence scaled by the
   rate; the pools of a rate also meet the targets at every lower rate given.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ctxplan.errors import UserInputError
from ctxplan.serve.instances import InstanceShape, SimulatedDecode, context_grid, max_batch
from ctxplan.serve.result import CapacityResult
from ctxplan.serve.search import (
    Targets,
    Workload,
    decode_stable_min,
    prefill_stable_min,
    size_curve,
)
from ctxplan.serve.traffic import ContextMix, arrivals
from ctxplan.solve import EvalCache, SolveRequest
from ctxplan.solve import solve as solve_shapes

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
        return replace(self, solve=self.solve.validated(), percentile=float(p),
                       rates_per_s=tuple(sorted(set(self.rates_per_s))))


def capacity(request: CapacityRequest, cache: EvalCache | None = None) -> CapacityResult:
    """Size the pools at every rate of ``request`` (see the module docstring)."""
    req = request.validated()
    cache = cache if cache is not None else EvalCache()
    before = cache.counts()
    plan = solve_shapes(req.solve, cache)
    sla = req.solve.sla
    head = dict(model=req.solve.model.name, chip=req.solve.chip.name,
                cluster=req.solve.cluster.name, mix=req.mix, output_tokens=req.output_tokens,
                percentile=req.percentile, requests=req.requests, seed=req.seed,
                ttft_max_s=sla.ttft_max_s, tpot_max_s=sla.tpot_max_s, solve=plan.to_dict(),
                tdp_w=req.solve.chip.tdp_w, price_per_chip_hour=req.solve.price_per_chip_hour)
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
    prefill = InstanceShape(best.prefill.answer, best.prefill.tp, best.prefill.pp)
    decode_shape = InstanceShape(best.decode.answer, best.decode.tp, best.decode.pp)
    # every point below at the chosen pools' pipeline depths
    req = replace(req, solve=req.solve.with_pp(best.prefill.pp, best.decode.pp))
    handoff = best.handoff is not None and best.handoff.simulated
    service = tuple(_prefill_service_s(req, best.kv_tier, prefill,
                                       decode_shape if handoff else None, n, cache)
                    for n in req.mix.lengths)
    decode = SimulatedDecode(req.solve.eval_config("decode", best.kv_tier, decode_shape.cp,
                                                   decode_shape.tp), cache)
    limit = sla.tpot_max_s
    steps = req.output_tokens - 1
    batches = tuple(max_batch(decode, n, limit, req.requests) for n in req.mix.lengths)
    # The most requests per second one decode instance can finish: a full batch of the
    # shortest requests (a longer context never makes a step faster).
    shortest = min(req.mix.lengths)
    b_short = batches[req.mix.lengths.index(shortest)]
    max_rate = max(b / (steps * decode.step_s(b, shortest)) for b in range(1, b_short + 1))
    mean_service = req.mix.mean(service)
    arr = arrivals(req.mix, req.requests, req.seed)
    lengths = np.array(req.mix.lengths, np.int64)[arr.classes]
    service_of = np.array(service, np.float64)[arr.classes]
    grid = context_grid(req.mix.lengths)
    targets = Targets(sla.ttft_max_s, limit, req.percentile)
    works = [Workload(rate_per_s=rate, arrival_s=arr.times_at(rate), lengths=lengths,
                      service_s=service_of, steps_per_request=steps, grid=grid,
                      prefill_stable_min=prefill_stable_min(rate, mean_service),
                      decode_stable_min=decode_stable_min(rate, max_rate))
             for rate in req.rates_per_s]
    points = size_curve(works, decode, targets, prefill.chips, decode_shape.chips)
    used = cache.counts() - before
    steps_seen = tuple((b, n, t) for (b, n), t in decode.evaluated.items())
    return CapacityResult(
        kv_tier=best.kv_tier, prefill_shape=prefill, decode_shape=decode_shape,
        prefill_service_s=service, decode_max_batch=batches, decode_steps=steps_seen,
        points=tuple(points), sim_calls=used.sim_calls, cache_hits=used.cache_hits,
        earlier_run_hits=used.earlier_hits,
        kv_handoff=req.solve.policy.kv_handoff if handoff else None,
        **head)  # type: ignore[arg-type]


def _prefill_service_s(req: CapacityRequest, tier: str, shape: InstanceShape,
                       to: InstanceShape | None, context_length: int,
                       cache: EvalCache) -> float:
    """The simulated TTFT of one prefill instance at ``context_length``: with its KV handoff
    to a decode instance ``to`` (the unhidden part included), when the solve simulated one."""
    base = (req.solve.eval_config("prefill", tier, shape.cp, shape.tp) if to is None else
            req.solve.pair_config(tier, shape.cp, shape.tp, to.cp, to.tp))
    cfg = replace(base, context_length=context_length)
    result, _ = cache.evaluate(cfg)
    if result.latency_s is None:
        raise UserInputError("contexts", context_length,
                             "give context lengths the prefill instance can hold",
                             f"the prefill instance does not fit it: {result.reason}")
    return result.latency_s
