"""The one place that builds a :class:`ctxplan.model.ModelSpec` from a model definition and checks
it: our YAML (:mod:`ctxplan.config.model_yaml`) and every Hugging Face family
(:mod:`ctxplan.config.hf_config`) hand their fields to :func:`build_model`.

Cross-field rules live here, each failing with a one-line ``UserInputError`` that names the field
in the user's file: query heads a multiple of KV heads (MHA / GQA), a head width that follows from
the hidden size when it is not given, at most as many experts per token as experts, and an MoE
layer set that ctxplan can model (every k-th layer after the leading dense ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxplan.errors import UserInputError
from ctxplan.model.spec import MLASpec, ModelSpec, MoESpec

MLA_FIELDS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


@dataclass(frozen=True)
class MoELayers:
    """A model's MoE block as its config states it: the experts, and which layers are MoE."""

    n_routed_experts: int
    n_shared_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    layers: list[int]          # indices of the MoE layers, ascending, not empty
    pattern_field: str         # the config field that sets the layer pattern (named in errors)


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
) -> ModelSpec:
    """The checked ModelSpec. ``num_key_value_heads`` None means MHA (as many as query heads);
    ``head_dim`` None means hidden_size / num_attention_heads. ``where`` names the file."""
    heads = num_attention_heads
    kv_heads = heads if num_key_value_heads is None else num_key_value_heads
    if mla is None and heads % kv_heads:
        raise UserInputError(f"{where}: num_key_value_heads", kv_heads,
                             f"give a divisor of num_attention_heads = {heads}",
                             "num_attention_heads is not a multiple of it")
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
    )


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
