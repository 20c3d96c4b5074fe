"""Parameter counts and weight bytes.

What is counted: every linear of :mod:`ctxplan.model.linear`, the RMSNorm weights (two per layer,
the MLA latent norms, the final norm), the token embedding and the LM head (unless tied). Not
counted: biases (Qwen2 q/k/v, < 0.01%), Qwen3's per-head q/k norms, DeepSeek's router correction
bias, Qwen2-MoE's shared-expert gate (each < 0.01%), and DeepSeek-V3's MTP module (~14B, used only
for speculative decoding; the published 671B excludes it, HF's 685B includes it).

Weight bytes use one dtype for every weight. Real FP8 checkpoints (DeepSeek-V3) keep embedding, LM
head, norms and router in BF16 and add one FP32 scale per 128x128 block (+0.02%); this adds
~1.9 GB to DeepSeek-V3's 671 GB (0.3%) and is not modelled.
"""

from __future__ import annotations

import math

from ctxplan.model.linear import (
    Linear,
    attention_linears,
    dense_ffn_linears,
    embedding_params,
    expert_linears,
    lm_head_params,
    router_linear,
    shared_expert_linears,
)
from ctxplan.model.spec import ModelSpec

# Bytes per stored weight element. int4 is packed two per byte (group scales not counted).
_BYTES_PER_PARAM: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}
WEIGHT_DTYPES = tuple(_BYTES_PER_PARAM)


def bytes_per_param(dtype: str) -> float:
    """Storage bytes of one weight element of ``dtype`` (bf16 2, fp8 1, int4 0.5, ...)."""
    try:
        return _BYTES_PER_PARAM[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(WEIGHT_DTYPES)}") from None


def _sum_params(linears: list[Linear]) -> int:
    return sum(lin.params for lin in linears)


def attention_params(m: ModelSpec) -> int:
    """Attention weights of one layer, with the MLA latent norms."""
    n = _sum_params(attention_linears(m))
    if m.mla is not None:
        # q_a_layernorm and kv_a_layernorm (modeling_deepseek.py)
        n += (m.mla.q_lora_rank or 0) + m.mla.kv_lora_rank
    return n


def ffn_params(m: ModelSpec, layer: int) -> int:
    """FFN weights of one layer: the dense FFN, or router + every routed and shared expert."""
    if not m.is_moe_layer(layer):
        return _sum_params(dense_ffn_linears(m))
    assert m.moe is not None
    return (
        router_linear(m).params
        + m.moe.n_routed_experts * _sum_params(expert_linears(m))
        + _sum_params(shared_expert_linears(m))
    )


def active_ffn_params(m: ModelSpec, layer: int) -> int:
    """FFN weights one token uses in a layer: router + top-k routed + shared experts."""
    if not m.is_moe_layer(layer):
        return _sum_params(dense_ffn_linears(m))
    assert m.moe is not None
    return (
        router_linear(m).params
        + m.moe.num_experts_per_tok * _sum_params(expert_linears(m))
        + _sum_params(shared_expert_linears(m))
    )


def layer_norm_params(m: ModelSpec) -> int:
    """input_layernorm + post_attention_layernorm of one decoder layer."""
    return 2 * m.hidden_size


def layer_params(m: ModelSpec, layer: int) -> int:
    """All weights of decoder layer ``layer``: attention, norms, FFN or MoE (all experts)."""
    return attention_params(m) + layer_norm_params(m) + ffn_params(m, layer)


def non_layer_params(m: ModelSpec) -> int:
    """Weights outside the decoder layers: embedding, LM head (unless tied), final norm."""
    return embedding_params(m) + lm_head_params(m) + m.hidden_size


def param_count(m: ModelSpec) -> int:
    """Every weight of the model: layers, embedding, LM head, norms (see module docstring)."""
    return non_layer_params(m) + sum(layer_params(m, i) for i in range(m.num_hidden_layers))


def active_param_count(m: ModelSpec) -> int:
    """Weights one token touches: all dense weights plus, per MoE layer, router, top-k routed and
    the shared experts. Embedding and LM head included (the convention of the DeepSeek-V3 "37B
    activated" and Qwen3 "22B activated" figures)."""
    per_layer = (
        attention_params(m) + layer_norm_params(m) + active_ffn_params(m, i)
        for i in range(m.num_hidden_layers)
    )
    return non_layer_params(m) + sum(per_layer)


def weight_bytes_per_layer(m: ModelSpec, layer: int, dtype: str | None = None) -> int:
    """Bytes of decoder layer ``layer``'s weights in ``dtype`` (default: m.weight_dtype)."""
    return math.ceil(layer_params(m, layer) * bytes_per_param(dtype or m.weight_dtype))


def non_layer_weight_bytes(m: ModelSpec, dtype: str | None = None) -> int:
    """Bytes of embedding + LM head + final norm in ``dtype`` (default: m.weight_dtype)."""
    return math.ceil(non_layer_params(m) * bytes_per_param(dtype or m.weight_dtype))


def weight_bytes(m: ModelSpec, dtype: str | None = None) -> int:
    """Bytes of the whole model's weights in ``dtype`` (default: the model's weight_dtype)."""
    layers = sum(weight_bytes_per_layer(m, i, dtype) for i in range(m.num_hidden_layers))
    return layers + non_layer_weight_bytes(m, dtype)
