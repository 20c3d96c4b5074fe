"""The pair check: the per-pool answers with the KV handoff between them.

The two sub-problems are solved as before (the prefill pool against TTFT, the decode pool
against TPOT, each alone). Then the pair (Np*, Nd*) is simulated with the handoff
(``EvalConfig.handoff_to``: the prefill with its KV moving to the decode pool placed on the chips
after it, mapping/handoff.py), and its TTFT, prefill plus the part of the handoff not hidden
behind it, is what the TTFT target covers, since a user sees both. When it misses the target the
solver steps one pool up until the pair meets it, trying both ways:

* Np up (Nd kept): a larger prefill pool finishes sooner and sends from more chips;
* Nd up (Np kept): more chips receive, each fewer bytes; every Nd must still meet TPOT;

each by the search strategy of the solve (galloping, checked, by default) over the candidate
set, bounded so the two pools fit the cluster together, and keeps the way that costs fewer
chips (ties: the lower TTFT, then Np). Each way steps N at the TP degree its pool's search
chose (the TP search is not rerun with the handoff). Every pair simulated is on record as a
candidate with ``step: "handoff"`` and its ``handoff_to``; the pool stepped up is then bound by
the TTFT target (``bound_by: "ttft"``). Without a TTFT target the pair is simulated once, for
the handoff it reports.

The prefill of the pair is one sequence under ``--batch auto`` (the request whose TTFT is
measured; the decode pool then holds it among its batch), the fixed batch otherwise. A larger
decode pool must meet TPOT as pools are chosen (at the fixed batch, or at one sequence under
``--batch auto``: the batch the smaller pool was filled to need not be served faster by a larger
one, as pass-Q and the merge grow with it); under ``--batch auto`` the pool stepped up is then
filled again (:func:`ctxplan.solve.batch.search_batch`).
"""

from __future__ import annotations

from dataclasses import replace

from ctxplan.evaluate import EvalResult, HandoffReport
from ctxplan.solve.batch import search_batch
from ctxplan.solve.cache import EvalCache
from ctxplan.solve.candidates import candidate_ns
from ctxplan.solve.request import SolveRequest
from ctxplan.solve.result import Candidate, HandoffCheck, PhasePlan, TierPlan, TPOption
from ctxplan.solve.search import fmt_seconds, search

HANDOFF_STEP = "handoff"


def check_pair(req: SolveRequest, tier: TierPlan, cache: EvalCache) -> TierPlan:
    """``tier`` with its pair checked (and stepped) for the KV handoff; unchanged when the
    handoff is off or a pool is infeasible."""
    p, d = tier.prefill, tier.decode
    if req.policy.kv_handoff == "off" or p.answer is None or d.answer is None:
        return tier
    np0, nd0 = p.answer, d.answer
    tp_p, tp_d = p.tp, d.tp
    # Each pool at its chosen pipeline depth (and decode DP degree); chips per CP rank are
    # pp x tp (x dp: a rank in each DP rank).
    req = req.with_pp(p.pp, d.pp).with_dp(d.dp)
    cr_p, cr_d = tp_p * p.pp, tp_d * d.pp * d.dp
    limit = req.sla.ttft_max_s
    room = req.cluster.max_chips
    colocate = req.policy.colocate_pools
    records: list[Candidate] = []
    results: dict[tuple[int, int], EvalResult] = {}
    batch_p = req.base_batch       # the prefill's batch (1 under --batch auto)

    def fits(n_p: int, n_d: int) -> bool:
        """Both pools on the cluster, the decode pool from its first chip on (the next host's
        unless colocated: docs/handoff.md, "Placement"); with the decode pool on a cluster
        of its own, each pool on its own."""
        if req.decode_cluster is not None:
            return n_p * cr_p <= room and n_d * cr_d <= req.decode_cluster.max_chips
        return req.cluster.decode_start(n_p * cr_p, colocate) + n_d * cr_d <= room

    def pair(n_p: int, n_d: int, step: str) -> EvalResult | None:
        if not fits(n_p, n_d):
            return None
        result, hit = cache.evaluate(req.pair_config(tier.kv_tier, n_p, tp_p, n_d, tp_d))
        results[(n_p, n_d)] = result
        records.append(_candidate(tier.kv_tier, n_p, tp_p, n_d, result, hit, limit, step,
                                  batch_p))
        return result

    first = pair(np0, nd0, HANDOFF_STEP)
    if first is None or first.latency_s is None:
        start = req.cluster.decode_start(np0 * cr_p, colocate)
        apart = "" if start == np0 * cr_p else \
            f", the decode pool from chip {start} (the next host)"
        reason = (f"the two pools ({np0 * cr_p} + {nd0 * cr_d} chips{apart}) do not fit "
                  f"cluster {req.cluster.name} ({room} chips) together, so the KV handoff "
                  "between them cannot be simulated" if first is None else
                  f"the pair with its handoff was not simulated: {first.reason}")
        check = HandoffCheck(req.policy.kv_handoff, False, None, None, None, None, None, "",
                             (np0, nd0), reason)
        if limit is None:
            return replace(tier, handoff=check)
        return replace(tier, handoff=check, prefill=_infeasible(p, records,
                                                                f"prefill + handoff: {reason}"))
    if limit is None or first.latency_s <= limit:
        return _answer(tier, first, np0, nd0, records, "", (np0, nd0), req, cache)

    # Step up one pool or the other; keep what costs fewer chips.
    group = req.group_size or 1
    np_cands = [n for n in candidate_ns(req.candidates, req.bound_n("prefill", tp_p), cr_p,
                                        group)
                if n > np0 and fits(n, nd0)]
    by_np = search(np_cands, lambda n: _ttft(pair(n, nd0, HANDOFF_STEP)), limit,
                   req.strategy, verify_above=req.verify_above) if np_cands else None
    # A larger decode pool must meet TPOT as pools are chosen: at the fixed batch, or at one
    # sequence under --batch auto (then it is filled again, in _answer).
    tpot_limit = req.sla.tpot_limit_s(req.base_batch)

    def with_nd(n: int) -> float | None:
        dec, hit = cache.evaluate(req.eval_config("decode", tier.kv_tier, n, tp_d))
        if dec.latency_s is None or dec.latency_s > tpot_limit:
            records.append(_decode_candidate(tier.kv_tier, n, tp_d, dec, hit, tpot_limit,
                                             req.base_batch))
            return float("inf")   # this Nd misses TPOT (or does not fit): not a way out
        return _ttft(pair(np0, n, HANDOFF_STEP))

    nd_cands = [n for n in candidate_ns(req.candidates, req.bound_n("decode", tp_d), cr_d,
                                        group)
                if n > nd0 and fits(np0, n)]
    by_nd = search(nd_cands, with_nd, limit, req.strategy,
                   verify_above=req.verify_above) if nd_cands else None
    ways: list[tuple[int, float, int, int, int, str]] = []
    inf = float("inf")
    if by_np is not None and by_np.answer is not None:
        n = by_np.answer
        ways.append((n * cr_p + nd0 * cr_d, results[(n, nd0)].latency_s or inf, 0, n, nd0,
                     "prefill"))
    if by_nd is not None and by_nd.answer is not None:
        n = by_nd.answer
        ways.append((np0 * cr_p + n * cr_d, results[(np0, n)].latency_s or inf, 1, np0, n,
                     "decode"))
    if not ways:
        best = min((r.latency_s for r in results.values() if r.latency_s is not None),
                   default=None)
        reason = (f"prefill + handoff: TTFT {fmt_seconds(first.latency_s)} at Np = {np0}, Nd "
                  f"= {nd0} > {fmt_seconds(limit)}, and no larger Np (Nd = {nd0}) or Nd (Np = "
                  f"{np0}) within the cluster's {room} chips meets it; the fastest pair tried "
                  f"is {fmt_seconds(best)}")
        return replace(tier, prefill=_infeasible(p, records, reason), handoff=HandoffCheck(
            req.policy.kv_handoff, True, _h(first).prefill_s, _h(first).handoff_s, first.latency_s,
            _h(first).bytes_moved, _h(first).decode_kv_bytes, "", (np0, nd0), reason))
    _, _, _, n_p, n_d, stepped = min(ways)
    return _answer(tier, results[(n_p, n_d)], n_p, n_d, records, stepped, (np0, nd0), req,
                   cache)


def _ttft(result: EvalResult | None) -> float | None:
    return None if result is None else result.latency_s


def _h(result: EvalResult) -> HandoffReport:
    assert result.handoff is not None
    return result.handoff


def _answer(tier: TierPlan, result: EvalResult, n_p: int, n_d: int, records: list[Candidate],
            stepped: str, start: tuple[int, int], req: SolveRequest,
            cache: EvalCache) -> TierPlan:
    h = _h(result)
    p, d = tier.prefill, tier.decode
    records = [replace(c, pp=p.pp if c.phase == "prefill" else d.pp) for c in records]
    prefill = replace(p, answer=n_p, latency_s=result.latency_s,
                      per_chip_bytes=result.memory.per_chip_bytes,
                      ring=result.ring.used if result.ring is not None else p.ring,
                      candidates=p.candidates + tuple(c for c in records if c.phase == "prefill"))
    if stepped == "prefill":
        prefill = replace(prefill, bound_by="ttft",
                          tp_options=_restated(p.tp_options, p.tp, n_p, result.latency_s,
                                               result.memory.per_chip_bytes, p.pp))
    decode = replace(d, candidates=d.candidates + tuple(c for c in records
                                                        if c.phase == "decode"))
    if n_d != d.answer:
        if req.batch_auto:   # the larger pool is filled again
            filled = search_batch(req, tier.kv_tier, d.kv_tier, d.tp, n_d, cache)
            b = filled.plan
            decode = replace(decode, answer=n_d, batch=b.batch, latency_s=b.tpot_s,
                             per_chip_bytes=b.per_chip_bytes, batch_plan=b, limit_s=b.limit_s,
                             candidates=decode.candidates + filled.candidates)
        else:
            dec, _ = cache.evaluate(req.eval_config("decode", tier.kv_tier, n_d, d.tp,
                                                    d.batch))
            decode = replace(decode, answer=n_d, latency_s=dec.latency_s,
                             per_chip_bytes=dec.memory.per_chip_bytes)
        decode = replace(decode, bound_by="ttft",
                         tp_options=_restated(d.tp_options, d.tp, n_d, decode.latency_s,
                                              decode.per_chip_bytes, d.pp))
    check = HandoffCheck(result.handoff.mode if result.handoff else req.policy.kv_handoff, True,
                         h.prefill_s, h.handoff_s, result.latency_s, h.bytes_moved,
                         h.decode_kv_bytes, stepped, start,
                         first_decode_chip=h.first_decode_chip)
    return replace(tier, prefill=prefill, decode=decode, handoff=check)


def _restated(options: tuple[TPOption, ...], tp: int, n: int, latency_s: float | None,
              per_chip_bytes: int | None, pp: int = 1) -> tuple[TPOption, ...]:
    """The TP options with the chosen one's answer moved to the N the pair check stepped to."""
    return tuple(replace(o, answer=n, latency_s=latency_s, per_chip_bytes=per_chip_bytes,
                         why=f"{o.why}; stepped to N = {n} by the KV handoff check")
                 if o.status == "chosen" and o.tp == tp and o.pp == pp else o
                 for o in options)


def _infeasible(p: PhasePlan, records: list[Candidate], reason: str) -> PhasePlan:
    records = [replace(c, pp=p.pp) for c in records]
    return replace(p, answer=None, latency_s=None, per_chip_bytes=None, bound_by=None,
                   candidates=p.candidates + tuple(records), infeasible_reason=reason)


def _candidate(tier: str, n_p: int, tp: int, n_d: int, result: EvalResult, hit: bool,
               limit: float | None, step: str, batch: int) -> Candidate:
    mem = result.memory
    h = result.handoff
    if result.latency_s is None or h is None:
        why, meets = result.reason, False
    else:
        split = (f"prefill {fmt_seconds(h.prefill_s)} + handoff to Nd = {n_d} "
                 f"{fmt_seconds(h.handoff_s)} not hidden")
        meets = limit is None or result.latency_s <= limit
        why = (f"TTFT {fmt_seconds(result.latency_s)} = {split}" if limit is None else
               f"TTFT {fmt_seconds(result.latency_s)} {'<=' if meets else '>'} "
               f"{fmt_seconds(limit)} ({split})")
    return Candidate(phase="prefill", kv_tier=tier, n=n_p, tp=tp, latency_s=result.latency_s,
                     per_chip_bytes=mem.per_chip_bytes, capacity_bytes=mem.capacity_bytes,
                     fits=mem.fits, meets_sla=meets, simulated=result.simulated, cache_hit=hit,
                     cut_by=None, step=step, why=why, batch=batch, handoff_to=n_d)


def _decode_candidate(tier: str, n: int, tp: int, result: EvalResult, hit: bool,
                      limit: float, batch: int) -> Candidate:
    mem = result.memory
    why = result.reason if result.latency_s is None else (
        f"TPOT {fmt_seconds(result.latency_s)} > {fmt_seconds(limit)}: not a way to a shorter "
        "handoff")
    return Candidate(phase="decode", kv_tier=tier, n=n, tp=tp, latency_s=result.latency_s,
                     per_chip_bytes=mem.per_chip_bytes, capacity_bytes=mem.capacity_bytes,
                     fits=mem.fits, meets_sla=False, simulated=result.simulated,
                     cache_hit=hit, cut_by=None, step=HANDOFF_STEP, why=why, batch=batch)
