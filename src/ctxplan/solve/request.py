"""A solve's inputs (checked once at the edge: ``ctxplan.config.checks.check_search``), and how
they turn into single-point configurations."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ctxplan.config.checks import tp_problem
from ctxplan.config.prices import Prices, price_of
from ctxplan.evaluate import EvalConfig
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.model.kv import default_kv_tiers, resolve_kv_tier
from ctxplan.model.spec import ModelSpec
from ctxplan.policy import Policy
from ctxplan.solve.sla import SLA

AUTO = "auto"
# The deepest pipeline ``--prefill-pp`` / ``--decode-pp auto`` searches: the deepest engines
# deploy (SGLang's PP8 x TP4 for long-context Qwen3-235B); a deeper one is simulated when asked
# for by number. A pipelined prefill is 4 x PP chunks through PP stages, so its graph's build
# grows as PP^2 (docs/solver.md, "Pipeline stages per pool").
PP_SEARCH_MAX = 8
DP_SEARCH_MAX = 8     # decode DP attention ranks searched: 1, 2, 4, 8 (SGLang runs DP 8 x EP)
# The objectives that rank plans per decode token (TierPlan.rank).
PER_TOKEN_OBJECTIVES = ("tokens-per-chip", "cost", "power")


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
    # "auto": searched over pp_choices(). Prefill 1 by default (docs/spec-deviations.md: its
    # search costs a solve several times its time, for no answer it changed where measured);
    # decode auto (a batch-1 decode graph is small, and stages that each hold only their
    # layers' weights can take fewer chips than CP ranks that each hold every attention layer)
    prefill_pp: int | str = 1
    decode_pp: int | str = AUTO
    # Decode DP attention ranks (issue 25 item 1): "auto" searches dp_choices() where a batch
    # is served (pareto, capacity); the single-request solve sizes its pool at dp 1
    # (docs/solver.md, "DP attention").
    decode_dp: int | str = AUTO
    # Prefill DP attention ranks: "auto" searches dp_choices() where several requests are
    # prefilled at once (capacity's prefill instances); a single request's prefill is DP 1.
    prefill_dp: int | str = AUTO
    solve_dp: int = 1       # the DP degree the decode points are built at (set by the search)
    objective: str = "chips"               # "chips" | "tokens-per-chip" | "cost" | "power"
    prices: Prices = ()                    # (chip, price per chip-hour): the user's, none built in
    verify_above: int = 2                  # galloping's check: candidates above N* that must pass
    cached_fraction: float = 0.0           # prefill: fraction of the context cached (hit rate)
    # How every point executes; its kv_handoff may be "off" here (no pair check:
    # solve/handoff.py).
    policy: Policy = field(default_factory=Policy)
    # The decode pool on a chip and / or cluster of its own (--decode-chip / --decode-cluster,
    # issue 25 item 3; None: the prefill's ``chip`` / ``cluster``), and its bound in chips
    # (``max_chips`` held to its cluster; filled in by validated()).
    decode_chip: Chip | None = None
    decode_cluster: Cluster | None = None
    decode_max_chips: int | None = None

    # -- each pool's system --------------------------------------------------------------

    def pool_chip(self, phase: str) -> Chip:
        return self.decode_chip or self.chip if phase == "decode" else self.chip

    def pool_cluster(self, phase: str) -> Cluster:
        return self.decode_cluster or self.cluster if phase == "decode" else self.cluster

    def pool_max_chips(self, phase: str) -> int:
        """The most chips a pool of ``phase`` may take (call validated() first)."""
        bound = self.decode_max_chips if phase == "decode" else self.max_chips
        assert bound is not None, "call validated() first"
        return bound

    @property
    def mixed(self) -> bool:
        """The decode pool on another chip or cluster than the prefill's."""
        return self.decode_chip is not None or self.decode_cluster is not None

    def validated(self) -> SolveRequest:
        """Defaults filled in: the cluster's size and innermost group, the model's default KV
        tiers, each tier by its name once (the values were checked at the edge)."""
        names: list[str | int] = []
        for tier in self.kv_tiers or tuple(default_kv_tiers(self.model)):
            name, _ = resolve_kv_tier(self.model, tier)
            if name not in names:
                names.append(name)
        # --objective tokens-per-chip re-chooses the decode pool by its TP and N
        # (solve/objective.py), at one pipeline stage: a searched decode PP is fixed to 1 there.
        decode_pp = 1 if self.per_token_objective and self.decode_pp == AUTO \
            else self.decode_pp
        max_chips = self.max_chips or self.cluster.max_chips
        decode_cluster = self.pool_cluster("decode")
        decode_max = self.decode_max_chips or min(max_chips, decode_cluster.max_chips)
        return replace(self, kv_tiers=tuple(names), decode_pp=decode_pp,
                       max_chips=max_chips, decode_max_chips=decode_max,
                       group_size=self.group_size or self.cluster.candidate_group_size)

    @property
    def per_token_objective(self) -> bool:
        """The objective ranks plans per decode token (tokens/s per chip, cost or energy per
        token) rather than by their chips: the decode pool is re-chosen for it
        (solve/objective.py). With one chip for both pools the three rank plans alike:
        cost and power per token are chips x (price or TDP) over tokens/s."""
        return self.objective in PER_TOKEN_OBJECTIVES

    @property
    def price_per_chip_hour(self) -> float | None:
        """The price given for this request's chip; None when none was."""
        return price_of(self.prices, self.chip.name)

    @property
    def decode_price_per_chip_hour(self) -> float | None:
        """The price given for the decode pool's chip; None when none was."""
        return price_of(self.prices, self.pool_chip("decode").name)

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
        cluster, bound = self.pool_cluster(phase), self.pool_max_chips(phase)
        group = cluster.levels[0].chips_per_group
        out = []
        for tp in range(1, min(group, cluster.tp_max) + 1):
            if group % tp:
                continue
            if tp > bound:
                out.append(TPChoice(tp, f"more chips than max_chips = {bound}"))
                continue
            out.append(TPChoice(tp, tp_problem(self.model, tp) or ""))
        return tuple(out)

    # -- PP ----------------------------------------------------------------------------------

    def pp_fixed(self, phase: str) -> int | None:
        """The pipeline stages the user fixed for ``phase``; None when they are searched."""
        pp = self.prefill_pp if phase == "prefill" else self.decode_pp
        return None if pp == AUTO else int(pp)

    def pp_choices(self, phase: str) -> tuple[int, ...]:
        """The pipeline depths the search may use: the fixed one, or (auto) 1 and the powers of
        two up to the cap: the model's layers (a stage holds one at least) and the cluster's
        hosts in ``max_chips`` (engines put each stage on hosts of its own), and
        :data:`PP_SEARCH_MAX` (docs/solver.md, "Pipeline stages per pool")."""
        fixed = self.pp_fixed(phase)
        if fixed is not None:
            return (fixed,)
        hosts = max(1, self.pool_max_chips(phase)
                    // self.pool_cluster(phase).levels[0].chips_per_group)
        cap = min(self.model.num_hidden_layers, hosts, PP_SEARCH_MAX)
        out, pp = [], 1
        while pp <= cap:
            out.append(pp)
            pp *= 2
        return tuple(out)

    # -- DP ----------------------------------------------------------------------------------

    def dp_at(self, phase: str) -> int:
        """The DP degree a point of ``phase`` is built at: the decode pool's ``solve_dp`` (the
        solve fixes it per DP degree it searches, :func:`ctxplan.solve.phase.solve_pool`),
        1 for prefill."""
        return self.solve_dp if phase == "decode" else 1

    def with_dp(self, dp: int) -> SolveRequest:
        """This request with the decode pool's points built at ``dp`` DP ranks."""
        return replace(self, solve_dp=dp)

    def dp_choices(self, batch: int, chips_per_rank: int = 1, phase: str = "decode"
                   ) -> tuple[int, ...]:
        """The DP degrees a search of ``phase``'s pool may use for ``batch`` sequences: the
        fixed one (if the batch gives each DP rank a sequence), or (auto) 1 and the powers of
        two up to :data:`DP_SEARCH_MAX`, the batch, and the pool's bound in
        ``chips_per_rank`` (a DP rank's CP x TP chips at the least)."""
        asked = self.decode_dp if phase == "decode" else self.prefill_dp
        if asked != AUTO:
            dp = int(asked)
            return (dp,) if dp <= batch else ()
        cap = min(DP_SEARCH_MAX, batch, self.pool_max_chips(phase) // chips_per_rank)
        out, dp = [], 1
        while dp <= max(cap, 1):
            out.append(dp)
            dp *= 2
        return tuple(out)

    def with_pp(self, prefill_pp: int, decode_pp: int) -> SolveRequest:
        """This request with each pool's pipeline depth fixed (a chosen plan's)."""
        return replace(self, prefill_pp=prefill_pp, decode_pp=decode_pp)

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
        """The most CP ranks a pool of ``tp`` chips per rank (and the phase's fixed pipeline
        depth and DP degree) may have."""
        return self.pool_max_chips(phase) // (tp * (self.pp_fixed(phase) or 1)
                                              * self.dp_at(phase))

    def eval_config(self, phase: str, tier: str | int, n: int, tp: int,
                    batch: int | None = None, dp: int | None = None) -> EvalConfig:
        """The point of ``phase`` at N = ``n`` CP ranks of ``tp`` chips (decode: in each of
        ``dp`` DP ranks), in the phase's fixed pipeline depth (1 while it is searched:
        :func:`ctxplan.solve.phase.solve_pool` fixes it per depth)."""
        prefill = phase == "prefill"
        return EvalConfig(model=self.model, chip=self.pool_chip(phase),
                          cluster=self.pool_cluster(phase), phase=phase,
                          context_length=self.context_length, cp=n, tp=tp,
                          batch=self.base_batch if batch is None else batch,
                          kv_tier=tier, cached=self.cached_tokens if prefill else 0,
                          policy=self.policy.for_phase(phase), pp=self.pp_fixed(phase) or 1,
                          dp=self.dp_at(phase) if dp is None else dp)

    def pair_config(self, tier: str | int, n_prefill: int, tp_prefill: int, n_decode: int,
                    tp_decode: int, prefill_dp: int = 1) -> EvalConfig:
        """The prefill pool with its KV handoff to the decode pool (solve/handoff.py): the
        prefill as the pool was sized (cached prefix and ring included); a decode pool of DP
        ranks (``solve_dp``) receives each sequence on its own DP rank (one prefilled request,
        under ``--batch auto``, on the first). ``prefill_dp`` > 1 (capacity's DP prefill
        instance): one request per prefill DP rank, each handed to a decode group of its own
        (n_decode x tp_decode chips: a decode DP rank, or an instance)."""
        if prefill_dp > 1:
            return replace(self.eval_config("prefill", tier, n_prefill, tp_prefill, prefill_dp,
                                            dp=prefill_dp),
                           handoff_to=n_decode, handoff_dp=prefill_dp, handoff_tp=tp_decode,
                           handoff_pp=self.pp_fixed("decode") or 1,
                           handoff_chip=self.decode_chip, handoff_cluster=self.decode_cluster)
        return replace(self.eval_config("prefill", tier, n_prefill, tp_prefill),
                       handoff_to=n_decode, handoff_dp=min(self.solve_dp, self.base_batch),
                       handoff_tp=tp_decode,
                       handoff_pp=self.pp_fixed("decode") or 1, handoff_chip=self.decode_chip,
                       handoff_cluster=self.decode_cluster)
