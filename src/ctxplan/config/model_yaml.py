"""ctxplan's model YAML <-> ModelSpec.

Our YAML uses the config.json field names (DeepSeek's for MLA, MoE and DSA, DeepSeek-V4's
``compress_ratios`` and the fields of its attention, Qwen3-Next's for linear attention,
transformers' ``layer_types``, ``max_position_embeddings`` and ``rope_scaling``) plus ``name``,
``source``, ``weight_dtype``, ``expert_weight_dtype``, ``layer_pattern`` (kinds repeated from
layer 0), ``attention_sinks``, ``attention_output_gate`` and ``linear_state_dtype`` (schema:
:class:`ctxplan.config.model_schema.ModelFile`). The ModelSpec is built and checked by
:func:`ctxplan.config.model_build.build_model`, as for a config.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxplan.config import model_build as build
from ctxplan.config.hf_config import looks_like_hf, model_from_hf_config
from ctxplan.config.loader import validate
from ctxplan.config.model_build import AttentionLayers, MoELayers
from ctxplan.config.model_schema import ModelFile
from ctxplan.errors import UserInputError
from ctxplan.model.spec import (
    COMPRESSED_SPARSE_ATTENTION,
    HEAVILY_COMPRESSED_ATTENTION,
    WINDOW_ATTENTION,
    ModelSpec,
)

MOE_FIELDS = ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")
_MOE_KEYS = {*MOE_FIELDS, "n_shared_experts", "first_k_dense_replace", "moe_layer_freq"}


def model_from_dict(d: dict[str, Any], where: str) -> ModelSpec:
    """A ctxplan model mapping (preset file, user file or inline study definition).

    A mapping carrying ``model_type`` or ``architectures`` is a pasted config.json and is read
    as one (with optional ``name`` / ``source`` / ``weight_dtype`` overrides).
    """
    if isinstance(d, Mapping) and looks_like_hf(d):
        return model_from_hf_config(dict(d), where)
    f = validate(ModelFile, d, where)
    compressed = f.compress_ratios is not None
    if f.num_nextn_predict_layers and not compressed:
        raise UserInputError(f"{where}: num_nextn_predict_layers", f.num_nextn_predict_layers,
                             "drop it: MTP layers are modelled for DeepSeek-V4 "
                             "(compress_ratios) only", "MTP layers not modelled for this model")
    if compressed and (f.layer_types is not None or f.layer_pattern is not None):
        raise UserInputError(f"{where}: layer_types", f.layer_types or f.layer_pattern,
                             "drop it: compress_ratios gives each layer's kind",
                             "two layer lists")
    for name in ("kv_lora_rank", "qk_nope_head_dim", "v_head_dim"):
        if getattr(f, name) is not None and compressed:
            raise UserInputError(f"{where}: {name}", getattr(f, name),
                                 "drop the MLA fields: DeepSeek-V4's attention is MQA over one "
                                 "latent (head_dim), not MLA", "MLA with compressed attention")
    for name in ("hc_mult", "num_hash_layers", "o_groups", "o_lora_rank"):
        if getattr(f, name) is not None and not compressed:
            raise UserInputError(f"{where}: {name}", getattr(f, name),
                                 "drop it, or give compress_ratios: it is a DeepSeek-V4 field",
                                 "not modelled without compressed attention")
    return build.build_model(
        where,
        name=f.name,
        source=f.source or f"user model ({where})",
        weight_dtype=f.weight_dtype,
        **build.same_named(f, build.SHAPE_FIELDS),
        intermediate_size=f.intermediate_size,
        mla=None if compressed else build.mla_from(f, where),
        moe=_moe_layers(f, where),
        layers=build.compressed_from(f, where) if compressed else _attention_layers(f, where),
        expert_weight_dtype=f.expert_weight_dtype,
        context=build.context_from(f),
        hc_mult=f.hc_mult or 1,
    )


def _attention_layers(f: ModelFile, where: str) -> AttentionLayers:
    if f.layer_types is not None and f.layer_pattern is not None:
        raise UserInputError(f"{where}: layer_pattern", f.layer_pattern,
                             "give layer_types (one kind per layer) or layer_pattern (repeated), "
                             "not both", "two layer lists")
    field = "layer_pattern" if f.layer_pattern is not None else "layer_types"
    if f.layer_pattern is not None:
        if len(f.layer_pattern) == 0:
            raise UserInputError(f"{where}: layer_pattern", [], "give at least one kind",
                                 "empty pattern")
        n = len(f.layer_pattern)
        types = tuple(f.layer_pattern[i % n] for i in range(f.num_hidden_layers))
    else:
        types = tuple(f.layer_types or ())
    return AttentionLayers(
        layer_types=types,
        sliding_window=f.sliding_window,
        attention_chunk_size=f.attention_chunk_size,
        attention_sinks=f.attention_sinks,
        attention_output_gate=f.attention_output_gate,
        linear_attention=build.linear_attention_from(f, where, f.linear_state_dtype),
        dsa=build.dsa_from(f, where),
        types_field=field,
    )


def _moe_layers(f: ModelFile, where: str) -> MoELayers | None:
    if not any(getattr(f, k) is not None for k in f.model_fields_set & _MOE_KEYS):
        return None
    build.require_all(f, MOE_FIELDS, where, "MoE")
    assert f.n_routed_experts and f.num_experts_per_tok and f.moe_intermediate_size
    # A layer i is MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0 (config.json).
    layers = [i for i in range(f.num_hidden_layers)
              if i >= f.first_k_dense_replace and i % f.moe_layer_freq == 0]
    if not layers:
        raise UserInputError(
            f"{where}: first_k_dense_replace", f.first_k_dense_replace,
            f"give a value below num_hidden_layers = {f.num_hidden_layers}, or drop the MoE "
            "fields for a dense model", "no layer would be MoE")
    return MoELayers(f.n_routed_experts, f.n_shared_experts or 0, f.num_experts_per_tok,
                     f.moe_intermediate_size, layers, "moe_layer_freq",
                     num_hash_layers=f.num_hash_layers or 0)


def model_to_dict(m: ModelSpec) -> dict[str, Any]:
    """The ctxplan YAML mapping of ``m``; ``model_from_dict`` reads it back to an equal spec."""
    d: dict[str, Any] = {
        "name": m.name,
        "source": m.source,
        "weight_dtype": m.weight_dtype,
        "num_hidden_layers": m.num_hidden_layers,
        "hidden_size": m.hidden_size,
        "num_attention_heads": m.num_attention_heads,
        "num_key_value_heads": m.num_key_value_heads,
        "head_dim": m.head_dim,
        "intermediate_size": m.intermediate_size,
        "vocab_size": m.vocab_size,
        "tie_word_embeddings": m.tie_word_embeddings,
    }
    if m.mla is not None:
        d |= {
            "q_lora_rank": m.mla.q_lora_rank,
            "kv_lora_rank": m.mla.kv_lora_rank,
            "qk_nope_head_dim": m.mla.qk_nope_head_dim,
            "qk_rope_head_dim": m.mla.qk_rope_head_dim,
            "v_head_dim": m.mla.v_head_dim,
        }
    if m.moe is not None:
        moe = m.moe
        if moe.moe_layer_freq > 1 and moe.first_k_dense_replace % moe.moe_layer_freq:
            # config.json counts the frequency from layer 0; express the same layer set.
            raise UserInputError(
                f"{m.name}: first_k_dense_replace", moe.first_k_dense_replace,
                f"make it a multiple of moe_layer_freq = {moe.moe_layer_freq} (config.json "
                "counts the MoE frequency from layer 0)", "MoE layer pattern has no YAML form")
        d |= {
            "n_routed_experts": moe.n_routed_experts,
            "n_shared_experts": moe.n_shared_experts,
            "num_experts_per_tok": moe.num_experts_per_tok,
            "moe_intermediate_size": moe.moe_intermediate_size,
            "first_k_dense_replace": moe.first_k_dense_replace,
            "moe_layer_freq": moe.moe_layer_freq,
        }
    if m.expert_weight_dtype is not None:
        d["expert_weight_dtype"] = m.expert_weight_dtype
    if m.max_position_embeddings is not None:
        d["max_position_embeddings"] = m.max_position_embeddings
    rope = {k: v for k, v in (("factor", m.rope_scaling_factor),
                              ("original_max_position_embeddings",
                               m.original_max_position_embeddings)) if v is not None}
    if rope:
        d["rope_scaling"] = rope
    if m.compressed_attention is not None:
        return d | _compressed_to_dict(m)
    return d | _kinds_to_dict(m)


def _compressed_to_dict(m: ModelSpec) -> dict[str, Any]:
    """DeepSeek-V4's fields as its config.json writes them (``compress_ratios``, one per
    layer and then per MTP layer)."""
    spec = m.compressed_attention
    assert spec is not None
    ratio = {WINDOW_ATTENTION: 0, COMPRESSED_SPARSE_ATTENTION: spec.csa_compress_ratio,
             HEAVILY_COMPRESSED_ATTENTION: spec.hca_compress_ratio}
    types = [m.layer_type(j) for j in range(m.num_hidden_layers)] + list(m.mtp_layer_types)
    d: dict[str, Any] = {
        "q_lora_rank": spec.q_lora_rank, "qk_rope_head_dim": spec.qk_rope_head_dim,
        "o_groups": spec.o_groups, "o_lora_rank": spec.o_lora_rank,
        "compress_ratios": [ratio[t] for t in types],
        "num_nextn_predict_layers": len(m.mtp_layer_types),
        "sliding_window": m.sliding_window, "hc_mult": m.hc_mult,
        "num_hash_layers": m.num_hash_layers,
    }
    if m.dsa is not None:
        d |= {"index_n_heads": m.dsa.index_n_heads, "index_head_dim": m.dsa.index_head_dim,
              "index_topk": m.dsa.index_topk}
    return d


def _kinds_to_dict(m: ModelSpec) -> dict[str, Any]:
    """The attention kinds of ``m`` in YAML: ``layer_pattern`` when the kinds repeat a shorter
    list from layer 0 (the shortest such), else ``layer_types``; each kind's parameters."""
    d: dict[str, Any] = {}
    types = list(m.layer_types)
    if types:
        period = next(p for p in range(1, len(types) + 1)
                      if all(types[i] == types[i % p] for i in range(len(types))))
        if period < len(types):
            d["layer_pattern"] = types[:period]
        else:
            d["layer_types"] = types
    for name in ("sliding_window", "attention_chunk_size"):
        if getattr(m, name) is not None:
            d[name] = getattr(m, name)
    for name in ("attention_sinks", "attention_output_gate"):
        if getattr(m, name):
            d[name] = True
    la = m.linear_attention
    if la is not None:
        d |= {
            "linear_num_key_heads": la.linear_num_key_heads,
            "linear_num_value_heads": la.linear_num_value_heads,
            "linear_key_head_dim": la.linear_key_head_dim,
            "linear_value_head_dim": la.linear_value_head_dim,
            "linear_conv_kernel_dim": la.linear_conv_kernel_dim,
            "linear_state_dtype": la.state_dtype,
        }
    if m.dsa is not None:
        d |= {"index_n_heads": m.dsa.index_n_heads, "index_head_dim": m.dsa.index_head_dim,
              "index_topk": m.dsa.index_topk}
    return d
