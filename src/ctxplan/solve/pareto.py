"""``ctxplan pareto``: the decode pool's shapes, tokens/s per chip against tokens/s per user.

The view AIConfigurator users start from: every decode shape searched, at its simulated TPOT,
placed by how fast it serves one user (1 / TPOT) and how many tokens it serves per chip
(batch / TPOT / chips); the shapes no other beats on both are the front. A faster user means a
smaller batch or more chips per sequence, so the two pull against each other.

Which shapes are searched (a stated rule, never a grid; docs/solver.md, "The Pareto front"):

* every KV tier of the request, every TP degree the solve may use (``--decode-tp``), every
  pipeline depth ``--decode-pp N`` fixes (``auto``, the default, is 1 here);
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
instant), except a point its TPOT floor shows dominated on both fronts (``_simulate``).
``meets_sla`` says whether its TPOT meets ``--tpot-max`` (as ``--tps-reading`` reads
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
# How far below a smaller batch's TPOT a larger batch's may be on one shape. TPOT grows with
# the batch (each sequence adds its KV reads and its tokens' expert slots), but not strictly:
# how the sequences and routed slots divide over the ranks makes small dips (at most 0.5 %
# seen over DeepSeek-V3, Qwen3-235B, Llama and gpt-oss with CP, TP and DP;
# tests/solve/test_pareto.py holds every larger batch to within this of every smaller one).
TPOT_DIP = 0.02
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
                     "dp": list(self.dp_searched), "tpot_dip": TPOT_DIP},
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
    # The decode depth as fixed (``--decode-pp N``); auto is 1 here: a deeper pipeline was never
    # on the front where measured (docs/solver.md, "The Pareto front"), and each depth is
    # another ladder of shapes.
    depths = (req.pp_fixed("decode") or 1,)
    dps = tuple(dp for dp in req.dp_choices(MAX_BATCH) if dp > 1)

    prefills: list[PhasePlan] = []
    groups: list[_Group] = []
    for done, tier in enumerate(tiers):
        if progress is not None:
            progress(f"prefill {tier}", done, len(tiers))
        prefill = solve_pool(req, "prefill", tier, cache)
        prefills.append(prefill)
        for pp in depths:
            at_depth = req.with_pp(prefill.pp, pp)
            for choice in at_depth.tp_choices("decode"):
                if not choice.excluded:
                    groups += _nd_groups(at_depth, tier, prefill.kv_tier, pp, choice.tp,
                                         prefill.chips)
                    if pp == 1:
                        for dp in dps:
                            groups += _dp_group(at_depth, tier, prefill.kv_tier, dp,
                                                choice.tp, prefill.chips)
    points = _mark(_simulate(groups, cache, progress))
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


@dataclass(frozen=True)
class _Group:
    """One shape's batch ladder: a (tier, PP, DP, TP, Nd), its batches ascending."""

    req: SolveRequest
    tier: str | int
    tier_name: str
    pp: int
    dp: int
    tp: int
    nd: int
    batches: tuple[int, ...]
    prefill_chips: int | None
    rung: int          # its place on the Nd ladder (0: the wall; DP shapes are at the wall)
    family: tuple[str, int, int, int]   # (tier, PP, DP, TP): a too-large graph ends its ladder

    @property
    def chips(self) -> int:
        return self.pp * self.dp * self.nd * self.tp


def _nd_groups(req: SolveRequest, tier: str | int, tier_name: str, pp: int, tp: int,
               prefill_chips: int | None) -> list[_Group]:
    """The shapes of one (tier, PP, TP): the Nd ladder, each with its batch ladder (memory
    checks only)."""
    bound = req.bound_n("decode", tp)
    if bound < 1:
        return []
    wall = capacity_wall(lambda n: check_memory(req.eval_config("decode", tier, n, tp, 1,
                                                                dp=1)), bound)
    if wall.n_cap is None:
        return []
    out: list[_Group] = []
    for rung, nd in enumerate(nd_ladder(req, tp, wall.n_cap, bound)):
        def fits(b: int, nd: int = nd) -> bool:
            return check_memory(req.eval_config("decode", tier, nd, tp, b, dp=1)).fits

        out.append(_Group(req, tier, tier_name, pp, 1, tp, nd,
                          tuple(batch_ladder(largest_fitting(fits, MAX_BATCH))),
                          prefill_chips, rung, (tier_name, pp, 1, tp)))
    return out


def _dp_group(req: SolveRequest, tier: str | int, tier_name: str, dp: int, tp: int,
              prefill_chips: int | None) -> list[_Group]:
    """The shape of one (tier, TP, DP): Nd at the wall of one sequence per DP rank, the batch
    ladder from DP up (memory checks only)."""
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

    per_rank = largest_fitting(fits, MAX_BATCH // dp)
    return [_Group(req, tier, tier_name, 1, dp, tp, nd,
                   tuple(batch_ladder(per_rank * dp, first=dp)), prefill_chips, 0,
                   (tier_name, 1, dp, tp))]


def _simulate(groups: list[_Group], cache: EvalCache,
              progress: Progress | None) -> list[ParetoPoint]:
    """Every group's points, simulated rung by rung (the walls first), each ladder by batch
    ascending; a point its bound shows dominated is recorded, not simulated.

    The bound: TPOT does not fall as a batch grows on one shape (the assumption ``--batch
    auto`` rests on), by more than ``TPOT_DIP`` (tested in tests/solve/test_pareto.py), so
    the TPOT of the largest batch simulated below b on the same shape, less ``TPOT_DIP``, is
    a floor on b's TPOT. With it, b's tokens/s per user is at most 1 / floor and its tokens/s
    per chip (and of the whole plan) at most b / floor / chips. A point some simulated point
    beats on both of those ceilings, on the decode pool's figure and on the plan's, cannot be
    on either front (it is recorded with ``meets_sla`` false, as every point not simulated).
    """
    order = sorted(range(len(groups)), key=lambda i: (groups[i].rung, i))
    points: dict[tuple[int, int], ParetoPoint] = {}
    ended: set[tuple[str, int, int, int]] = set()
    simulated: list[ParetoPoint] = []
    for done, i in enumerate(order):
        g = groups[i]
        if g.family in ended:
            continue   # a larger Nd of a ladder whose batch 1 was too large to build
        if progress is not None:
            progress(f"decode {g.tier_name} " + (f"DP{g.dp} " if g.dp > 1 else "")
                     + (f"PP{g.pp} " if g.pp > 1 else "") + f"TP{g.tp} Nd{g.nd}", done,
                     len(order))
        floor_s: float | None = None   # the TPOT of the largest batch simulated so far
        floor_batch = 0
        for k, b in enumerate(g.batches):
            cfg = g.req.eval_config("decode", g.tier, g.nd, g.tp, b, dp=g.dp)
            beaten = None if floor_s is None else _beaten_by(simulated, g, b, floor_s)
            if beaten is not None and floor_s is not None:
                points[(i, k)] = ParetoPoint(
                    kv_tier=g.tier_name, pp=g.pp, tp=g.tp, cp=g.nd, batch=b, tpot_s=None,
                    dp=g.dp, per_chip_bytes=check_memory(cfg).per_chip_bytes,
                    meets_sla=False, cache_hit=False,
                    why=f"dominated: its TPOT is at least {floor_s * 1e3:.4g} ms (batch "
                        f"{floor_batch}'s on its shape, less {TPOT_DIP:.0%}), so it is "
                        f"beaten by {_shape_text(beaten)}", prefill_chips=g.prefill_chips)
                continue
            result, hit = cache.evaluate(cfg)
            lat = result.latency_s if result.simulated else None
            point = ParetoPoint(
                kv_tier=g.tier_name, pp=g.pp, tp=g.tp, cp=g.nd, batch=b, tpot_s=lat, dp=g.dp,
                per_chip_bytes=result.memory.per_chip_bytes,
                meets_sla=lat is not None and lat <= g.req.sla.tpot_limit_s(b),
                cache_hit=hit, why="" if lat is not None else result.reason,
                prefill_chips=g.prefill_chips)
            points[(i, k)] = point
            if lat is not None:
                simulated.append(point)
                floor_s, floor_batch = lat * (1.0 - TPOT_DIP), b
            if result.reason.startswith(TOO_LARGE):
                if k == 0 and g.dp == 1:
                    ended.add(g.family)   # every larger Nd is a larger graph
                break                     # a larger batch is no smaller a graph
    return [points[key] for key in sorted(points)]


def _beaten_by(simulated: Sequence[ParetoPoint], g: _Group, batch: int,
               floor_s: float) -> ParetoPoint | None:
    """A simulated point better on both figures than batch ``batch`` of ``g`` can be, given
    its TPOT is at least ``floor_s`` (None: none is)."""
    user = 1.0 / floor_s
    chip = batch / floor_s / g.chips
    plan = None if g.prefill_chips is None else batch / floor_s / (g.prefill_chips + g.chips)
    for q in simulated:
        q_user, q_chip = q.tokens_per_s_per_user, q.tokens_per_s_per_chip
        if q_user is None or q_chip is None or not (q_user > user and q_chip > chip):
            continue
        q_plan = q.plan_tokens_per_s_per_chip
        if plan is None or (q_plan is not None and q_plan > plan):
            return q
    return None


def _shape_text(p: ParetoPoint) -> str:
    dp = f"DP{p.dp} x " if p.dp > 1 else ""
    pp = f"PP{p.pp} x " if p.pp > 1 else ""
    return f"{p.kv_tier} {pp}{dp}TP{p.tp} x Nd{p.cp} batch {p.batch}"


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
