"""The instance shapes ``ctxplan capacity`` tries, and the bound that skips a pair unsimulated.

The rule (docs/serving.md, "Shapes searched"), from the solve at the mix's longest context,
in its KV tier and its pools' pipeline depths:

* prefill: for each prefill TP the solve may use, Np = the fewest CP ranks meeting the TTFT
  target at that TP (the solve's own per-pool search, run at that TP alone), and the first
  candidate N at or above twice it (a faster instance queues less under a TTFT target);
* decode: for each decode TP, Nd = the fewest CP ranks holding one sequence within the TPOT
  target (the solve's per-pool search at batch 1), and the first candidates at or above 2x
  and 4x it (a larger instance holds a larger batch);
* decode with DP attention (``--decode-dp``, searched by default): for each decode TP, 2, 4 and 8
  DP ranks of that TP's Nd each (within ``--max-chips``); a request's KV is handed to one DP
  rank's CP group;
* prefill with DP attention (``--prefill-dp``, searched by default): for each prefill TP, 2, 4
  and 8 DP ranks of that TP's Np each, and of the fewest CP ranks below it that hold one request
  per DP rank (the experts over more chips); such an instance serves DP requests at once, each
  with the TTFT of the instance prefilling one per DP rank (with its handoff, each request's
  KV to a decode group of its own);
* the solve's own pair (handoff check included) always, so the answer at a rate is never
  more chips than the fixed-shape answer of the solve's shapes.

Every prefill shape is paired with every decode shape. A pair's chips at a rate are at least

    x_alone(P) x chips(P) + y_min(D) x chips(D)

where x_alone(P) is the fewest prefill instances meeting the TTFT target (or keeping up, with
no target) with the prefill-alone service times: a pair's service adds the unhidden part of the
KV handoff, never shortening it (tests/serve/test_shapes.py), and for a first-come-first-served
queue of identical servers a longer service never hastens a request (Kiefer-Wolfowitz), so
fewer instances never suffice; and y_min(D) = floor(rate / r_max) + 1, the decode pool's
stability minimum at r_max, more requests per second than one instance can finish. Two forms of
r_max, as steps never fall when the batch or the context grows (same test file): the cheap one
b_mem / (steps x step(1)), b_mem the largest batch of the shortest requests within the capacity
wall (more than the instance ever admits) and step(1) its simulated one-sequence step; the tight
one over the batches up to the largest whose step meets the TPOT target (doubling, then
bisection), b_next / step(b) between consecutive batches simulated, divided by the steps. A
pair whose cheap bound at every rate exceeds the best pair found there (or ties it and loses the
tie) is not simulated; one that passes is bounded again tightly (the decode steps it simulates
are the ones its own simulation would ask for first) and simulated only if it still passes. A
pair cut is recorded with the bounds that cut it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctxplan.config.values import MAX_BATCH
from ctxplan.evaluate import check_memory
from ctxplan.serve.instances import InstanceShape
from ctxplan.solve import EvalCache, SolveRequest
from ctxplan.solve.candidates import candidate_ns
from ctxplan.solve.phase import solve_pool
from ctxplan.solve.result import TierPlan

PREFILL_SCALES = (1, 2)      # Np at the TP's answer, and at twice it
DECODE_SCALES = (1, 2, 4)    # Nd at the TP's answer, twice and four times it

SEARCHED, CUT, INFEASIBLE = "searched", "cut", "infeasible"


@dataclass(frozen=True)
class ShapePair:
    """One prefill instance shape with one decode instance shape."""

    prefill: InstanceShape
    decode: InstanceShape
    solved: bool = False      # the solve's own pair

    @property
    def tie_key(self) -> tuple[int, ...]:
        """Ties at a rate go to the solve's pair, then the smaller instances, the smaller TP."""
        p, d = self.prefill, self.decode
        return (0 if self.solved else 1, p.chips + d.chips, d.dp, d.tp, p.tp, d.cp, p.cp)


@dataclass(frozen=True)
class ShapeRecord:
    """What became of one pair: simulated at every rate, or cut by its bound."""

    pair: ShapePair
    status: str                              # SEARCHED | CUT | INFEASIBLE
    bound_chips: tuple[int | None, ...]      # per rate; None: no pool of this shape can
    chips: tuple[int | None, ...] = ()       # per rate when searched; None: infeasible there
    service_s: tuple[float, ...] = ()        # prefill service per context length (searched)
    max_batch: tuple[int, ...] = ()          # decode batch limit per context length
    kv_handoff: str | None = None            # the handoff in the service time, when simulated
    why: str = ""

    def to_dict(self, lengths: Sequence[int], rates: Sequence[float]) -> dict[str, Any]:
        p, d = self.pair.prefill, self.pair.decode
        return {
            "prefill": shape_dict(p), "decode": shape_dict(d), "solved": self.pair.solved,
            "status": self.status, "why": self.why or None,
            "rates": [{"rate_per_s": r, "bound_chips": b,
                       "total_chips": self.chips[i] if self.chips else None}
                      for i, (r, b) in enumerate(zip(rates, self.bound_chips, strict=True))],
            "kv_handoff": self.kv_handoff,
            "service_s": [{"context_length": n, "ttft_s": s}
                          for n, s in zip(lengths, self.service_s, strict=False)],
            "max_batch": [{"context_length": n, "batch": b}
                          for n, b in zip(lengths, self.max_batch, strict=False)],
        }


def shape_dict(s: InstanceShape) -> dict[str, int]:
    return {"cp": s.cp, "tp": s.tp, "pp": s.pp, "dp": s.dp, "chips": s.chips}


def candidate_pairs(req: SolveRequest, best: TierPlan, cache: EvalCache) -> list[ShapePair]:
    """The pairs of the module docstring's rule; the solve's pair first."""
    req = req.with_pp(best.prefill.pp, best.decode.pp)
    assert best.prefill.answer is not None and best.decode.answer is not None
    solved = ShapePair(InstanceShape(best.prefill.answer, best.prefill.tp, best.prefill.pp),
                       InstanceShape(best.decode.answer, best.decode.tp, best.decode.pp,
                                     best.decode.dp), True)
    prefill = _shapes(req, "prefill", best, cache, PREFILL_SCALES, solved.prefill)
    decode = _shapes(req, "decode", best, cache, DECODE_SCALES, solved.decode)
    pairs = [solved]
    pairs += [ShapePair(p, d) for p in prefill for d in decode
              if (p, d) != (solved.prefill, solved.decode)]
    return pairs


def _shapes(req: SolveRequest, phase: str, best: TierPlan, cache: EvalCache,
            scales: tuple[int, ...], chosen: InstanceShape) -> list[InstanceShape]:
    plan = best.prefill if phase == "prefill" else best.decode
    pp = plan.pp
    out = {chosen}
    for choice in req.tp_choices(phase):
        if choice.excluded:
            continue
        tp = choice.tp
        # this TP alone, at the chosen depth
        one = replace(req, prefill_tp=tp) if phase == "prefill" else replace(req, decode_tp=tp)
        # (the solve's own answer, unless --batch auto gave its chips to DP ranks)
        found = plan.answer if tp == plan.tp and plan.dp == 1 else \
            solve_pool(one, phase, best.kv_tier, cache).answer
        if found is None:
            continue
        group = req.group_size or 1
        ns = candidate_ns(req.candidates, req.bound_n(phase, tp), tp * pp, group)
        for k in scales:
            n = next((c for c in ns if c >= k * found), None)
            if n is not None:
                out.add(InstanceShape(n, tp, pp))
        if pp == 1:
            # DP attention: DP ranks of the TP's answer each (a rank holds its sequences
            # whole), within the pool's bound; a prefill DP rank also at its own capacity
            # wall (the experts spread over more chips leave room for fewer CP ranks)
            for dp in req.dp_choices(MAX_BATCH, found * tp, phase):
                if dp > 1:
                    out.add(InstanceShape(found, tp, 1, dp))
                    if phase == "prefill":
                        wall = _dp_prefill_wall(req, best.kv_tier, tp, dp, found)
                        if wall is not None:
                            out.add(InstanceShape(wall, tp, 1, dp))
    return sorted(out, key=lambda s: (s.dp, s.tp, s.cp))


def _dp_prefill_wall(req: SolveRequest, tier: str, tp: int, dp: int, below: int) -> int | None:
    """The fewest CP ranks (a candidate) below ``below`` whose DP prefill of one request per
    DP rank fits memory; None when none below it does."""
    group = req.group_size or 1
    for n in candidate_ns(req.candidates, below - 1, tp * dp, group):
        if check_memory(req.eval_config("prefill", tier, n, tp, dp, dp=dp)).fits:
            return n
    return None
