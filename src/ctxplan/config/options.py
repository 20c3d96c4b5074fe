"""Every user-facing option, declared once: its type, default, unit and help.

An option is a field of one of the ``TypedDict`` groups below, annotated with an :class:`Opt`.
Everything else is derived from that one declaration:

* the Python API: ``api.evaluate(..., **options: Unpack[EvalOptions])`` (static type checkers and
  IDEs read the TypedDict; :func:`with_options` gives the function a runtime signature with every
  default, so ``help(api.evaluate)`` and IPython show them, and a docstring entry per option);
* the command line: ``ctxplan.cli.options`` turns each option into a typer option (flag, type,
  default, ``unit`` as the metavar, help);
* study and point files: ``ctxplan.config.study_schema`` builds their pydantic schemas (and so
  ``ctxplan schema``'s JSON Schema) from the options' file types, defaults and help;
* the flag-to-field mapping: a flag typed next to ``--config`` overrides the file field
  :attr:`Declared.file_path`.

Adding an option: one field in the group it belongs to (SimOptions: every simulation, eval and
solve alike; EvalOptions: one point; SolveOptions: a search), its value check (``check``, from
:mod:`ctxplan.config.values`: files and the API refuse a bad value with the same words), one
field of :class:`ctxplan.policy.Policy` if it says how a layout executes (the API gathers every
option named like a policy field into the policy; any other option goes to the EvalConfig /
SolveRequest field of the same name), and the code that uses it. docs/architecture.md shows an
example.

The subjects (model, chip, context(s), phase, cp) are declared here too, in :data:`SUBJECTS`:
they are positional in the API and required on the command line unless a file gives them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Annotated, Any, Literal, TypedDict, TypeVar, get_args, get_origin, get_type_hints

from annotated_types import Ge, Gt, Le, Lt  # constraints pydantic reads; cheaper to import than it

from ctxplan.config import values
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.policy import (
    KV_HANDOFF_CHOICES,
    MLA_MODES,
    MOE_PARALLEL_CHOICES,
    PASS_Q_PATTERNS,
    PREFILL_RING_CHOICES,
)

STRATEGY_NAMES = ("galloping", "linear", "scan")          # solve/search.py STRATEGIES (tested)
OBJECTIVE_NAMES = ("chips", "tokens-per-chip", "cost", "power")   # solve/result.py TierPlan.rank
CANDIDATE_SET_NAMES = ("all", "group", "pow2")           # solve/candidates.py (tested)
# Weight storage dtypes (ctxplan.model.dtypes.WEIGHT_DTYPES; tested): each runs its matmuls at
# the first of its matmul dtypes the chip has a peak for (MXFP4: FP4, else BF16).
DTYPE_NAMES = ("bf16", "fp16", "fp8", "fp8-block128", "mxfp4", "nvfp4", "int8", "int4", "fp32")

PosInt = Annotated[int, Ge(1)]
Definition = str | dict[str, Any]          # preset name, path, or inline mapping
Time = str                                 # "20ms", "1.5s": a time carries its unit
Auto = Literal["auto"]                     # searched by the solver
Batch = Annotated[int, Ge(1), Le(2**20)]
Tokens = int | str                         # 8192 or "8K"
ClusterLike = str | Cluster | None


@dataclass(frozen=True)
class Opt:
    """How one option is declared (see the module docstring)."""

    default: Any
    help: str
    unit: str = ""                 # the CLI metavar: the unit or form of the value
    flag: str | None = None        # CLI flag; None: --name-with-dashes
    file: str | None = None        # dotted field in study / point files; None: the name
    file_type: Any = None          # pydantic type in files; None: the API type
    check: Callable[[Any], Any] | None = None     # file value check / normaliser (ValueError)
    to_api: Callable[[Any], Any] | None = None    # file value -> API value
    required_in_file: bool = False  # files must give it (no default)
    choices: tuple[str, ...] = ()  # the allowed words (file type Literal, CLI metavar)
    cli_default: Any = ...         # the CLI's default when it differs from the API's
    deprecated: bool = False       # accepted and ignored (the help says so): never passed on
    aliases: tuple[str, ...] = ()  # further CLI flags for the same option (--rate for --rates)
    # Further CLI flags accepted and not shown in --help: another spelling of the one documented
    # (--contexts for --context, on every command that takes context lengths).
    hidden_flags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.choices and not self.unit:   # the metavar of a choice lists the choices
            object.__setattr__(self, "unit", "|".join(self.choices))


@dataclass(frozen=True)
class Declared:
    """One option as its group declares it."""

    name: str
    api_type: Any
    opt: Opt

    @property
    def flag(self) -> str:
        return self.opt.flag or "--" + self.name.replace("_", "-")

    @property
    def file_path(self) -> str:
        return self.opt.file or self.name

    @property
    def default(self) -> Any:
        return self.opt.default

    @property
    def cli_default(self) -> Any:
        return self.opt.default if self.opt.cli_default is ... else self.opt.cli_default

    def file_type(self) -> Any:
        """The pydantic type of the file field."""
        o = self.opt
        if o.file_type is not None:
            return o.file_type
        if o.choices:
            choice: Any = Literal[o.choices]
            return choice | None if o.default is None and not o.required_in_file else choice
        return self.api_type

    def cli_type(self) -> Any:
        """The type typer parses the flag as: bool (a flag), int, float, a repeatable text (a
        list), or text for everything else (the API parses it)."""
        plain = {a for a in _union_args(self.api_type) if a is not type(None)}
        if any(get_origin(a) is list for a in plain):
            return list[str]
        if plain == {bool}:
            return bool
        if plain == {int}:
            return int
        if plain == {float}:
            return float
        return str


def _union_args(tp: Any) -> tuple[Any, ...]:
    if get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    args = get_args(tp)
    return args if args and get_origin(tp) is not Literal else (tp,)


# ------------------------------------------------------------------------------ the subjects
# Positional in the API; on the command line, required unless --config gives them.

# Every command spells its context option --context (one length, a list, or a mix with shares)
# and accepts --contexts as well.
CONTEXT_SPELLINGS = ("--contexts",)

SUBJECTS: dict[str, Declared] = {d.name: d for d in (
    Declared("model", str, Opt(
        None, "Model preset, model YAML or HF config.json.", unit="NAME|FILE",
        file_type=Definition, check=values.definition("model"), required_in_file=True)),
    Declared("chip", str, Opt(
        None, "Chip preset or chip YAML.", unit="NAME|FILE", file_type=Definition,
        check=values.definition("chip"), required_in_file=True)),
    Declared("context", str, Opt(
        None, "Context length S, e.g. 8K, 128K, 1M (several: ctxplan sweep).", unit="TOKENS",
        file_type=Tokens, check=values.tokens, required_in_file=True,
        hidden_flags=CONTEXT_SPELLINGS)),
    Declared("contexts", str, Opt(
        None, "Context lengths, e.g. 8K,32K,128K,512K,1M.", unit="TOKENS,...",
        file_type=Tokens | list[Tokens], check=values.contexts, required_in_file=True,
        flag="--context", hidden_flags=CONTEXT_SPELLINGS)),
    Declared("phase", str, Opt(
        None, "prefill (TTFT) or decode (TPOT).", unit="PHASE", choices=("prefill", "decode"),
        required_in_file=True)),
    Declared("cp", int, Opt(
        None, "CP degree: Np (prefill) or Nd (decode).", unit="N", file_type=PosInt,
        required_in_file=True)),
)}


# ------------------------------------------------------------------------------ the options


def _weights(part: str, example: str) -> Opt:
    """The weight storage dtype of one part of the model (its matmuls run at the chip's peak
    for it: docs/model.md, "Weight dtypes")."""
    return Opt(None, f"Storage dtype of {part} weights, e.g. {example} (default: the "
               "model's); matmuls run at the chip's peak for it.", unit="DTYPE",
               choices=DTYPE_NAMES)


def _pool_system(what: str, help_text: str) -> Opt:
    """A pool's own chip or cluster (``what``): a preset name, a path or an inline
    definition, None for the prefill's."""
    return Opt(None, help_text, unit="NAME|FILE", file_type=Definition | None,
               check=values.definition(what, optional=True))


class SimOptions(TypedDict, total=False):
    """Options of every simulation: eval, solve and sweep; point and study files."""

    cluster: Annotated[ClusterLike, Opt(
        None, "Cluster preset or YAML (default: the chip's).", unit="NAME|FILE",
        file_type=Definition | None, check=values.definition("cluster", optional=True))]
    event_limit: Annotated[int | None, Opt(
        None, "Stop any one simulation after this many events (default 200,000,000).",
        unit="EVENTS", file_type=PosInt | None, check=values.event_limit)]
    host_memory_budget: Annotated[int | str, Opt(
        "auto", "The simulator's own memory for one graph (not the chips'): a point whose "
        "graph is estimated above it is not built but reported as too large to simulate here "
        "(default auto: the lower of 2 GiB and half of this machine's memory); a sweep's "
        "worker processes share it.",
        unit="SIZE|auto", file_type=str, check=values.host_memory_budget)]
    pass_q: Annotated[str, Opt(
        "broadcast", "Decode, full-attention layers: how each query reaches the KV shards: "
        "'broadcast' from its home rank (default) or forwarded around a 'ring' of ranks "
        "(Meta's pass-Q). DSA layers always broadcast (their selection needs every shard).",
        choices=PASS_Q_PATTERNS)]
    prefill_ring: Annotated[str, Opt(
        "pass-kv", "Prefill: move KV blocks around the CP ring (pass-kv, default), or, for "
        "full-attention layers, the new tokens' queries with their partial outputs sent home "
        "(pass-q: fewer bytes with a long cached prefix), or, for DeepSeek-V4's CSA / HCA "
        "layers, all-gather every rank's compressed entries (all-gather, as SGLang does), or "
        "simulate each that applies and keep the fastest (auto; Meta's heuristic is "
        "reported beside it).", unit="RING", choices=PREFILL_RING_CHOICES)]
    moe_parallel: Annotated[str, Opt(
        "ep", "MoE layers: experts spread over the pool with an all-to-all (ep, default), or "
        "'attention CP, MoE TP' (tp: the hidden states all-gathered over the pool, every "
        "expert split over its chips, reduce-scattered after; SGLang's way for "
        "DeepSeek-V4), or simulate both and keep the faster (auto).",
        choices=MOE_PARALLEL_CHOICES)]
    mtp_speculation: Annotated[bool, Opt(
        False, "Decode: speculative decoding with the model's MTP layers (DeepSeek-V4): each "
        "step verifies the drafts with the last token and drafts again; TPOT is the step "
        "over the tokens it yields on average (off by default).")]
    mtp_acceptance: Annotated[float, Opt(
        0.85, "With --mtp-speculation: the share of draft tokens accepted (default 0.85, the "
        "low end of the 85-90 % DeepSeek-V3's report gives for its MTP module).", unit="A",
        file_type=Annotated[float, Ge(0), Le(1)], check=values.acceptance)]
    attention_weights: Annotated[str | None, _weights(
        "the attention projections'", "bf16 or fp8")]
    ffn_weights: Annotated[str | None, _weights("the FFN / expert", "fp8 for row-wise FP8")]
    periodic_shortcut: Annotated[bool, Opt(
        False, "Simulate the first layers only and extrapolate the rest once the schedule "
        "repeats exactly (faster; off by default: every layer is simulated).")]
    kv_handoff: Annotated[str, Opt(
        "streamed", "How the KV cache moves from the prefill pool to the decode pool: "
        "'streamed' layer by layer as prefill proceeds (default), 'after' the last layer, or "
        "'off' (not simulated). TTFT includes the part not hidden behind "
        "prefill.", choices=KV_HANDOFF_CHOICES)]
    colocate_pools: Annotated[bool, Opt(
        False, "Pack the decode pool right after the prefill pool in one rank order, sharing "
        "a host where both fit (default: each pool on hosts of its own, as separate prefill "
        "and decode machines are, so the KV handoff crosses the fabric between hosts).")]
    memory_headroom: Annotated[float, Opt(
        1.0, "Usable fraction of each chip's memory after the reserve, e.g. 0.9 keeps 10 % "
        "free (default 1.0: all of it).", unit="F",
        file_type=Annotated[float, Gt(0), Le(1)], check=values.fraction)]
    prefill_chunk: Annotated[Tokens, Opt(
        "auto", "Prefill: the prompt in chunks of SIZE tokens, one forward pass each, as "
        "SGLang and vLLM run long prompts (e.g. 16K); 'off' for one pass over the whole "
        "prompt; 'auto' (default): one pass when it fits by the simulated memory peak, else "
        "the cluster's prefill_chunk_tokens (raised to 2K tokens per CP rank), halved until "
        "it fits.", unit="SIZE|auto|off", check=values.prefill_chunk)]
    strict_context: Annotated[bool, Opt(
        False, "A context above the model's trained length (max_position_embeddings, or "
        "rope_scaling's factor x original length) is an error (exit 2) instead of a warning.")]


class EvalOptions(SimOptions, total=False):
    """Options of one point (``eval``, point files)."""

    tp: Annotated[int, Opt(1, "Chips per CP rank (tensor parallel).", unit="N",
                           file_type=PosInt)]
    pp: Annotated[int, Opt(
        1, "Pipeline stages (the pool is PP x CP x TP chips, each stage a contiguous range "
        "of layers); prefill chunks and decode micro-batches flow through them.", unit="N",
        file_type=PosInt)]
    dp: Annotated[int, Opt(
        1, "Decode: DP attention ranks (the pool is DP x CP x TP chips): the batch split over "
        "them, each sequence whole on its DP rank's CP group, the experts over every chip.",
        unit="N", file_type=PosInt)]
    batch: Annotated[int, Opt(1, "Sequences processed together.", unit="N", file_type=Batch)]
    kv_tier: Annotated[str | int | None, Opt(
        None, "KV tier name or bytes per token per layer (default: the model's first).",
        unit="TIER", file_type=str | int, check=values.tier, to_api=values.tier_or_default,
        required_in_file=True)]
    mla_mode: Annotated[str | None, Opt(
        None, "MLA: standard or absorbed (default: standard prefill, absorbed decode; DSA "
        "models absorbed in both).", unit="MODE", choices=MLA_MODES)]
    cached: Annotated[Tokens, Opt(
        0, "Prefill: tokens of the context whose KV is already cached (a multi-turn prefix "
        "P, e.g. 120K); the prefill computes the other S - P.", unit="TOKENS",
        check=values.cached_tokens)]
    handoff_to: Annotated[int | None, Opt(
        None, "Prefill: also simulate the KV handoff to a decode pool of this many CP ranks "
        "(Nd), on the hosts after the prefill pool's; TTFT then includes its unhidden part.",
        unit="ND", file_type=PosInt | None)]
    handoff_tp: Annotated[int, Opt(1, "Chips per CP rank of the decode pool of --handoff-to.",
                                   unit="N", file_type=PosInt)]
    handoff_pp: Annotated[int, Opt(1, "Pipeline stages of the decode pool of --handoff-to.",
                                   unit="N", file_type=PosInt)]
    handoff_dp: Annotated[int, Opt(
        1, "DP attention ranks of the decode pool of --handoff-to (each receives its own "
        "sequences of the batch).", unit="N", file_type=PosInt)]
    handoff_chip: Annotated[str | Chip | None, _pool_system(
        "chip", "Chip preset or YAML of the decode pool of --handoff-to (default: --chip's), "
        "e.g. h20-141 decoding what h20-96 prefilled.")]
    handoff_cluster: Annotated[ClusterLike, _pool_system(
        "cluster", "Cluster preset or YAML of the decode pool of --handoff-to (default: "
        "--handoff-chip's own cluster when that chip is another, else --cluster's). On "
        "another cluster the KV crosses the fabric joining the two.")]
    handoff_link_gbps: Annotated[float | None, Opt(
        None, "GB/s per chip per direction of the fabric joining the prefill's cluster to the "
        "decode pool's other cluster (default: the slower of the two clusters' outermost "
        "levels).", unit="GBPS", file_type=float | None, check=values.bandwidth_gbps)]
    full_simulation: Annotated[bool, Opt(
        False, "Deprecated, no effect: every layer is simulated unless --periodic-shortcut "
        "is given.", flag="--full-sim", deprecated=True)]


class SolveOptions(SimOptions, total=False):
    """Options of a search (``solve``, ``sweep``, study files)."""

    decode_chip: Annotated[str | Chip | None, _pool_system(
        "chip", "Chip preset or YAML of the decode pool (default: --chip's, which stays the "
        "prefill pool's), e.g. --chip h20-96 --decode-chip h20-141.")]
    decode_cluster: Annotated[ClusterLike, _pool_system(
        "cluster", "Cluster preset or YAML of the decode pool (default: --decode-chip's own "
        "cluster when it is another chip, else --cluster's); the KV handoff then crosses the "
        "fabric joining the two clusters.")]

    tpot_max: Annotated[str, Opt(
        "20ms", "TPOT SLA with its unit: 20ms means 50 tokens/s (see --tps-reading); a bare "
        "number is refused.", unit="TIME", file="sla.tpot_max", file_type=Time,
        check=values.time(optional=False, usual_unit="ms"))]
    ttft_max: Annotated[str | None, Opt(
        None, "TTFT SLA with its unit, e.g. 30s (default: not constrained, prefill takes its "
        "capacity minimum).", unit="TIME", file="sla.ttft_max", file_type=Time | None,
        check=values.time(optional=True, usual_unit="s"))]
    tps_reading: Annotated[str, Opt(
        "per-seq", "per-seq: TPOT <= tpot-max; per-batch: batch / TPOT >= 1 / tpot-max.",
        file="sla.tps_reading", choices=("per-seq", "per-batch"))]
    kv_tiers: Annotated[str | Sequence[str | int] | None, Opt(
        None, "KV tiers to compare, e.g. mla-bf16,mla-fp8 or bytes per token per layer "
        "(default: the model's).", unit="TIER,...",
        file_type=list[str | int] | Literal["default"], check=values.tiers,
        to_api=values.tiers_or_default, required_in_file=True)]
    strategy: Annotated[str, Opt(
        "galloping", "galloping (O(log N), default), linear (from the wall up) or scan (every "
        "candidate, to verify).", choices=STRATEGY_NAMES)]
    candidates: Annotated[str, Opt(
        "all", "Candidate N: all, group (whole groups of --group-size chips) or pow2.",
        choices=CANDIDATE_SET_NAMES)]
    group_size: Annotated[int | None, Opt(
        None, "Group size for --candidates group (default: the cluster's group_size, else its "
        "innermost group).",
        unit="N", file_type=PosInt | None)]
    max_chips: Annotated[int | None, Opt(
        None, "Upper bound on chips per pool (default: the cluster's size).", unit="N",
        file_type=PosInt | None)]
    prefill_tp: Annotated[int | str, Opt(
        "auto", "Chips per prefill CP rank (tensor parallel): a number fixes it, auto "
        "(default) searches the TP degrees the cluster's innermost group allows, up to its "
        "tp_max.",
        unit="N|auto", file_type=PosInt | Auto, check=values.tp_choice)]
    decode_tp: Annotated[int | str, Opt(
        "auto", "Chips per decode CP rank (tensor parallel): a number fixes it, auto "
        "(default) searches the TP degrees the cluster's innermost group allows, up to its "
        "tp_max.",
        unit="N|auto", file_type=PosInt | Auto, check=values.tp_choice)]
    prefill_pp: Annotated[int | str, Opt(
        1, "Pipeline stages of the prefill pool: a number fixes it (default 1); auto searches "
        "1 and the powers of two up to 8, the model's layers and the cluster's hosts.",
        unit="N|auto", file_type=PosInt | Auto, check=values.pp_choice)]
    decode_pp: Annotated[int | str, Opt(
        "auto", "Pipeline stages of the decode pool: a number fixes it; auto (default) "
        "searches 1 and the powers of two up to 8, the model's layers and the cluster's hosts "
        "(pareto and capacity: 1 unless a number is given).",
        unit="N|auto", file_type=PosInt | Auto, check=values.pp_choice)]
    decode_dp: Annotated[int | str, Opt(
        "auto", "DP attention ranks of the decode pool (each holds whole sequences, the "
        "experts over every chip): a number fixes it; auto (default) searches 1, 2, 4 and 8 "
        "where a batch is served (pareto, capacity); a single-request solve uses 1.",
        unit="N|auto", file_type=PosInt | Auto, check=values.dp_choice)]
    prefill_dp: Annotated[int | str, Opt(
        "auto", "DP attention ranks of a prefill instance where several requests are "
        "prefilled at once (capacity): a number fixes it; auto (default) searches 1, 2, 4 "
        "and 8; a single request's prefill (solve) uses 1.",
        unit="N|auto", file_type=PosInt | Auto, check=values.dp_choice)]
    cached_fraction: Annotated[float, Opt(
        0.0, "Prefill: the fraction of each context already cached (the hit rate, 0 <= F < "
        "1); the prefill pool is sized for the other 1 - F of the tokens.", unit="F",
        file_type=Annotated[float, Ge(0), Lt(1)])]
    batch: Annotated[int | str, Opt(
        1, "Sequences per decode step: a number fixes it; auto finds the largest batch the "
        "chosen decode pool serves within the TPOT SLA (prefill stays one sequence).",
        unit="N|auto", file_type=Batch | Auto, check=values.batch_choice)]
    objective: Annotated[str, Opt(
        "chips", "chips: the fewest chips N* (default); tokens-per-chip: the most decode "
        "tokens/s per chip of the whole plan among plans meeting the SLAs; cost: the least "
        "cost per million tokens (needs --price for the chip); power: the fewest joules per "
        "token (the chip's tdp_w).", choices=OBJECTIVE_NAMES)]
    prices: Annotated[str | list[str] | Mapping[str, str] | None, Opt(
        None, "Price of a chip per chip-hour, e.g. h200=3.5/h (or /day, /month, /year; "
        "repeatable, or h200=3.5/h,b200=6/h): the plan's cost per hour and per million tokens "
        "are reported from it. None are built in.", unit="CHIP=PRICE", flag="--price",
        file_type=dict[str, str] | list[str] | None, check=values.prices)]


class ServingOptions(TypedDict, total=False):
    """The traffic a ``capacity`` study sizes pools for (study files: the ``serving`` section)."""

    rates: Annotated[str | float | Sequence[str | float] | None, Opt(
        None, "Arrival rates, e.g. 0.2/s, or 0.05/s,0.2/s,0.5/s for a curve (/min and /h "
        "too); a number without a unit is refused.", unit="RATE,...", aliases=("--rate",),
        file="serving.rates", file_type=str | float | list[str | float] | None,
        check=values.rates)]
    context_mix: Annotated[str | Sequence[str] | Mapping[str, float] | None, Opt(
        None, "Context lengths of the requests and their shares, e.g. 128K:0.7,1M:0.3, or one "
        "length, 128K.", unit="TOKENS:SHARE,...", flag="--context",
        hidden_flags=CONTEXT_SPELLINGS, file="serving.contexts",
        file_type=str | list[str] | dict[str, float] | None, check=values.context_mix)]
    output_tokens: Annotated[Tokens, Opt(
        1000, "Output tokens per request, e.g. 1000 or 1K (the first comes from prefill; TPOT "
        "is the mean time per token over the rest).", unit="TOKENS",
        file="serving.output_tokens", check=values.output_tokens)]
    percentile: Annotated[float, Opt(
        90.0, "Percentile of requests the TTFT and TPOT targets hold for, in (0, 100).",
        unit="P", file="serving.percentile", check=values.percentile)]
    requests: Annotated[int, Opt(
        2000, "Requests in the simulated arrival sequence (the first and last 10 % are not "
        "measured).", unit="N", file="serving.requests",
        file_type=Annotated[int, Ge(10), Le(1_000_000)])]
    seed: Annotated[int, Opt(
        0, "Seed of the arrival sequence (one sequence, scaled by each rate).", unit="N",
        file="serving.seed", file_type=Annotated[int, Ge(0)])]


class CapacityOptions(SolveOptions, ServingOptions, total=False):
    """A capacity study's options: the search that shapes the instances, and the traffic."""


class SensitivityOptions(TypedDict, total=False):
    """What a sensitivity study moves (``sensitivity``, ``solve --sensitivity``; study files:
    the ``sensitivity`` section)."""

    steps: Annotated[str | Sequence[str | float], Opt(
        "-25%,-10%,+10%,+25%", "Relative steps each figure and SLA moves by.", unit="PCT,...",
        file="sensitivity.steps", file_type=str | list[str | float], check=values.steps)]
    figures: Annotated[str | Sequence[str] | None, Opt(
        None, "Figures to move, e.g. chip.memory_bandwidth,cluster.board.bandwidth,"
        "sla.tpot_max (default: memory bandwidth and capacity, the peak of every dtype, link "
        "bandwidth and the point-to-point and collective operation costs per cluster level, "
        "the SLAs).", unit="FIGURE,...",
        file="sensitivity.figures", file_type=str | list[str] | None)]


class SensitivityStudyOptions(SolveOptions, SensitivityOptions, total=False):
    """A sensitivity study's options: the solve it moves, and what it moves."""


class SolveReportOptions(TypedDict, total=False):
    """What ``solve`` reports beyond the answer (not part of a study: no file field)."""

    sensitivity: Annotated[bool, Opt(
        False, "Also move each chip / cluster figure and SLA by --steps and report N*, TTFT "
        "and TPOT for each (as ctxplan sensitivity does).")]


class RunOptions(TypedDict, total=False):
    """Where many solves run (``sweep``; not part of a study: they do not change its answer)."""

    backend: Annotated[str | None, Opt(
        None, "Where sweep points run: process (local worker processes), serial (this "
        "process) or ray (needs pip install 'ctxplan[ray]'). API default: this process.",
        unit="process|serial|ray", cli_default="process")]
    workers: Annotated[int | None, Opt(
        None, "Worker processes for --backend process (default: min(2, CPUs)); CPUs of a "
        "local Ray instance for --backend ray.", unit="N")]
    address: Annotated[str | None, Opt(
        None, "Ray cluster address for --backend ray (e.g. ray://head:10001 or auto; "
        "default: start a local instance).", unit="ADDRESS")]


class SweepOptions(SolveOptions, RunOptions, total=False):
    """A sweep's options: a search's, and where its points run."""


# ---------------------------------------------------------------------------- derivations

Group = type  # one of the TypedDicts above


@cache
def declared(group: Group) -> dict[str, Declared]:
    """The options of ``group`` (a TypedDict above), in declaration order, bases first."""
    hints = get_type_hints(group, include_extras=True)
    out: dict[str, Declared] = {}
    for name, hint in hints.items():
        api_type, *meta = get_args(hint)
        opts = [m for m in meta if isinstance(m, Opt)]
        assert len(opts) == 1, f"{group.__name__}.{name}: annotate it with one Opt"
        out[name] = Declared(name, api_type, opts[0])
    return out


def subjects(*names: str) -> dict[str, Declared]:
    return {n: SUBJECTS[n] for n in names}


def complete(group: Group, given: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Every option of ``group``: the ones given, the defaults for the rest; deprecated options
    are accepted and left out. An unknown name is a TypeError, as for any Python function."""
    options = declared(group)
    unknown = [k for k in given if k not in options]
    if unknown:
        raise TypeError(f"{where}() got an unexpected keyword argument {unknown[0]!r}")
    return {name: given.get(name, d.default) for name, d in options.items()
            if not d.opt.deprecated}


def complete_checked(group: Group, given: Mapping[str, Any], where: str) -> dict[str, Any]:
    """:func:`complete`, each value given as plain data (not None, not a built object) checked
    by its declaration's ``check`` and turned into the API's form by its ``to_api``: a keyword
    argument is refused, or normalised, with the same words as a file field."""
    options = declared(group)
    out = complete(group, given, where)
    for name, value in out.items():
        opt = options[name].opt
        if opt.check is not None and isinstance(value, str | int | float | list | tuple | dict):
            value = values.checked(name, value, opt.check)
            out[name] = opt.to_api(value) if opt.to_api is not None else value
    return out


F = TypeVar("F", bound=Callable[..., Any])


def with_options(group: Group) -> Callable[[F], F]:
    """Give a function taking ``**options: Unpack[group]`` the full runtime signature (every
    option a keyword argument with its default) and an "Options" section in its docstring."""

    def decorate(fn: F) -> F:
        sig = inspect.signature(fn)
        params = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        taken = {p.name for p in params}
        extra = [inspect.Parameter(d.name, inspect.Parameter.KEYWORD_ONLY, default=d.default,
                                   annotation=d.api_type)
                 for d in declared(group).values() if d.name not in taken]
        fn.__signature__ = sig.replace(parameters=[*params, *extra])  # type: ignore[attr-defined]
        lines = [f"    {d.name} (default {d.default!r}): {d.opt.help}"
                 for d in declared(group).values()]
        fn.__doc__ = (fn.__doc__ or "").rstrip() + "\n\n    Options:\n" + "\n".join(lines) + "\n"
        return fn

    return decorate


def _study_model() -> Declared:
    """A study's model: the subject, or a list of them (one curve each, side by side)."""
    d = SUBJECTS["model"]
    return Declared(d.name, d.api_type, replace(
        d.opt, file_type=Definition | list[Definition],
        help="Model preset, model YAML or HF config.json; a study may list several.",
        check=values.definitions("model")))


def file_options(kind: str) -> dict[str, Declared]:
    """The options a study / point file holds, by option name (subjects first)."""
    if kind == "study":
        group: dict[str, Declared] = {"model": _study_model(), **subjects("chip", "contexts"),
                                      **declared(SolveOptions), **declared(ServingOptions),
                                      **declared(SensitivityOptions)}
    else:
        group = {**subjects("model", "chip", "context", "phase", "cp"), **declared(EvalOptions)}
    return group
