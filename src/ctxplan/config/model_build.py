"""The one place that builds a :class:`ctxplan.model.ModelSpec` from a model definition and checks
it: our YAML (:mod:`ctxplan.config.model_yaml`) and every Hugging Face family
(:mod:`ctxplan.config.hf_config`) hand their fields to :func:`build_model`.

Cross-field rules live here, each failing with a one-line ``UserInputError`` that names the field
in the user's file: query heads a multiple of KV heads (MHA / GQA), a head width that follows from
the hidden size when it is not given, at most as many experts per token as experts, an MoE
layer set that ctxplan can model (every k-th layer after the leading dense ones), one attention
kind per layer with the parameters of each kind present (and none for a kind absent), DSA over
MLA with a query latent, and an expert dtype only for a model with experts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ctxplan.errors import UserInputError
from ctxplan.model import spec
from ctxplan.model.spec import (
    CompressedAttentionSpec,
    DSASpec,
    LinearAttentionSpec,
    MLASpec,
    ModelSpec,
    MoESpec,
)

MLA_FIELDS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
LINEAR_FIELDS = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                 "linear_value_head_dim", "linear_conv_kernel_dim")
DSA_FIELDS = ("index_n_heads", "index_head_dim", "index_topk")
COMPRESSED_FIELDS = ("o_groups", "o_lora_rank", "q_lora_rank", "qk_rope_head_dim",
                     "sliding_window")


@dataclass(frozen=True)
class MoELayers:
    """A model's MoE block as its config states it: the experts, and which layers are MoE."""

    n_routed_experts: int
    n_shared_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    layers: list[int]          # indices of the MoE layers, ascending, not empty
    pattern_field: str         # the config field that sets the layer pattern (named in errors)
    num_hash_layers: int = 0   # the first MoE layers routed by a token-id hash (DeepSeek-V4)


@dataclass(frozen=True)
class AttentionLayers:
    """A model's attention kind per layer as its config states it, with each kind's parameters
    (docs/model.md, "Attention kinds"). The default is every layer full attention."""

    layer_types: tuple[str, ...] = ()   # one kind per layer; () = every layer full attention
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    attention_sinks: bool = False
    attention_output_gate: bool = False
    linear_attention: LinearAttentionSpec | None = None
    dsa: DSASpec | None = None
    types_field: str = "layer_types"    # the config field that sets the kinds (named in errors)
    compressed_attention: CompressedAttentionSpec | None = None  # DeepSeek-V4's block
    mtp_layer_types: tuple[str, ...] = ()  # the MTP layers the model carries (DeepSeek-V4)


# The fields of AttentionLayers a ModelSpec holds under the same names (not types_field).
_LAYER_FIELDS = ("layer_types", "sliding_window", "attention_chunk_size", "attention_sinks",
                 "attention_output_gate", "linear_attention", "dsa", "compressed_attention",
                 "mtp_layer_types")
# The shape every model definition states, named alike in config.json and our YAML (the
# arguments of build_model that share_fields(...) fills from either schema).
SHAPE_FIELDS = ("num_hidden_layers", "hidden_size", "num_attention_heads",
                "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings")


def same_named(obj: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """{name: obj.name} for ``names``: the fields one object hands another that names them
    alike (a validated schema's MLA fields to MLASpec, say)."""
    return {n: getattr(obj, n) for n in names}


@dataclass(frozen=True)
class ContextFields:
    """The trained context a config states (docs/model.md, "Context beyond the model")."""

    max_position_embeddings: int | None = None
    rope_scaling_factor: float | None = None
    original_max_position_embeddings: int | None = None


def build_model(
    where: str,
    *,
    name: str,
    source: str,
    weight_dtype: str,
    num_hidden_layers: int,
    hidden_size: int,
    num_attention_heads: int,
    num_key_value_heads: int | None,
    head_dim: int | None,
    intermediate_size: int,
    vocab_size: int,
    tie_word_embeddings: bool,
    mla: MLASpec | None = None,
    moe: MoELayers | None = None,
    layers: AttentionLayers | None = None,
    expert_weight_dtype: str | None = None,
    context: ContextFields | None = None,
    hc_mult: int = 1,
) -> ModelSpec:
    """The checked ModelSpec. ``num_key_value_heads`` None means MHA (as many as query heads);
    ``head_dim`` None means hidden_size / num_attention_heads; ``layers`` None means every layer
    full attention; ``expert_weight_dtype`` None means the experts are stored as the rest.
    ``where`` names the file."""
    heads = num_attention_heads
    kv_heads = heads if num_key_value_heads is None else num_key_value_heads
    if mla is None and heads % kv_heads:
        raise UserInputError(f"{where}: num_key_value_heads", kv_heads,
                             f"give a divisor of num_attention_heads = {heads}",
                             "num_attention_heads is not a multiple of it")
    kinds = layers or AttentionLayers()
    _check_layers(kinds, num_hidden_layers, mla, where)
    if kinds.compressed_attention is not None and kv_heads != 1:
        raise UserInputError(f"{where}: num_key_value_heads", kv_heads,
                             "give 1: DeepSeek-V4's attention is MQA over one latent",
                             "compressed attention with several KV heads")
    span = context or ContextFields()
    hash_layers = moe.num_hash_layers if moe is not None else 0
    if hash_layers and (moe is None or moe.layers[:hash_layers] != list(range(hash_layers))):
        raise UserInputError(f"{where}: num_hash_layers", hash_layers,
                             "give at most the number of MoE layers from layer 0, or 0",
                             "not that many MoE layers from the first")
    if expert_weight_dtype is not None and moe is None:
        raise UserInputError(f"{where}: expert_weight_dtype", expert_weight_dtype,
                             "drop it, or give the MoE fields: it is the routed experts' dtype",
                             "a dense model has no experts")
    return ModelSpec(
        name=name,
        num_hidden_layers=num_hidden_layers,
        hidden_size=hidden_size,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=_head_dim(head_dim, hidden_size, heads, mla is not None, where),
        intermediate_size=intermediate_size,
        vocab_size=vocab_size,
        tie_word_embeddings=tie_word_embeddings,
        mla=mla,
        moe=None if moe is None else _moe_spec(moe, num_hidden_layers, where),
        weight_dtype=weight_dtype,
        source=source,
        expert_weight_dtype=expert_weight_dtype,
        hc_mult=hc_mult,
        num_hash_layers=hash_layers,
        **same_named(kinds, _LAYER_FIELDS),
        **asdict(span),
    )


# Each kind's parameters: (AttentionLayers attribute, the config field that states it, the kinds
# that use it). A kind present needs each of its parameters; a parameter no present kind uses is
# refused (a forgotten layer_types).
_PARAMETERS = (
    ("sliding_window", "sliding_window", (spec.SLIDING_ATTENTION, *spec.COMPRESSED_LAYER_TYPES)),
    ("attention_chunk_size", "attention_chunk_size", (spec.CHUNKED_ATTENTION,)),
    ("linear_attention", "linear_num_value_heads", (spec.LINEAR_ATTENTION,)),
    ("dsa", "index_n_heads", (spec.INDEXED_ATTENTION, spec.COMPRESSED_SPARSE_ATTENTION)),
    ("compressed_attention", "compress_ratios", spec.COMPRESSED_LAYER_TYPES),
)


def _check_layers(a: AttentionLayers, n_layers: int, mla: MLASpec | None, where: str) -> None:
    """One known kind per layer; each kind present has its parameters and each absent kind has
    none (a window with no sliding layer is a forgotten ``layer_types``); DSA over MLA with a
    query latent; the output gate on MHA / GQA only."""
    types = a.layer_types
    field = a.types_field
    if types and len(types) != n_layers:
        raise UserInputError(f"{where}: {field}", f"{len(types)} entries",
                             f"give one kind per layer (num_hidden_layers = {n_layers})",
                             "wrong number of layers")
    unknown = sorted(set(types) - set(spec.LAYER_TYPES))
    if unknown:
        raise UserInputError(f"{where}: {field}", unknown[0],
                             f"use one of {', '.join(spec.LAYER_TYPES)}", "unknown attention kind")
    present = set(types) | set(a.mtp_layer_types)
    for attr, named, kinds in _PARAMETERS:
        value = getattr(a, attr)
        users = [k for k in kinds if k in present]
        if users and value is None:
            raise UserInputError(f"{where}: {named}", None,
                                 f"add it: {users[0]} layers need it", "required field missing")
        if value is not None and not users:
            shown = getattr(value, named, value)  # a spec: the field that states it
            if attr == "compressed_attention":
                shown = "o_groups, o_lora_rank"
            raise UserInputError(f"{where}: {named}", shown,
                                 f"give {field} with {' or '.join(kinds)} layers, or drop it",
                                 f"no layer is {kinds[0]}")
    if a.compressed_attention is not None and present - set(spec.COMPRESSED_LAYER_TYPES):
        other = sorted(present - set(spec.COMPRESSED_LAYER_TYPES))[0]
        raise UserInputError(f"{where}: {field}", other,
                             "give DeepSeek-V4's kinds only (compress_ratios 0, 4, 128): its "
                             "attention block is not that of other kinds", "mixed attention")
    if a.compressed_attention is not None and mla is not None:
        raise UserInputError(f"{where}: kv_lora_rank", mla.kv_lora_rank,
                             "drop the MLA fields: DeepSeek-V4's attention is MQA over one "
                             "latent (head_dim), not MLA", "MLA with compressed attention")
    if spec.INDEXED_ATTENTION in types and (mla is None or mla.q_lora_rank is None):
        raise UserInputError(f"{where}: {field}", spec.INDEXED_ATTENTION,
                             "DSA's indexer reads MLA's query latent: give the MLA fields with "
                             "q_lora_rank", "indexed_attention without MLA")
    if a.attention_output_gate and mla is not None:
        raise UserInputError(f"{where}: attention_output_gate", True,
                             "drop it: the output gate is modelled for MHA / GQA only",
                             "not modelled for MLA")


def linear_attention_from(f: Any, where: str, state_dtype: str = "bf16"
                          ) -> LinearAttentionSpec | None:
    """The Gated DeltaNet block of a validated schema carrying Qwen3-Next's field names (None:
    none of them given)."""
    if all(getattr(f, k) is None for k in LINEAR_FIELDS):
        return None
    require_all(f, LINEAR_FIELDS, where, "linear attention")
    if f.linear_num_value_heads % f.linear_num_key_heads:
        raise UserInputError(f"{where}: linear_num_value_heads", f.linear_num_value_heads,
                             f"give a multiple of linear_num_key_heads = "
                             f"{f.linear_num_key_heads}", "value heads do not share key heads")
    return LinearAttentionSpec(**same_named(f, LINEAR_FIELDS), state_dtype=state_dtype)


def dsa_from(f: Any, where: str) -> DSASpec | None:
    """The DSA indexer of a validated schema carrying DeepSeek-V3.2's field names (None: none
    of them given)."""
    if all(getattr(f, k) is None for k in DSA_FIELDS):
        return None
    require_all(f, DSA_FIELDS, where, "DSA")
    return DSASpec(**same_named(f, DSA_FIELDS))


def compressed_from(f: Any, where: str) -> AttentionLayers:
    """DeepSeek-V4's attention layers from a validated schema carrying its config.json names:
    ``compress_ratios`` (one per layer, then one per MTP layer: 0 window only; of the two
    nonzero ratios the smaller is CSA, with the lightning indexer, the larger HCA; a single
    nonzero ratio is CSA when the indexer's fields are given, else HCA), the grouped output
    projection, the window, the indexer."""
    require_all(f, ("compress_ratios", *COMPRESSED_FIELDS), where, "DeepSeek-V4 attention")
    ratios = list(f.compress_ratios)
    n, mtp = f.num_hidden_layers, f.num_nextn_predict_layers or 0
    if len(ratios) not in (n, n + mtp):
        raise UserInputError(f"{where}: compress_ratios", f"{len(ratios)} entries",
                             f"give one per layer and one per MTP layer ({n} + {mtp})",
                             "wrong number of layers")
    nonzero = sorted(set(ratios) - {0})
    if len(nonzero) > 2:
        raise UserInputError(f"{where}: compress_ratios", nonzero,
                             "give at most two nonzero ratios (CSA's and HCA's)",
                             "more than two compressed kinds")
    dsa = dsa_from(f, where)
    csa = hca = None
    if len(nonzero) == 2:
        csa, hca = nonzero
    elif nonzero:
        csa, hca = (nonzero[0], None) if dsa is not None else (None, nonzero[0])
    kind = {0: spec.WINDOW_ATTENTION, csa: spec.COMPRESSED_SPARSE_ATTENTION,
            hca: spec.HEAVILY_COMPRESSED_ATTENTION}
    # A ratio the model does not use keeps ModelSpec's order (CSA's below HCA's).
    csa_r = csa if csa is not None else min(4, max(1, (hca or 2) - 1))
    hca_r = hca if hca is not None else max(128, csa_r + 1)
    types = tuple(kind[r] for r in ratios)
    # MTP layers a config lists no ratio for are window only, as DeepSeek-V4's
    mtp_types = types[n:] or (spec.WINDOW_ATTENTION,) * mtp
    return AttentionLayers(
        layer_types=types[:n], sliding_window=f.sliding_window, dsa=dsa,
        attention_sinks=True, types_field="compress_ratios", mtp_layer_types=mtp_types,
        compressed_attention=CompressedAttentionSpec(
            q_lora_rank=f.q_lora_rank, qk_rope_head_dim=f.qk_rope_head_dim,
            o_groups=f.o_groups, o_lora_rank=f.o_lora_rank, csa_compress_ratio=csa_r,
            hca_compress_ratio=hca_r))


def context_from(f: Any) -> ContextFields:
    """The trained context of a validated schema: max_position_embeddings and rope_scaling's
    factor and original length (transformers >= 5's rope_parameters too)."""
    rope = f.rope_scaling or getattr(f, "rope_parameters", None)
    return ContextFields(
        max_position_embeddings=f.max_position_embeddings,
        rope_scaling_factor=None if rope is None or rope.factor is None else float(rope.factor),
        original_max_position_embeddings=None if rope is None
        else rope.original_max_position_embeddings)


def require_all(obj: Any, fields: tuple[str, ...], where: str, what: str) -> None:
    """Every one of ``fields`` is set on ``obj`` (a validated schema), or a user error naming
    every missing one."""
    require_groups(obj, {what: fields}, where)


def require_groups(obj: Any, groups: Mapping[str, tuple[str, ...]], where: str) -> None:
    """Every field of every group ({"MLA": fields, "MoE": fields}) is set on ``obj``, or one
    user error naming all the missing ones, each with the group that needs it."""
    missing = {f: what for what, fields in groups.items() for f in fields
               if getattr(obj, f) is None}
    if not missing:
        return
    names = list(missing)
    needs = []
    for what, fields in groups.items():
        if any(missing.get(f) == what for f in fields):
            given = [f for f in fields if getattr(obj, f) is not None]
            needs.append(f"{what} needs all of {', '.join(fields)}"
                         + (f" (found {', '.join(given)})" if given else ""))
    raise UserInputError(
        f"{where}: {', '.join(names)}", None,
        f"add {', '.join(repr(n) for n in names)}: {'; '.join(needs)}",
        "required field missing" if len(names) == 1 else "required fields missing")


def mla_from(f: Any, where: str) -> MLASpec | None:
    """The MLA block of a validated schema carrying the DeepSeek field names (None: no MLA)."""
    if all(getattr(f, k) is None for k in (*MLA_FIELDS, "q_lora_rank")):
        return None
    require_all(f, MLA_FIELDS, where, "MLA")
    return MLASpec(**same_named(f, ("q_lora_rank", *MLA_FIELDS)))


def _moe_spec(moe: MoELayers, n_layers: int, where: str) -> MoESpec:
    if moe.num_experts_per_tok > moe.n_routed_experts:
        raise UserInputError(f"{where}: num_experts_per_tok", moe.num_experts_per_tok,
                             f"give at most the number of experts ({moe.n_routed_experts})",
                             "more experts per token than experts")
    first, freq = _fit_layer_pattern(moe.layers, n_layers, where, moe.pattern_field)
    return MoESpec(**same_named(moe, ("n_routed_experts", "n_shared_experts",
                                      "num_experts_per_tok", "moe_intermediate_size")),
                   first_k_dense_replace=first, moe_layer_freq=freq)


def _head_dim(head_dim: int | None, hidden: int, heads: int, is_mla: bool, where: str) -> int:
    if head_dim is not None:
        return head_dim
    if hidden % heads and not is_mla:  # MLA does not use head_dim: floor is harmless there
        raise UserInputError(
            f"{where}: head_dim",
            None,
            f"add head_dim (hidden_size {hidden} is not a multiple of num_attention_heads {heads})",
            "required field missing",
        )
    return max(1, hidden // heads)


def _fit_layer_pattern(layers: list[int], n_layers: int, where: str, field: str) -> tuple[int, int]:
    """(first_k_dense_replace, moe_layer_freq) of MoESpec reproducing exactly the MoE layer set
    ``layers``; UserInputError naming ``field`` when no such pair exists."""
    first = layers[0]
    if len(layers) > 1:
        freq = layers[1] - layers[0]
    elif first > 0 and 2 * first >= n_layers:
        # One MoE layer: take its own index as the period, so the pair also has a config.json
        # form (first a multiple of freq), which model_to_dict needs to write it back.
        freq = first
    else:
        freq = max(1, n_layers - first)
    produced = list(range(first, n_layers, freq))
    if produced != layers:
        raise UserInputError(
            f"{where}: {field}",
            layers if len(layers) <= 8 else f"{len(layers)} MoE layers from {first}",
            "ctxplan models MoE layers as every k-th layer after the leading dense ones; "
            "describe the model in a ctxplan model YAML with that pattern",
            "irregular MoE layer pattern",
        )
    return first, freq
