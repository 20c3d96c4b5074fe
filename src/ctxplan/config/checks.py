"""The checks at the edge: a layout and its policy, one point, one search.

Every user mistake in what an evaluation or a search is asked is found here, once, as one
``UserInputError`` naming the field, the value and the fix; the API calls these before it hands
frozen ``EvalConfig`` / ``SolveRequest`` objects inward, and the inner layers trust them
(assertions for bugs only). Single values typed in files or flags are checked by
:mod:`ctxplan.config.values`; what needs the model, the chip or the cluster is checked here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxplan.config.options import CANDIDATE_SET_NAMES, OBJECTIVE_NAMES, STRATEGY_NAMES
from ctxplan.config.prices import Prices, price_of
from ctxplan.config.values import AUTO, MAX_BATCH, MAX_CONTEXT
from ctxplan.errors import UserInputError, did_you_mean
from ctxplan.evaluate import EvalConfig
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.model.dtypes import WEIGHT_DTYPES, matmul_dtype, matmul_dtype_preference
from ctxplan.model.kv import default_kv_tiers, resolve_kv_tier
from ctxplan.model.precision import Precision
from ctxplan.model.spec import ModelSpec
from ctxplan.policy import (
    HANDOFF_MODES,
    KV_HANDOFF_CHOICES,
    MLA_MODES,
    MOE_PARALLEL_CHOICES,
    PASS_Q_PATTERNS,
    PREFILL_RING_CHOICES,
    Policy,
)

PHASES = ("prefill", "decode")


# -- a point --------------------------------------------------------------------------------


def check_point(cfg: EvalConfig) -> EvalConfig:
    """Every field of one evaluation (its layout, its policy, its handoff); returns it."""
    cfg.kv()   # the KV tier names one of the model's (or is a whole number of bytes)
    check_precision(cfg.resolved_precision(), cfg.chip)
    check_choice("prefill_ring", cfg.policy.prefill_ring, PREFILL_RING_CHOICES)
    check_choice("moe_parallel", cfg.policy.moe_parallel, MOE_PARALLEL_CHOICES)
    if cfg.policy.mtp_speculation and not cfg.model.mtp_layer_types:
        raise UserInputError("mtp_speculation", True, "drop it",
                             f"{cfg.model.name} carries no MTP layer to draft with (only "
                             "DeepSeek-V4's are modelled)")
    check_pool(cfg.model, phase=cfg.phase, cp=cfg.cp, tp=cfg.tp, batch=cfg.batch,
               context_length=cfg.context_length, max_chips=cfg.cluster.max_chips, pp=cfg.pp,
               dp=cfg.dp)
    check_mla_mode(cfg.model, cfg.policy.mla_mode)
    check_choice("pass_q", cfg.policy.pass_q, PASS_Q_PATTERNS)
    check_cached(cfg.phase, cfg.cached, cfg.context_length)
    if cfg.handoff_to is not None:
        check_handoff(cfg)
    else:
        for name in ("handoff_chip", "handoff_cluster", "handoff_link_gbps"):
            value = getattr(cfg, name)
            if value is not None:
                raise UserInputError(name, getattr(value, "name", value),
                                     "drop it, or give the decode pool it is for "
                                     "(--handoff-to)")
    return cfg


def check_choice(field: str, value: object, choices: tuple[str, ...], how: str = "", *,
                 hint: bool = False) -> None:
    """``value`` is one of ``choices`` (``hint``: the fix starts with the closest one)."""
    if value not in choices:
        near = did_you_mean(value, choices) if hint else ""
        raise UserInputError(field, value, f"{near}use one of {', '.join(choices)}{how}")


def tp_problem(m: ModelSpec, tp: int) -> str | None:
    """Why a TP degree cannot split the model's attention (the fix), or None."""
    heads = m.num_attention_heads
    if heads % tp:
        return f"tp must divide the model's {heads} attention heads"
    spec = m.compressed_attention
    if spec is not None and spec.o_groups % tp:
        # a TP chip's heads are whole groups of the grouped output projection (wo_a)
        return (f"tp must divide the {spec.o_groups} groups of {m.name}'s grouped output "
                "projection (a TP chip holds whole groups)")
    if m.mla is None:
        kvh = m.num_key_value_heads
        if tp > kvh and tp % kvh:
            return f"tp above the {kvh} KV heads must be a multiple of it"
    return None


def check_pool(m: ModelSpec, *, phase: str, cp: int, tp: int, batch: int, context_length: int,
               max_chips: int, pp: int = 1, pp_field: str = "pp",
               cp_field: str = "cp", dp: int = 1, dp_field: str = "dp") -> None:
    """A pool's shape against the model and the cluster (``cp_field`` / ``pp_field`` /
    ``dp_field``: the option that gave cp / pp / dp, named in the errors)."""
    if phase not in PHASES:
        raise UserInputError("phase", phase, "use 'prefill' or 'decode'")
    for field, value in ((cp_field, cp), ("tp", tp), (pp_field, pp), (dp_field, dp),
                         ("batch", batch), ("context_length", context_length)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserInputError(field, value, f"give {field} as a whole number >= 1")
    if context_length > MAX_CONTEXT:
        raise UserInputError("context_length", context_length,
                             "give a context length of at most 2G tokens (2^31)")
    if batch > MAX_BATCH:
        raise UserInputError("batch", batch, "give a batch of at most 1,048,576 sequences")
    problem = tp_problem(m, tp)
    if problem is not None:
        raise UserInputError("tp", tp, problem)
    if pp > m.num_hidden_layers:
        raise UserInputError(pp_field, pp, f"give at most {m.num_hidden_layers} stages, one "
                             f"per layer of {m.name} at the most")
    check_dp(phase, dp, batch, pp, dp_field)
    if pp * dp * cp * tp > max_chips:
        what = "*".join(n for n, v in (("pp", pp), ("dp", dp)) if v > 1)
        what = f"{what} * cp * tp" if what else "cp * tp"
        more = "".join(f" or {n}" for n, v in (("pp", pp), ("dp", dp)) if v > 1)
        raise UserInputError(
            cp_field, cp,
            f"{what.replace('*', ' * ')} = {pp * dp * cp * tp} chips exceeds the cluster's "
            f"{max_chips}; lower cp or tp{more}, or pick a larger cluster",
        )


def check_dp(phase: str, dp: int, batch: int, pp: int = 1, dp_field: str = "dp") -> None:
    """DP attention (issue 25 item 1): every DP rank with a sequence, no pipeline stages with
    it (not modelled: docs/spec-deviations.md)."""
    if dp == 1:
        return
    if dp > batch:
        raise UserInputError(dp_field, dp, f"give a dp of at most the batch ({batch}), or a "
                             "larger batch", "each DP rank holds whole sequences, at least one")
    if pp > 1:
        raise UserInputError(dp_field, dp, "use dp 1 with pipeline stages, or pp 1",
                             "DP attention inside pipeline stages is not modelled")


def check_mla_mode(m: ModelSpec, mla_mode: str | None) -> None:
    if m.mla is not None:
        if mla_mode and mla_mode not in MLA_MODES:
            raise UserInputError("mla_mode", mla_mode, "use 'standard' or 'absorbed'")
        if m.dsa is not None and mla_mode and mla_mode != "absorbed":
            raise UserInputError(
                "mla_mode", mla_mode, "drop it or use 'absorbed'",
                f"{m.name} runs DSA, whose selected latents every query head shares: MLA "
                "absorbed, as DeepSeek implements it")
    elif mla_mode:
        raise UserInputError("mla_mode", mla_mode, f"model {m.name} has no MLA; drop it")


def check_cached(phase: str, cached: int, context_length: int) -> None:
    """A cached prefix is a prefill notion and leaves at least one new token."""
    if isinstance(cached, bool) or not isinstance(cached, int) or cached < 0:
        raise UserInputError("cached", cached, "give the cached prefix as a whole number of "
                             "tokens >= 0")
    if cached and phase != "prefill":
        raise UserInputError("cached", cached, "drop it: a decode step's whole context is "
                             "cached already; --cached sizes a prefill")
    if cached >= context_length:
        raise UserInputError("cached", cached,
                             f"give fewer than the context's {context_length:,} tokens: a "
                             "prefill computes at least one new token")


def check_precision(p: Precision, chip: Chip) -> None:
    """Every weight dtype must be a known storage dtype the chip can run a matmul for (at its
    own peak or, for packed formats, one it dequantises to), and the attention dtype a peak."""
    known = ", ".join(sorted(chip.peak_flops_per_s))
    for field_name in ("attention_weights", "ffn_weights"):
        dtype = getattr(p, field_name)
        if dtype not in WEIGHT_DTYPES:
            raise UserInputError(field_name, dtype, f"{did_you_mean(dtype, WEIGHT_DTYPES)}use "
                                 f"one of {', '.join(WEIGHT_DTYPES)}", "unknown weight dtype")
        if matmul_dtype(dtype, chip.peak_flops_per_s) is None:
            runs_at = " or ".join(matmul_dtype_preference(dtype))
            raise UserInputError(
                field_name, dtype,
                f"chip {chip.name} has peaks for {known}: store the weights in one of them "
                f"(weights stored in {dtype} run their matmuls at {runs_at})",
                "no peak FLOP/s for this dtype")
    if p.attention not in chip.peak_flops_per_s:
        raise UserInputError("attention", p.attention,
                             f"chip {chip.name} has peaks for {known}: use one of them",
                             "no peak FLOP/s for this dtype")


def check_handoff(cfg: EvalConfig) -> None:
    """The decode pool a prefill hands its KV to: a prefill's, with a mode, on one cluster."""
    if cfg.phase != "prefill":
        raise UserInputError("handoff_to", cfg.handoff_to, "drop it, or evaluate the "
                             "prefill phase: the handoff moves prefill's KV to decode")
    check_choice("kv_handoff", cfg.policy.kv_handoff, HANDOFF_MODES, " with --handoff-to")
    assert cfg.handoff_to is not None
    check_pool(cfg.model, phase="decode", cp=cfg.handoff_to, tp=cfg.handoff_tp,
               batch=cfg.batch, context_length=cfg.context_length,
               max_chips=(cfg.handoff_cluster or cfg.cluster).max_chips, pp=cfg.handoff_pp,
               pp_field="handoff_pp", cp_field="handoff_to", dp=cfg.handoff_dp,
               dp_field="handoff_dp")
    pools = cfg.pp * cfg.cp * cfg.tp, \
        cfg.handoff_pp * cfg.handoff_dp * cfg.handoff_to * cfg.handoff_tp
    if cfg.handoff_cluster is not None:   # each pool on its own cluster
        if pools[1] > cfg.handoff_cluster.max_chips:
            raise UserInputError(
                "handoff_to", cfg.handoff_to,
                f"the decode pool takes {pools[1]} chips and its cluster "
                f"{cfg.handoff_cluster.name} has {cfg.handoff_cluster.max_chips}: pick a "
                "smaller pool or a larger cluster")
        return
    if cfg.handoff_link_gbps is not None:
        raise UserInputError(
            "handoff_link_gbps", cfg.handoff_link_gbps,
            "drop it, or give the decode pool another cluster (--handoff-cluster, or a "
            "--handoff-chip of another cluster): it is the fabric joining two clusters")
    colocate = cfg.policy.colocate_pools
    start = cfg.cluster.decode_start(pools[0], colocate)
    if start + pools[1] > cfg.cluster.max_chips:
        where = "" if colocate or start == pools[0] else (
            f", the decode pool from chip {start} on (the next host; --colocate-pools packs "
            "it right after the prefill pool)")
        raise UserInputError(
            "handoff_to", cfg.handoff_to,
            f"the two pools take {pools[0]} + {pools[1]} chips{where} and "
            f"cluster {cfg.cluster.name} has {cfg.cluster.max_chips}: pick smaller pools "
            "or a larger cluster (the handoff needs both pools on one cluster's links)")


def check_objective(objective: str, chip: Chip, prices: Prices) -> None:
    """``cost`` needs a price for the chip, ``power`` its TDP (solve/economics.py)."""
    if objective == "cost" and price_of(prices, chip.name) is None:
        given = f" (prices given for {', '.join(n for n, _ in prices)})" if prices else ""
        raise UserInputError("prices", [n for n, _ in prices] or None,
                             f"give --price {chip.name}=PRICE/h, the price of a chip-hour, "
                             f"for --objective cost{given}; ctxplan has no built-in prices",
                             f"no price for chip {chip.name}")
    if objective == "power" and chip.tdp_w is None:
        raise UserInputError("tdp_w", None, f"add tdp_w (watts) to chip {chip.name}'s file "
                             "for --objective power, or choose another objective",
                             f"chip {chip.name} states no TDP")


# -- a search -------------------------------------------------------------------------------


def check_search(m: ModelSpec, cluster: Cluster, policy: Policy,
                 o: Mapping[str, Any]) -> dict[str, Any]:
    """A solve's own options ``o`` (strategy, candidates, bounds, batch, TP, objective, tiers,
    the cached fraction) with the defaults the cluster and the model give filled in
    (``max_chips``, ``group_size``, ``kv_tiers`` as the tiers' names); the policy's handoff
    mode may be ``off`` here."""
    check_choice("strategy", o["strategy"], STRATEGY_NAMES, hint=True)
    check_choice("candidates", o["candidates"], CANDIDATE_SET_NAMES, hint=True)
    cluster_max = cluster.max_chips
    max_chips = cluster_max if o["max_chips"] is None else o["max_chips"]
    if isinstance(max_chips, bool) or not isinstance(max_chips, int) or max_chips < 1:
        raise UserInputError("max_chips", o["max_chips"], "give a whole number >= 1")
    if max_chips > cluster_max:
        raise UserInputError("max_chips", max_chips,
                             f"give at most {cluster_max}, the size of cluster "
                             f"{cluster.name}, or pick a larger cluster")
    group = cluster.candidate_group_size if o["group_size"] is None else o["group_size"]
    if isinstance(group, bool) or not isinstance(group, int) or group < 1:
        raise UserInputError("group_size", o["group_size"], "give a whole number >= 1")
    f = o["cached_fraction"]
    if isinstance(f, bool) or not isinstance(f, int | float) or not 0 <= f < 1:
        raise UserInputError("cached_fraction", f, "give a fraction 0 <= F < 1 of the "
                             "context that is cached, e.g. 0.9")
    check_choice("kv_handoff", policy.kv_handoff, KV_HANDOFF_CHOICES)
    names: list[str | int] = []
    for tier in o["kv_tiers"] or default_kv_tiers(m):
        name, _ = resolve_kv_tier(m, tier)
        if name not in names:
            names.append(name)
    check_choice("objective", o["objective"], OBJECTIVE_NAMES)
    batch = o["batch"]
    if batch != AUTO and (isinstance(batch, bool) or not isinstance(batch, int)
                          or not 1 <= batch <= MAX_BATCH):
        raise UserInputError("batch", batch, f"give a whole number in [1, {MAX_BATCH:,}] "
                             "or auto")
    for phase in PHASES:
        tp = o[f"{phase}_tp"]
        if tp == AUTO:
            continue
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise UserInputError(f"{phase}_tp", tp, "give a whole number >= 1 or auto")
        if tp > max_chips:
            raise UserInputError(f"{phase}_tp", tp,
                                 f"give at most max_chips = {max_chips} chips per rank")
    for name in ("prefill_dp", "decode_dp"):
        dp = o.get(name, AUTO)
        if dp == AUTO:
            continue
        if isinstance(dp, bool) or not isinstance(dp, int) or dp < 1:
            raise UserInputError(name, dp, "give a whole number >= 1 or auto")
        if dp > max_chips:
            raise UserInputError(name, dp, f"give at most max_chips = {max_chips} DP ranks")
    dp = o.get("decode_dp", AUTO)
    if dp != AUTO and batch != AUTO and dp > batch:
        raise UserInputError("decode_dp", dp, f"give a dp of at most the batch ({batch}), "
                             "or a larger --batch", "each DP rank holds whole sequences")
    for phase in PHASES:
        pp = o.get(f"{phase}_pp", AUTO)
        if pp == AUTO:
            continue
        if isinstance(pp, bool) or not isinstance(pp, int) or pp < 1:
            raise UserInputError(f"{phase}_pp", pp, "give a whole number >= 1 or auto")
        if pp > m.num_hidden_layers:
            raise UserInputError(f"{phase}_pp", pp, f"give at most {m.num_hidden_layers} "
                                 f"stages, one per layer of {m.name} at the most")
        tp = o[f"{phase}_tp"]
        if pp * (1 if tp == AUTO else tp) > max_chips:
            raise UserInputError(f"{phase}_pp", pp, f"give at most max_chips = {max_chips} "
                                 "chips per CP rank in all (pp x tp)")
    return {**o, "max_chips": max_chips, "group_size": group, "kv_tiers": tuple(names)}
