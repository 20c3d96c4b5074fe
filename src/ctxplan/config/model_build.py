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

from dataclasses import dataclass
from typing import Any

from ctxplan.errors import UserInputError
from ctxplan.model.spec import (
    CHUNKED_ATTENTION,
    INDEXED_ATTENTION,
    LAYER_TYPES,
    LINEAR_ATTENTION,
    SLIDING_ATTENTION,
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


@dataclass(frozen=True)
class MoELayers:
    """A model's MoE block as its config states it: the experts, and which layers are MoE."""

    n_routed_experts: int
    n_shared_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    layers: list[int]          # indices of the MoE layers, ascending, not empty
    pattern_field: str         # the config field that sets the layer pattern (named in errors)


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
        layer_types=kinds.layer_types,
        sliding_window=kinds.sliding_window,
        attention_chunk_size=kinds.attention_chunk_size,
        attention_sinks=kinds.attention_sinks,
        attention_output_gate=kinds.attention_output_gate,
        linear_attention=kinds.linear_attention,
        dsa=kinds.dsa,
        expert_weight_dtype=expert_weight_dtype,
    )


# The parameters each kind needs, by the config field that states them.
_KIND_PARAMETERS = {
    SLIDING_ATTENTION: ("sliding_window", "sliding_window"),
    CHUNKED_ATTENTION: ("attention_chunk_size", "attention_chunk_size"),
    LINEAR_ATTENTION: ("linear_attention", "linear_num_value_heads"),
    INDEXED_ATTENTION: ("dsa", "index_n_heads"),
}


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
    unknown = sorted(set(types) - set(LAYER_TYPES))
    if unknown:
        raise UserInputError(f"{where}: {field}", unknown[0],
                             f"use one of {', '.join(LAYER_TYPES)}", "unknown attention kind")
    for kind, (attr, named) in _KIND_PARAMETERS.items():
        value = getattr(a, attr)
        if kind in types and value is None:
            raise UserInputError(f"{where}: {named}", None,
                                 f"add it: {kind} layers need it", "required field missing")
        if value is not None and kind not in types:
            shown = value if attr == named else getattr(value, named)  # a spec: its first field
            raise UserInputError(f"{where}: {named}", shown,
                                 f"give {field} with {kind} layers, or drop it",
                                 f"no layer is {kind}")
    if INDEXED_ATTENTION in types and (mla is None or mla.q_lora_rank is None):
        raise UserInputError(f"{where}: {field}", INDEXED_ATTENTION,
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
    return LinearAttentionSpec(
        linear_num_key_heads=f.linear_num_key_heads,
        linear_num_value_heads=f.linear_num_value_heads,
        linear_key_head_dim=f.linear_key_head_dim,
        linear_value_head_dim=f.linear_value_head_dim,
        linear_conv_kernel_dim=f.linear_conv_kernel_dim,
        state_dtype=state_dtype,
    )


def dsa_from(f: Any, where: str) -> DSASpec | None:
    """The DSA indexer of a validated schema carrying DeepSeek-V3.2's field names (None: none
    of them given)."""
    if all(getattr(f, k) is None for k in DSA_FIELDS):
        return None
    require_all(f, DSA_FIELDS, where, "DSA")
    return DSASpec(index_n_heads=f.index_n_heads, index_head_dim=f.index_head_dim,
                   index_topk=f.index_topk)


def require_all(obj: Any, fields: tuple[str, ...], where: str, what: str) -> None:
    """Every one of ``fields`` is set on ``obj`` (a validated schema), or a user error naming the
    first missing one."""
    for field in fields:
        if getattr(obj, field) is None:
            given = [f for f in fields if getattr(obj, f) is not None]
            raise UserInputError(
                f"{where}: {field}",
                None,
                f"add '{field}': {what} needs all of {', '.join(fields)}"
                + (f" (found {', '.join(given)})" if given else ""),
                "required field missing",
            )


def mla_from(f: Any, where: str) -> MLASpec | None:
    """The MLA block of a validated schema carrying the DeepSeek field names (None: no MLA)."""
    if all(getattr(f, k) is None for k in (*MLA_FIELDS, "q_lora_rank")):
        return None
    require_all(f, MLA_FIELDS, where, "MLA")
    return MLASpec(
        q_lora_rank=f.q_lora_rank,
        kv_lora_rank=f.kv_lora_rank,
        qk_nope_head_dim=f.qk_nope_head_dim,
        qk_rope_head_dim=f.qk_rope_head_dim,
        v_head_dim=f.v_head_dim,
    )


def _moe_spec(moe: MoELayers, n_layers: int, where: str) -> MoESpec:
    if moe.num_experts_per_tok > moe.n_routed_experts:
        raise UserInputError(f"{where}: num_experts_per_tok", moe.num_experts_per_tok,
                             f"give at most the number of experts ({moe.n_routed_experts})",
                             "more experts per token than experts")
    first, freq = _fit_layer_pattern(moe.layers, n_layers, where, moe.pattern_field)
    return MoESpec(
        n_routed_experts=moe.n_routed_experts,
        n_shared_experts=moe.n_shared_experts,
        num_experts_per_tok=moe.num_experts_per_tok,
        moe_intermediate_size=moe.moe_intermediate_size,
        first_k_dense_replace=first,
        moe_layer_freq=freq,
    )


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
