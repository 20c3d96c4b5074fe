"""What a run warns about, checked once at the edge (docs/model.md, "Context beyond the model";
docs/model.md, "Weight dtypes"). Each check returns warning lines for the run's channel
(:mod:`ctxplan.run_warnings`) or refuses the input with a ``UserInputError``.

* A context above the model's trained limit (``ModelSpec.context_limit``: max of
  max_position_embeddings and rope_scaling's factor x original length) is planned anyway with a
  warning naming both numbers; ``strict`` (``--strict-context``) makes it an error. A context
  above :data:`MAX_CONTEXT_TOKENS` (16M) is refused whatever the model: beyond what ctxplan
  plans for (and hours of simulation).
* Weights stored in a format whose matmul dtype the chip lacks run at a wider one (FP4 weights
  at BF16 on a chip without FP4 tensor cores, dequantised in the kernel): planned, and said.
* A cluster built for another chip (its ``chip`` names another, and it is not the chip's own
  ``default_cluster``): planned as given, for a chip on another's fabric may be meant (a what-if
  on a new chip), and said, for it may be a slip (``--chip h200 --cluster hgx-h100-ib``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from ctxplan.errors import UserInputError
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.model.dtypes import matmul_dtype, matmul_dtype_preference, matmul_input_bytes
from ctxplan.model.spec import ModelSpec
from ctxplan.run_warnings import warning_line

if TYPE_CHECKING:
    from ctxplan.evaluate import EvalConfig

MAX_CONTEXT_TOKENS = 16 * 2**20   # 16M = 16,777,216 tokens


def _limit_text(m: ModelSpec) -> str:
    """How the model states its limit: 'max_position_embeddings 163,840; rope_scaling 40 x
    4,096'."""
    parts = []
    if m.max_position_embeddings is not None:
        parts.append(f"max_position_embeddings {m.max_position_embeddings:,}")
    if m.rope_scaling_factor is not None and m.original_max_position_embeddings is not None:
        parts.append(f"rope_scaling factor {m.rope_scaling_factor:g} x "
                     f"{m.original_max_position_embeddings:,}")
    return "; ".join(parts)


def context_warnings(m: ModelSpec, context_length: int, strict: bool = False,
                     field: str = "context_length") -> tuple[str, ...]:
    """The warning for a context above ``m``'s trained limit (none when within it or when the
    model states no limit); a UserInputError above 16M tokens, or above the limit when
    ``strict``."""
    if context_length > MAX_CONTEXT_TOKENS:
        raise UserInputError(field, f"{context_length:,}",
                             f"give at most 16M ({MAX_CONTEXT_TOKENS:,}) tokens",
                             "above the longest context ctxplan plans for")
    limit = m.context_limit
    if limit is None or context_length <= limit:
        return ()
    problem = (f"beyond {m.name}'s trained context of {limit:,} tokens "
               f"({_limit_text(m)})")
    if strict:
        raise UserInputError(field, f"{context_length:,}",
                             f"give at most {limit:,} tokens, or drop --strict-context "
                             "(strict_context) to plan it with a warning", problem)
    return (warning_line(field, f"{context_length:,}", problem,
                         "planned anyway: the model may not answer well there "
                         "(--strict-context makes this an error)"),)


def precision_warnings(weights: Mapping[str, str], chip_name: str,
                       chip_peaks: Collection[str]) -> tuple[str, ...]:
    """A warning per weight field (``{"ffn_weights": "mxfp4", ...}``) whose matmuls run at a
    wider dtype than the format's own because the chip has no peak for it (MXFP4 / NVFP4 at
    BF16 without FP4 tensor cores). Equal-width stand-ins (FP16 as BF16) are not warned about;
    a dtype the chip cannot run at all is an error elsewhere (``evaluate``)."""
    out = []
    for field, storage in weights.items():
        preferred = matmul_dtype_preference(storage)[0]
        used = matmul_dtype(storage, chip_peaks)
        if used is None or used == preferred:
            continue
        if matmul_input_bytes(used) <= matmul_input_bytes(preferred):
            continue
        out.append(warning_line(
            field, storage, f"chip {chip_name} has no {preferred.upper()} peak",
            f"these matmuls run at {used.upper()} (the weights dequantised in the kernel, "
            f"stored and read as {storage})"))
    return tuple(out)


def cluster_warnings(chip: Chip, cluster: Cluster) -> tuple[str, ...]:
    """The warning for a cluster whose ``chip`` is another chip than the one planned on, unless
    it is that chip's own default cluster (a chip file may name any cluster as its own)."""
    if not cluster.chip or cluster.chip == chip.name or cluster.name == chip.default_cluster:
        return ()
    own = f" (its own is {chip.default_cluster})" if chip.default_cluster else ""
    return (warning_line("cluster", cluster.name, f"built for chip {cluster.chip}, not for "
                         f"{chip.name}{own}", f"planned on it as given: {cluster.name}'s links "
                         f"and groups with {chip.name}'s compute and memory"),)


def point_warnings(cfg: EvalConfig) -> tuple[str, ...]:
    """Every warning an evaluation (and a solve, of its points) carries: the context against the
    model's limit (not strict: a strict run has refused it already), its weight dtypes on its
    chip, and its cluster against its chip."""
    p = cfg.resolved_precision()
    weights = {"attention_weights": p.attention_weights, "ffn_weights": p.ffn_weights}
    return (*context_warnings(cfg.model, cfg.context_length),
            *precision_warnings(weights, cfg.chip.name, cfg.chip.peak_flops_per_s),
            *cluster_warnings(cfg.chip, cfg.cluster), *pipeline_warnings(cfg))


def pipeline_warnings(cfg: EvalConfig) -> tuple[str, ...]:
    """A pipeline that cannot overlap its stages: a prefill in one pass, or a decode of one
    sequence (each stage waits for the one before, so the stages only add hops)."""
    if cfg.pp == 1:
        return ()
    if cfg.phase == "prefill" and cfg.policy.prefill_chunk == "off":
        return (warning_line(
            "prefill_chunk", "off", f"one pass through {cfg.pp} pipeline stages overlaps "
            "nothing", "the pipeline gives one request no speed-up over pp 1, only the hops "
            "between stages (chunk the prompt: auto, dynamic or a size)"),)
    if cfg.phase == "decode" and cfg.batch < cfg.pp:
        return (warning_line(
            "batch", cfg.batch, f"fewer sequences than the {cfg.pp} pipeline stages",
            "some stages idle while a step passes the others (a sequence's TPOT is the sum of "
            "the stage times and the hops either way)"),)
    return ()
