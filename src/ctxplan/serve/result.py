"""What ``ctxplan capacity`` returns: per rate, xPyD and the chips, with what was measured.

``CapacityResult.to_dict()`` is the JSON of ``ctxplan capacity --json`` (keys in
docs/serving.md). Deterministic: no wall-clock figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxplan.serve.instances import InstanceShape
from ctxplan.serve.shapes import ShapeRecord, shape_dict
from ctxplan.serve.traffic import ContextMix
from ctxplan.solve.economics import PlanEconomics, economics_dict


@dataclass(frozen=True)
class PoolProbe:
    """One request-level simulation of the search: a pool size and what it attained."""

    pool: str                 # "prefill" | "decode"
    rate_per_s: float         # the rate simulated (a lower rate of the curve, when checked)
    instances: int
    attained_s: float         # the percentile of TTFT (prefill) or TPOT (decode)
    meets_sla: bool
    step: str                 # "bound" (the stability minimum, no TTFT target), the search
                              # step (gallop, binary, verify, ...) or "lower rate"

    def to_dict(self) -> dict[str, Any]:
        return {"pool": self.pool, "rate_per_s": self.rate_per_s, "instances": self.instances,
                "attained_s": self.attained_s, "meets_sla": self.meets_sla, "step": self.step}


@dataclass(frozen=True)
class CapacityPoint:
    """The pools for one arrival rate."""

    rate_per_s: float
    prefill_instances: int | None
    decode_instances: int | None
    prefill_chips_per_instance: int
    decode_chips_per_instance: int
    ttft_percentile_s: float | None   # attained at the answer
    tpot_percentile_s: float | None
    prefill_utilisation: float | None
    decode_utilisation: float | None
    decode_mean_batch: float | None
    prefill_stable_min: int           # the fewest prefill instances that keep up
    decode_stable_min: int
    prefill_min_at_rate: int | None   # the fewest meeting the target at this rate alone
    decode_min_at_rate: int | None
    decode_raised_by_rate_per_s: float | None   # a lower rate that needed more decode
    probes: tuple[PoolProbe, ...]
    reason: str = ""                  # why infeasible ("" when feasible)
    prefill_shape: InstanceShape | None = None   # the instances' shapes at this rate
    decode_shape: InstanceShape | None = None

    @property
    def feasible(self) -> bool:
        return self.prefill_instances is not None and self.decode_instances is not None

    @property
    def prefill_chips(self) -> int | None:
        x = self.prefill_instances
        return None if x is None else x * self.prefill_chips_per_instance

    @property
    def decode_chips(self) -> int | None:
        y = self.decode_instances
        return None if y is None else y * self.decode_chips_per_instance

    @property
    def total_chips(self) -> int | None:
        if not self.feasible:
            return None
        return (self.prefill_chips or 0) + (self.decode_chips or 0)

    @property
    def layout(self) -> str | None:
        """xPyD, as disaggregated serving systems name a deployment (e.g. 5P2D)."""
        if not self.feasible:
            return None
        return f"{self.prefill_instances}P{self.decode_instances}D"

    def to_dict(self) -> dict[str, Any]:
        return {
            "rate_per_s": self.rate_per_s, "feasible": self.feasible, "layout": self.layout,
            "prefill_instances": self.prefill_instances,
            "decode_instances": self.decode_instances,
            "prefill_chips": self.prefill_chips, "decode_chips": self.decode_chips,
            "total_chips": self.total_chips,
            "ttft_percentile_s": self.ttft_percentile_s,
            "tpot_percentile_s": self.tpot_percentile_s,
            "prefill_utilisation": self.prefill_utilisation,
            "decode_utilisation": self.decode_utilisation,
            "decode_mean_batch": self.decode_mean_batch,
            "prefill_stable_min": self.prefill_stable_min,
            "decode_stable_min": self.decode_stable_min,
            "prefill_min_at_rate": self.prefill_min_at_rate,
            "decode_min_at_rate": self.decode_min_at_rate,
            "decode_raised_by_rate_per_s": self.decode_raised_by_rate_per_s,
            "reason": self.reason or None,
            "prefill_shape": None if self.prefill_shape is None
            else shape_dict(self.prefill_shape),
            "decode_shape": None if self.decode_shape is None
            else shape_dict(self.decode_shape),
            "probes": [p.to_dict() for p in self.probes],
        }


@dataclass(frozen=True)
class CapacityResult:
    model: str
    chip: str
    cluster: str
    mix: ContextMix
    output_tokens: int
    percentile: float
    requests: int
    seed: int
    ttft_max_s: float | None
    tpot_max_s: float
    kv_tier: str | None
    prefill_shape: InstanceShape | None
    decode_shape: InstanceShape | None
    prefill_service_s: tuple[float, ...]        # per context length of the mix
    decode_max_batch: tuple[int, ...]           # per context length of the mix
    decode_steps: tuple[tuple[int, int, float], ...]   # (batch, context, TPOT) simulated
    points: tuple[CapacityPoint, ...]
    solve: dict[str, Any]                       # the solve of the instance shapes (its JSON)
    sim_calls: int
    cache_hits: int
    reason: str = ""
    kv_handoff: str | None = None               # the handoff in the prefill service time
    earlier_run_hits: int = 0                   # of cache_hits, from earlier runs' results
    tdp_w: float | None = None                  # per chip; None: the chip file states none
    price_per_chip_hour: float | None = None    # None: no price given for the chip
    shapes: tuple[ShapeRecord, ...] = ()        # every pair tried (serve/shapes.py)
    # The decode instances on a chip / cluster of their own (--decode-chip): their names ("":
    # the same as chip / cluster), TDP and price.
    decode_chip: str = ""
    decode_cluster: str = ""
    decode_chip_own: bool = False
    decode_tdp_w: float | None = None
    decode_price_per_chip_hour: float | None = None

    def economics(self, point: CapacityPoint) -> PlanEconomics | None:
        """Power and cost of a point's pools, per output token served at its rate
        (rate x output tokens per second; solve/economics.py)."""
        chips = point.total_chips
        if chips is None:
            return None
        decode = (point.decode_instances or 0) * point.decode_chips_per_instance
        return PlanEconomics(chips=chips, tokens_per_s=point.rate_per_s * self.output_tokens,
                             tdp_w=self.tdp_w, price_per_chip_hour=self.price_per_chip_hour,
                             decode_chips=decode if self.decode_chip_own else 0,
                             decode_tdp_w=self.decode_tdp_w,
                             decode_price_per_chip_hour=self.decode_price_per_chip_hour)

    @property
    def feasible(self) -> bool:
        return self.prefill_shape is not None and all(p.feasible for p in self.points)

    @property
    def warnings(self) -> tuple[str, ...]:
        """The warnings of the instance shapes' solve (ctxplan.run_warnings)."""
        return tuple(self.solve.get("warnings", ()))

    def to_dict(self) -> dict[str, Any]:
        lengths = self.mix.lengths
        return {
            "model": self.model, "chip": self.chip, "cluster": self.cluster,
            "decode_chip": self.decode_chip or self.chip,
            "decode_cluster": self.decode_cluster or self.cluster,
            "contexts": self.mix.to_list(), "output_tokens": self.output_tokens,
            "percentile": self.percentile, "requests": self.requests, "seed": self.seed,
            "sla": {"ttft_max_s": self.ttft_max_s, "tpot_max_s": self.tpot_max_s},
            "feasible": self.feasible, "reason": self.reason or None,
            "kv_tier": self.kv_tier,
            "prefill_instance": None if self.prefill_shape is None else {
                "cp": self.prefill_shape.cp, "tp": self.prefill_shape.tp,
                "pp": self.prefill_shape.pp, "dp": self.prefill_shape.dp,
                "chips": self.prefill_shape.chips,
                "kv_handoff": self.kv_handoff,
                "service_s": [{"context_length": n, "ttft_s": s}
                              for n, s in zip(lengths, self.prefill_service_s, strict=True)]},
            "decode_instance": None if self.decode_shape is None else {
                "cp": self.decode_shape.cp, "tp": self.decode_shape.tp,
                "pp": self.decode_shape.pp, "dp": self.decode_shape.dp,
                "chips": self.decode_shape.chips,
                "max_batch": [{"context_length": n, "batch": b}
                              for n, b in zip(lengths, self.decode_max_batch, strict=True)],
                "steps": [{"batch": b, "context_length": n, "tpot_s": t}
                          for b, n, t in self.decode_steps]},
            "points": [{**p.to_dict(), **economics_dict(self.economics(p))}
                       for p in self.points],
            "shapes": [r.to_dict(lengths, [p.rate_per_s for p in self.points])
                       for r in self.shapes],
            "sim_calls": self.sim_calls, "cache_hits": self.cache_hits,
            "earlier_run_hits": self.earlier_run_hits,
            "solve": self.solve,
        }
