"""Parameter counts and weight bytes.

What is counted: every linear of :mod:`ctxplan.model.linear`, the RMSNorm weights (two per layer,
the MLA latent norms, the final norm), the token embedding and the LM head (unless tied). Not
counted: biases (Qwen2 q/k/v, < 0.01%), Qwen3's per-head q/k norms, DeepSeek's router correction
bias, Qwen2-MoE's shared-expert gate (each < 0.01%), and DeepSeek-V3's MTP module (~14B, used only
for speculative decoding; the published 671B excludes it, HF's 685B includes it).

Besides the linears, each kind of layer has small parameters of its own, counted here: attention
sinks (one logit per head, gpt-oss), the DSA indexer's key LayerNorm (weight and bias), and a
Gated DeltaNet layer's depthwise conv1d (conv_dim x kernel), A_log and dt_bias (one per value
head) and gated RMSNorm (value head dim).

Weight bytes use the model's ``weight_dtype`` for every weight except the routed experts, which
use ``expert_weight_dtype`` when it is set (gpt-oss: MXFP4 experts, BF16 elsewhere). Real FP8
checkpoints (DeepSeek-V3) keep embedding, LM head, norms and router in BF16 and add one FP32 scale
per 128x128 block (+0.02%, the ``fp8-block128`` dtype); that adds ~1.9 GB to DeepSeek-V3's
671 GB (0.3%) and is not modelled for a model declared ``fp8``.
"""

from __future__ import annotations

import math

from ctxplan.model.dtypes import WEIGHT_DTYPES, bytes_per_param
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
from ctxplan.model.spec import (
    FULL_ATTENTION,
    INDEXED_ATTENTION,
    LINEAR_ATTENTION,
    ModelSpec,
)

__all__ = ["WEIGHT_DTYPES", "bytes_per_param"]  # re-exported: callers import them from here


def _sum_params(linears: list[Linear]) -> int:
    return sum(lin.params for lin in linears)


def attention_params(m: ModelSpec, layer_type: str = FULL_ATTENTION) -> int:
    """Attention weights of one layer of kind ``layer_type``: its linears and its own small
    parameters (MLA latent norms, sinks, indexer key norm, DeltaNet conv / decay / norm)."""
    n = _sum_params(attention_linears(m, layer_type))
    if layer_type == LINEAR_ATTENTION:
        la = m.linear_attention
        assert la is not None  # attention_linears checked it
        # conv1d (depthwise, no bias), A_log and dt_bias, the gated RMSNorm over a value head
        return (
            n
            + la.conv_dim * la.linear_conv_kernel_dim
            + 2 * la.linear_num_value_heads
            + la.linear_value_head_dim
        )
    if m.mla is not None:
        # q_a_layernorm and kv_a_layernorm (modeling_deepseek.py)
        n += (m.mla.q_lora_rank or 0) + m.mla.kv_lora_rank
    if m.attention_sinks:
        n += m.num_attention_heads  # one sink logit per head (modeling_gpt_oss.py ``sinks``)
    if layer_type == INDEXED_ATTENTION:
        assert m.dsa is not None
        n += 2 * m.dsa.index_head_dim  # the indexer's k_norm, a LayerNorm with a bias
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
    return attention_params(m, m.layer_type(layer)) + layer_norm_params(m) + ffn_params(m, layer)


def routed_expert_params(m: ModelSpec, layer: int) -> int:
    """Weights of every routed expert of layer ``layer`` (0 for a dense layer)."""
    if not m.is_moe_layer(layer):
        return 0
    assert m.moe is not None
    return m.moe.n_routed_experts * _sum_params(expert_linears(m))


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
        attention_params(m, m.layer_type(i)) + layer_norm_params(m) + active_ffn_params(m, i)
        for i in range(m.num_hidden_layers)
    )
    return non_layer_params(m) + sum(per_layer)


def weight_bytes_per_layer(m: ModelSpec, layer: int, dtype: str | None = None) -> int:
    """Bytes of decoder layer ``layer``'s weights: every weight in ``dtype`` when given, else
    the routed experts in the model's expert dtype and the rest in ``m.weight_dtype``."""
    if dtype is not None:
        return math.ceil(layer_params(m, layer) * bytes_per_param(dtype))
    experts = routed_expert_params(m, layer)
    rest = layer_params(m, layer) - experts
    expert_dtype = m.expert_weight_dtype or m.weight_dtype
    return math.ceil(
        rest * bytes_per_param(m.weight_dtype) + experts * bytes_per_param(expert_dtype)
    )


def non_layer_weight_bytes(m: ModelSpec, dtype: str | None = None) -> int:
    """Bytes of embedding + LM head + final norm in ``dtype`` (default: m.weight_dtype)."""
    return math.ceil(non_layer_params(m) * bytes_per_param(dtype or m.weight_dtype))


def weight_bytes(m: ModelSpec, dtype: str | None = None) -> int:
    """Bytes of the whole model's weights in ``dtype`` (default: the model's weight_dtype)."""
    layers = sum(weight_bytes_per_layer(m, i, dtype) for i in range(m.num_hidden_layers))
    return layers + non_layer_weight_bytes(m, dtype)
