"""``ctxplan pareto``: the decode pool's shapes, tokens/s per chip against tokens/s per user.

The view AIConfigurator users start from: every decode shape searched, at its simulated TPOT,
placed by how fast it serves one user (1 / TPOT) and how many tokens it serves per chip
(batch / TPOT / chips); the shapes no other beats on both are the front. A faster user means a
smaller batch or more chips per sequence, so the two pull against each other.

Which shapes are searched (a stated rule, never a grid; docs/solver.md, "The Pareto front"):

* every KV tier of the request, every TP degree the solve may use (``--decode-tp``), every
  pipeline depth it may use (``--decode-pp``, 1 by default);
* per (tier, PP, TP), the CP degree Nd from the capacity wall at batch 1 (no simulation) and
  then 2x, 4x and 8x it (each rounded up to the candidate set, within ``--max-chips``): more
  ranks per sequence lower TPOT until pass-Q and the merge take over, and hold more sequences;
* per (tier, PP, TP, Nd), the batch 1, 4, 16, ... (powers of four) below the largest batch that
  fits in memory (found without simulating), and that largest batch itself;
* with DP attention (``--decode-dp``, searched by default: 2, 4 and 8 DP ranks, within
  ``--max-chips``; one pipeline stage), per (tier, TP, DP): Nd at the wall of one sequence per
  DP rank, and the batch DP, 4 DP, 16 DP, ... below the largest that fits, and that one. Each DP
  rank holds its sequences whole, so more DP holds more sequences without pass-Q or the merge:
  the shapes that serve many users per chip.

Every point is simulated once (through the evaluation cache and store: a second call is
instant). ``meets_sla`` says whether its TPOT meets ``--tpot-max`` (as ``--tps-reading`` reads
it); the front is over every simulated point, the target aside, so it shows what the target
costs. With the prefill pool sized (its fewest chips meeting ``--ttft-max``, or its capacity
minimum without one, as ``solve`` sizes it), each point has its tokens/s per chip of the whole
plan too, and ``plan_front`` is the front on that figure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctxplan.config.edge_warnings import point_warnings
from ctxplan.config.values import MAX_BATCH
from ctxplan.evaluate import TOO_LARGE, check_memory
from ctxplan.solve.batch import largest_fitting
from ctxplan.solve.cache import EvalCache
from ctxplan.solve.candidates import candidate_ns
from ctxplan.solve.economics import PlanEconomics
from ctxplan.solve.phase import solve_pool
from ctxplan.solve.request import SolveRequest
from ctxplan.solve.result import PhasePlan
from ctxplan.solve.sla import SLA
from ctxplan.solve.solver import price_warnings
from ctxplan.solve.wall import capacity_wall

ND_RUNGS = (1, 2, 4, 8)   # Nd as multiples of the capacity wall
BATCH_STEP = 4            # the batch ladder's ratio: 1, 4, 16, ...

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class ParetoPoint:
    """One decode shape and what its simulation gave (``tpot_s`` None: not simulated, why)."""

    kv_tier: str
    pp: int
    tp: int
    cp: int
    batch: int
    tpot_s: float | None
    per_chip_bytes: int
    meets_sla: bool
    cache_hit: bool
    why: str = ""                 # why not simulated ("" when it was)
    prefill_chips: int | None = None   # the tier's prefill pool (None: none meets its target)
    on_front: bool = False
    on_plan_front: bool = False
    dp: int = 1                   # DP attention ranks, each a CP group of cp x tp chips

    @property
    def chips(self) -> int:
        return self.pp * self.dp * self.cp * self.tp

    @property
    def tokens_per_s_per_user(self) -> float | None:
        return None if not self.tpot_s else 1.0 / self.tpot_s

    @property
    def tokens_per_s(self) -> float | None:
        return None if not self.tpot_s else self.batch / self.tpot_s

    @property
    def tokens_per_s_per_chip(self) -> float | None:
        rate = self.tokens_per_s
        return None if rate is None else rate / self.chips

    @property
    def plan_chips(self) -> int | None:
        return None if self.prefill_chips is None else self.prefill_chips + self.chips

    @property
    def plan_tokens_per_s_per_chip(self) -> float | None:
        rate, chips = self.tokens_per_s, self.plan_chips
        return None if rate is None or chips is None else rate / chips

    def to_dict(self, tdp_w: float | None, price: float | None, decode_own: bool = False,
                decode_tdp_w: float | None = None,
                decode_price: float | None = None) -> dict[str, Any]:
        """The point's figures; ``tdp_w`` / ``price``: the prefill chip's (and the decode
        chip's when ``decode_own`` is not set), ``decode_*``: the decode chip's own."""
        plan = None if self.plan_chips is None else PlanEconomics(
            chips=self.plan_chips, tokens_per_s=self.tokens_per_s, tdp_w=tdp_w,
            price_per_chip_hour=price, decode_chips=self.chips if decode_own else 0,
            decode_tdp_w=decode_tdp_w, decode_price_per_chip_hour=decode_price)
        return {
            "kv_tier": self.kv_tier, "pp": self.pp, "dp": self.dp, "tp": self.tp,
            "cp": self.cp, "chips": self.chips, "batch": self.batch, "tpot_s": self.tpot_s,
            "tokens_per_s_per_user": self.tokens_per_s_per_user,
            "tokens_per_s_per_chip": self.tokens_per_s_per_chip,
            "prefill_chips": self.prefill_chips, "plan_chips": self.plan_chips,
            "plan_tokens_per_s_per_chip": self.plan_tokens_per_s_per_chip,
            "joules_per_token": None if plan is None else plan.joules_per_token,
            "cost_per_million_tokens": None if plan is None else plan.cost_per_million_tokens,
            "per_chip_bytes": self.per_chip_bytes, "meets_sla": self.meets_sla,
            "simulated": self.tpot_s is not None, "cache_hit": self.cache_hit,
            "why": self.why or None, "on_front": self.on_front,
            "on_plan_front": self.on_plan_front,
        }


@dataclass(frozen=True)
class ParetoResult:
    model: str
    chip: str
    cluster: str
    context_length: int
    sla: SLA
    max_chips: int
    points: tuple[ParetoPoint, ...]
    prefill: tuple[PhasePlan, ...]   # per KV tier, the prefill pool the plan figures use
    sim_calls: int
    cache_hits: int
    earlier_run_hits: int = 0
    tdp_w: float | None = None
    price_per_chip_hour: float | None = None
    warnings: tuple[str, ...] = ()   # what the run warns about (as solve's)
    # The decode pool on a chip / cluster of its own (--decode-chip): names ("": the same),
    # TDP and price; tdp_w / price_per_chip_hour above are then the prefill chip's.
    decode_chip: str = ""
    decode_cluster: str = ""
    decode_chip_own: bool = False
    decode_tdp_w: float | None = None
    decode_price_per_chip_hour: float | None = None
    dp_searched: tuple[int, ...] = ()   # the DP degrees above 1 searched

    @property
    def front(self) -> tuple[ParetoPoint, ...]:
        """The non-dominated points on the decode pool's figure, by tokens/s per user."""
        return _by_user(p for p in self.points if p.on_front)

    @property
    def plan_front(self) -> tuple[ParetoPoint, ...]:
        """The non-dominated points on the whole plan's figure, by tokens/s per user."""
        return _by_user(p for p in self.points if p.on_plan_front)

    def to_dict(self) -> dict[str, Any]:
        def rows(ps: Sequence[ParetoPoint]) -> list[dict[str, Any]]:
            return [p.to_dict(self.tdp_w, self.price_per_chip_hour, self.decode_chip_own,
                              self.decode_tdp_w, self.decode_price_per_chip_hour) for p in ps]

        return {
            "model": self.model, "chip": self.chip, "cluster": self.cluster,
            "decode_chip": self.decode_chip or self.chip,
            "decode_cluster": self.decode_cluster or self.cluster,
            "context_length": self.context_length, "sla": self.sla.to_dict(1),
            "max_chips": self.max_chips,
            "rule": {"nd_multiples_of_wall": list(ND_RUNGS), "batch_step": BATCH_STEP,
                     "dp": list(self.dp_searched)},
            "prefill": [{"kv_tier": p.kv_tier, "feasible": p.feasible, "chips": p.chips,
                         "cp": p.answer, "tp": p.tp, "pp": p.pp, "ttft_s": p.latency_s,
                         "bound_by": p.bound_by, "infeasible_reason":
                         p.infeasible_reason or None} for p in self.prefill],
            "tdp_w": self.tdp_w, "price_per_chip_hour": self.price_per_chip_hour,
            "points": rows(self.points), "front": rows(self.front),
            "plan_front": rows(self.plan_front),
            "sim_calls": self.sim_calls, "cache_hits": self.cache_hits,
            "earlier_run_hits": self.earlier_run_hits, "warnings": list(self.warnings),
        }


def _by_user(points: Iterable[ParetoPoint]) -> tuple[ParetoPoint, ...]:
    return tuple(sorted(points, key=lambda p: (p.tokens_per_s_per_user or 0.0, p.chips)))


def non_dominated(values: Sequence[tuple[float, float] | None]) -> list[bool]:
    """For each (x, y) to maximise (None: not a point), whether no other point is at least as
    good on both and better on one. Equal points are all kept."""
    out = []
    pts = [v for v in values if v is not None]
    for v in values:
        if v is None:
            out.append(False)
            continue
        x, y = v
        out.append(not any(a >= x and b >= y and (a > x or b > y) for a, b in pts))
    return out


def nd_ladder(req: SolveRequest, tp: int, wall: int, bound: int) -> list[int]:
    """Nd at the wall and at 2x, 4x, 8x it, each the first candidate at or above (ascending)."""
    cands = [n for n in candidate_ns(req.candidates, bound, tp, req.group_size or 1)
             if n >= wall]
    out: list[int] = []
    for k in ND_RUNGS:
        at = next((c for c in cands if c >= wall * k), None)
        if at is not None and at not in out:
            out.append(at)
    return out


def batch_ladder(max_fit: int, first: int = 1) -> list[int]:
    """``first`` x (1, 4, 16, ...) below ``max_fit``, and ``max_fit``."""
    out, b = [], first
    while b < max_fit:
        out.append(b)
        b *= BATCH_STEP
    out.append(max_fit)
    return out


def pareto(request: SolveRequest, cache: EvalCache | None = None,
           progress: Progress | None = None) -> ParetoResult:
    """Search the decode shapes of ``request`` (see the module docstring)."""
    req = request.validated()
    cache = cache if cache is not None else EvalCache()
    before = cache.counts()
    tiers = list(req.kv_tiers)
    depths = req.pp_choices("decode")
    dps = tuple(dp for dp in req.dp_choices(MAX_BATCH) if dp > 1)
    total = len(tiers) * (1 + len(depths) * len(req.tp_choices("decode")))
    done = 0

    def tell(text: str) -> None:
        if progress is not None:
            progress(text, done, total)

    prefills: list[PhasePlan] = []
    points: list[ParetoPoint] = []
    for tier in tiers:
        tell(f"prefill {tier}")
        prefill = solve_pool(req, "prefill", tier, cache)
        prefills.append(prefill)
        done += 1
        for pp in depths:
            at_depth = req.with_pp(prefill.pp, pp)
            for choice in at_depth.tp_choices("decode"):
                if not choice.excluded:
                    tell(f"decode {prefill.kv_tier} PP{pp} TP{choice.tp}")
                    points += _shapes(at_depth, tier, prefill.kv_tier, pp, choice.tp,
                                      prefill.chips, cache)
                    if pp == 1:
                        for dp in dps:
                            tell(f"decode {prefill.kv_tier} DP{dp} TP{choice.tp}")
                            points += _dp_shapes(at_depth, tier, prefill.kv_tier, dp,
                                                 choice.tp, prefill.chips, cache)
                done += 1
    points = _mark(points)
    used = cache.counts() - before
    return ParetoResult(model=req.model.name, chip=req.chip.name, cluster=req.cluster.name,
                        context_length=req.context_length, sla=req.sla,
                        max_chips=req.max_chips or req.cluster.max_chips,
                        points=tuple(points), prefill=tuple(prefills),
                        sim_calls=used.sim_calls, cache_hits=used.cache_hits,
                        earlier_run_hits=used.earlier_hits, tdp_w=req.chip.tdp_w,
                        price_per_chip_hour=req.price_per_chip_hour,
                        warnings=point_warnings(req.eval_config("decode", tiers[0], 1, 1))
                        + price_warnings(req), decode_chip=req.pool_chip("decode").name,
                        decode_cluster=req.pool_cluster("decode").name,
                        decode_chip_own=req.decode_chip is not None,
                        decode_tdp_w=req.pool_chip("decode").tdp_w,
                        decode_price_per_chip_hour=req.decode_price_per_chip_hour,
                        dp_searched=dps)


def _shapes(req: SolveRequest, tier: str | int, tier_name: str, pp: int, tp: int,
            prefill_chips: int | None, cache: EvalCache) -> list[ParetoPoint]:
    """The points of one (tier, PP, TP): the Nd ladder, each with its batch ladder."""
    bound = req.bound_n("decode", tp)
    if bound < 1:
        return []
    wall = capacity_wall(lambda n: check_memory(req.eval_config("decode", tier, n, tp, 1,
                                                                dp=1)), bound)
    if wall.n_cap is None:
        return []
    out: list[ParetoPoint] = []
    for nd in nd_ladder(req, tp, wall.n_cap, bound):
        def fits(b: int, nd: int = nd) -> bool:
            return check_memory(req.eval_config("decode", tier, nd, tp, b, dp=1)).fits

        for b in batch_ladder(largest_fitting(fits, MAX_BATCH)):
            result, hit = cache.evaluate(req.eval_config("decode", tier, nd, tp, b, dp=1))
            lat = result.latency_s if result.simulated else None
            out.append(ParetoPoint(
                kv_tier=tier_name, pp=pp, tp=tp, cp=nd, batch=b, tpot_s=lat,
                per_chip_bytes=result.memory.per_chip_bytes,
                meets_sla=lat is not None and lat <= req.sla.tpot_limit_s(b),
                cache_hit=hit, why="" if lat is not None else result.reason,
                prefill_chips=prefill_chips))
            if result.reason.startswith(TOO_LARGE):
                if b == 1:
                    return out   # every larger Nd is a larger graph
                break            # a larger batch is no smaller a graph
    return out


def _dp_shapes(req: SolveRequest, tier: str | int, tier_name: str, dp: int, tp: int,
               prefill_chips: int | None, cache: EvalCache) -> list[ParetoPoint]:
    """The points of one (tier, TP, DP): Nd at the wall of one sequence per DP rank, the batch
    ladder from DP up."""
    bound = req.pool_max_chips("decode") // (dp * tp)
    if bound < 1:
        return []
    wall = capacity_wall(lambda n: check_memory(req.eval_config("decode", tier, n, tp, dp,
                                                                dp=dp)), bound)
    if wall.n_cap is None:
        return []
    nd = next((c for c in candidate_ns(req.candidates, bound, tp, req.group_size or 1)
               if c >= wall.n_cap), None)
    if nd is None:
        return []

    def fits(b: int) -> bool:   # b sequences per DP rank
        return check_memory(req.eval_config("decode", tier, nd, tp, b * dp, dp=dp)).fits

    out: list[ParetoPoint] = []
    per_rank = largest_fitting(fits, MAX_BATCH // dp)
    for b in batch_ladder(per_rank * dp, first=dp):
        result, hit = cache.evaluate(req.eval_config("decode", tier, nd, tp, b, dp=dp))
        lat = result.latency_s if result.simulated else None
        out.append(ParetoPoint(
            kv_tier=tier_name, pp=1, tp=tp, cp=nd, batch=b, tpot_s=lat, dp=dp,
            per_chip_bytes=result.memory.per_chip_bytes,
            meets_sla=lat is not None and lat <= req.sla.tpot_limit_s(b),
            cache_hit=hit, why="" if lat is not None else result.reason,
            prefill_chips=prefill_chips))
        if result.reason.startswith(TOO_LARGE):
            break
    return out


def _mark(points: list[ParetoPoint]) -> list[ParetoPoint]:
    """The points with ``on_front`` / ``on_plan_front`` set."""

    def pair(x: float | None, y: float | None) -> tuple[float, float] | None:
        return None if x is None or y is None else (x, y)

    front = non_dominated([pair(p.tokens_per_s_per_chip, p.tokens_per_s_per_user)
                           for p in points])
    plan = non_dominated([pair(p.plan_tokens_per_s_per_chip, p.tokens_per_s_per_user)
                          for p in points])
    return [replace(p, on_front=f, on_plan_front=q) for p, f, q in zip(points, front, plan,
                                                                        strict=True)]
