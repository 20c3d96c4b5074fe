"""A solve's inputs, validated once, and how they turn into single-point configurations."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ctxplan.config.edge_warnings import context_warnings
from ctxplan.errors import UserInputError, did_you_mean
from ctxplan.evaluate import DEFAULT_EVENT_LIMIT, HANDOFF_MODES, EvalConfig
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.model.kv import default_kv_tiers, resolve_kv_tier
from ctxplan.model.precision import Precision
from ctxplan.model.spec import ModelSpec
from ctxplan.solve.candidates import check_candidate_set
from ctxplan.solve.search import STRATEGIES
from ctxplan.solve.sla import SLA

PHASES = ("prefill", "decode")
OBJECTIVES = ("chips", "tokens-per-chip")
AUTO = "auto"
MAX_BATCH = 2**20           # the mapping layer's bound (mapping/layout.py)


@dataclass(frozen=True)
class TPChoice:
    """One TP degree a pool may use, or why it may not (``excluded``)."""

    tp: int
    excluded: str = ""      # "" when allowed


@dataclass(frozen=True)
class SolveRequest:
    model: ModelSpec
    chip: Chip
    cluster: Cluster
    context_length: int
    sla: SLA = field(default_factory=SLA)
    kv_tiers: tuple[str | int, ...] = ()   # () -> the model's default tiers
    batch: int | str = 1                   # "auto": the largest the decode pool serves
    strategy: str = "galloping"
    candidates: str = "all"                # "all" | "group" | "pow2"
    group_size: int | None = None          # None -> the cluster's (Cluster.candidate_group_size)
    max_chips: int | None = None           # per pool; None -> the cluster's largest size
    prefill_tp: int | str = AUTO           # "auto": searched over tp_choices()
    decode_tp: int | str = AUTO
    objective: str = "chips"               # "chips" | "tokens-per-chip"
    memory_headroom: float = 1.0           # usable fraction of memory after the reserve
    verify_above: int = 2                  # galloping's check: candidates above N* that must pass
    event_limit: int = DEFAULT_EVENT_LIMIT
    pass_q: str = "broadcast"              # decode query movement: "broadcast" | "ring"
    precision: Precision | None = None     # None: the model's weight dtype, BF16 attention
    periodic_shortcut: bool = False        # EvalConfig.periodic_shortcut for every point
    prefill_ring: str = "pass-kv"          # prefill, full attention: pass-kv | pass-q | auto
    cached_fraction: float = 0.0           # prefill: fraction of the context cached (hit rate)
    kv_handoff: str = "streamed"           # "off" | "after" | "streamed" (solve/handoff.py)
    strict_context: bool = False           # a context beyond the model's limit: error, not warning

    def validated(self) -> SolveRequest:
        """Defaults filled in and every field checked (UserInputError names the field)."""
        if self.strategy not in STRATEGIES:
            hint = did_you_mean(self.strategy, STRATEGIES)
            raise UserInputError("strategy", self.strategy,
                                 f"{hint}use one of {', '.join(STRATEGIES)}")
        check_candidate_set(self.candidates)
        context_warnings(self.model, self.context_length, self.strict_context)  # may refuse
        cluster_max = self.cluster.max_chips
        max_chips = cluster_max if self.max_chips is None else self.max_chips
        if isinstance(max_chips, bool) or not isinstance(max_chips, int) or max_chips < 1:
            raise UserInputError("max_chips", self.max_chips, "give a whole number >= 1")
        if max_chips > cluster_max:
            raise UserInputError("max_chips", max_chips,
                                 f"give at most {cluster_max}, the size of cluster "
                                 f"{self.cluster.name}, or pick a larger cluster")
        group = self.cluster.candidate_group_size if self.group_size is None \
            else self.group_size
        if isinstance(group, bool) or not isinstance(group, int) or group < 1:
            raise UserInputError("group_size", self.group_size, "give a whole number >= 1")
        f = self.cached_fraction
        if isinstance(f, bool) or not isinstance(f, int | float) or not 0 <= f < 1:
            raise UserInputError("cached_fraction", f, "give a fraction 0 <= F < 1 of the "
                                 "context that is cached, e.g. 0.9")
        if self.kv_handoff not in ("off", *HANDOFF_MODES):
            raise UserInputError("kv_handoff", self.kv_handoff,
                                 f"use one of off, {', '.join(HANDOFF_MODES)}")
        if self.verify_above < 0:
            raise UserInputError("verify_above", self.verify_above, "give a whole number >= 0")
        tiers = self.kv_tiers or tuple(default_kv_tiers(self.model))
        names: list[str | int] = []
        for tier in tiers:
            name, _ = resolve_kv_tier(self.model, tier)
            if name not in names:
                names.append(name)
        if self.objective not in OBJECTIVES:
            raise UserInputError("objective", self.objective,
                                 f"use one of {', '.join(OBJECTIVES)}")
        batch = self.batch
        if batch != AUTO and (isinstance(batch, bool) or not isinstance(batch, int)
                              or not 1 <= batch <= MAX_BATCH):
            raise UserInputError("batch", batch, f"give a whole number in [1, {MAX_BATCH:,}] "
                                 "or auto")
        if not 0 < self.memory_headroom <= 1:
            raise UserInputError("memory_headroom", self.memory_headroom,
                                 "give a fraction > 0 and <= 1, e.g. 0.9")
        for phase, tp in (("prefill", self.prefill_tp), ("decode", self.decode_tp)):
            if tp == AUTO:
                continue
            if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
                raise UserInputError(f"{phase}_tp", tp, "give a whole number >= 1 or auto")
            if tp > max_chips:
                raise UserInputError(f"{phase}_tp", tp,
                                     f"give at most max_chips = {max_chips} chips per rank")
        out = replace(self, kv_tiers=tuple(names), max_chips=max_chips, group_size=group)
        for phase, tp in (("prefill", self.prefill_tp), ("decode", self.decode_tp)):
            if tp != AUTO:
                out.eval_config(phase, names[0], 1, int(tp)).layout()  # validates tp, S now
        for phase in PHASES:
            out.eval_config(phase, names[0], 1, 1).layout()  # validates batch, S now
        return out

    # -- TP ----------------------------------------------------------------------------------

    def tp_fixed(self, phase: str) -> int | None:
        """The TP degree the user fixed for ``phase``; None when it is searched."""
        tp = self.prefill_tp if phase == "prefill" else self.decode_tp
        return None if tp == AUTO else int(tp)

    def tp_choices(self, phase: str) -> tuple[TPChoice, ...]:
        """The TP degrees the search may use: the fixed one, or (auto) every divisor of the
        cluster's innermost group (a TP group never straddles two boards / hosts) up to the
        cluster's ``tp_max`` (an NVL72 rack would otherwise offer 72) and ``max_chips``,
        excluding those the layout refuses (heads, KV heads), with the reason."""
        fixed = self.tp_fixed(phase)
        if fixed is not None:
            return (TPChoice(fixed),)
        assert self.max_chips is not None, "call validated() first"
        group = self.cluster.levels[0].chips_per_group
        out = []
        for tp in range(1, min(group, self.cluster.tp_max) + 1):
            if group % tp:
                continue
            if tp > self.max_chips:
                out.append(TPChoice(tp, f"more chips than max_chips = {self.max_chips}"))
                continue
            try:
                self.eval_config(phase, self.kv_tiers[0], 1, tp).layout()
            except UserInputError as exc:
                out.append(TPChoice(tp, exc.fix))
                continue
            out.append(TPChoice(tp))
        return tuple(out)

    @property
    def cached_tokens(self) -> int:
        """The prefill's cached prefix: floor(F * S), leaving at least one new token."""
        return min(math.floor(self.cached_fraction * self.context_length),
                   self.context_length - 1)

    # -- batch -------------------------------------------------------------------------------

    @property
    def batch_auto(self) -> bool:
        return self.batch == AUTO

    @property
    def base_batch(self) -> int:
        """The batch pools are sized at: 1 under --batch auto (prefill stays one sequence, the
        decode pool is chosen at 1 and then filled), else the fixed batch."""
        return 1 if self.batch == AUTO else int(self.batch)

    # -- points ------------------------------------------------------------------------------

    def bound_n(self, phase: str, tp: int) -> int:
        assert self.max_chips is not None, "call validated() first"
        return self.max_chips // tp

    def eval_config(self, phase: str, tier: str | int, n: int, tp: int,
                    batch: int | None = None) -> EvalConfig:
        prefill = phase == "prefill"
        return EvalConfig(model=self.model, chip=self.chip, cluster=self.cluster, phase=phase,
                          context_length=self.context_length, cp=n, tp=tp,
                          batch=self.base_batch if batch is None else batch,
                          kv_tier=tier, event_limit=self.event_limit,
                          pass_q=self.pass_q if phase == "decode" else "broadcast",
                          precision=self.precision, periodic_shortcut=self.periodic_shortcut,
                          memory_headroom=self.memory_headroom,
                          cached=self.cached_tokens if prefill else 0,
                          prefill_ring=self.prefill_ring if prefill else "pass-kv")

    def pair_config(self, tier: str | int, n_prefill: int, tp_prefill: int, n_decode: int,
                    tp_decode: int) -> EvalConfig:
        """The prefill pool with its KV handoff to the decode pool (solve/handoff.py): the
        prefill as the pool was sized (cached prefix and ring included)."""
        return replace(self.eval_config("prefill", tier, n_prefill, tp_prefill),
                       handoff_to=n_decode, handoff_tp=tp_decode, kv_handoff=self.kv_handoff)
