"""A solve's inputs, validated once, and how they turn into single-point configurations."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ctxplan.errors import UserInputError
from ctxplan.evaluate import DEFAULT_EVENT_LIMIT, EvalConfig, Precision
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.model.kv import default_kv_tiers, resolve_kv_tier
from ctxplan.model.spec import ModelSpec
from ctxplan.solve.candidates import check_candidate_set
from ctxplan.solve.search import STRATEGIES
from ctxplan.solve.sla import SLA

PHASES = ("prefill", "decode")


@dataclass(frozen=True)
class SolveRequest:
    model: ModelSpec
    chip: Chip
    cluster: Cluster
    context_length: int
    sla: SLA = field(default_factory=SLA)
    kv_tiers: tuple[str | int, ...] = ()   # () -> the model's default tiers
    batch: int = 1
    strategy: str = "galloping"
    candidates: str = "all"                # "all" | "group" | "pow2"
    group_size: int | None = None          # None -> the cluster's innermost group
    max_chips: int | None = None           # per pool; None -> the cluster's largest size
    prefill_tp: int = 1
    decode_tp: int = 1
    verify_above: int = 2                  # galloping's check: candidates above N* that must pass
    event_limit: int = DEFAULT_EVENT_LIMIT
    pass_q: str = "broadcast"              # decode query movement: "broadcast" | "ring"
    precision: Precision | None = None     # None: the model's weight dtype, BF16 attention
    periodic_shortcut: bool = False        # EvalConfig.periodic_shortcut for every point
    prefill_ring: str = "pass-kv"          # prefill, full attention: pass-kv | pass-q | auto
    cached_fraction: float = 0.0           # prefill: fraction of the context cached (hit rate)

    def validated(self) -> SolveRequest:
        """Defaults filled in and every field checked (UserInputError names the field)."""
        if self.strategy not in STRATEGIES:
            raise UserInputError("strategy", self.strategy, f"use one of {', '.join(STRATEGIES)}")
        check_candidate_set(self.candidates)
        cluster_max = self.cluster.max_chips
        max_chips = cluster_max if self.max_chips is None else self.max_chips
        if isinstance(max_chips, bool) or not isinstance(max_chips, int) or max_chips < 1:
            raise UserInputError("max_chips", self.max_chips, "give a whole number >= 1")
        if max_chips > cluster_max:
            raise UserInputError("max_chips", max_chips,
                                 f"give at most {cluster_max}, the size of cluster "
                                 f"{self.cluster.name}, or pick a larger cluster")
        group = self.cluster.levels[0].chips_per_group if self.group_size is None \
            else self.group_size
        if isinstance(group, bool) or not isinstance(group, int) or group < 1:
            raise UserInputError("group_size", self.group_size, "give a whole number >= 1")
        f = self.cached_fraction
        if isinstance(f, bool) or not isinstance(f, int | float) or not 0 <= f < 1:
            raise UserInputError("cached_fraction", f, "give a fraction 0 <= F < 1 of the "
                                 "context that is cached, e.g. 0.9")
        if self.verify_above < 0:
            raise UserInputError("verify_above", self.verify_above, "give a whole number >= 0")
        tiers = self.kv_tiers or tuple(default_kv_tiers(self.model))
        names: list[str | int] = []
        for tier in tiers:
            name, _ = resolve_kv_tier(self.model, tier)
            if name not in names:
                names.append(name)
        for phase, tp in (("prefill", self.prefill_tp), ("decode", self.decode_tp)):
            if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
                raise UserInputError(f"{phase}_tp", tp, "give a whole number >= 1")
            if tp > max_chips:
                raise UserInputError(f"{phase}_tp", tp,
                                     f"give at most max_chips = {max_chips} chips per rank")
        out = replace(self, kv_tiers=tuple(names), max_chips=max_chips, group_size=group)
        for phase, tp in (("prefill", self.prefill_tp), ("decode", self.decode_tp)):
            out.eval_config(phase, names[0], 1, tp).layout()  # validates tp, batch, S now
        return out

    def tp(self, phase: str) -> int:
        return self.prefill_tp if phase == "prefill" else self.decode_tp

    def bound_n(self, phase: str) -> int:
        assert self.max_chips is not None, "call validated() first"
        return self.max_chips // self.tp(phase)

    @property
    def cached_tokens(self) -> int:
        """The prefill's cached prefix: floor(F * S), leaving at least one new token."""
        return min(math.floor(self.cached_fraction * self.context_length),
                   self.context_length - 1)

    def eval_config(self, phase: str, tier: str | int, n: int, tp: int) -> EvalConfig:
        prefill = phase == "prefill"
        return EvalConfig(model=self.model, chip=self.chip, cluster=self.cluster, phase=phase,
                          context_length=self.context_length, cp=n, tp=tp, batch=self.batch,
                          kv_tier=tier, event_limit=self.event_limit,
                          pass_q=self.pass_q if phase == "decode" else "broadcast",
                          precision=self.precision, periodic_shortcut=self.periodic_shortcut,
                          cached=self.cached_tokens if prefill else 0,
                          prefill_ring=self.prefill_ring if prefill else "pass-kv")
