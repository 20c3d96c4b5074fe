"""Parameter counts and weight bytes.

What is counted: every linear of :mod:`ctxplan.model.linear`, the RMSNorm weights (two per layer,
the MLA latent norms, the final norm), the token embedding and the LM head (unless tied). Not
counted: biases (Qwen2 q/k/v, < 0.01%), Qwen3's per-head q/k norms, DeepSeek's router correction
bias, Qwen2-MoE's shared-expert gate (each < 0.01%), and DeepSeek-V3's MTP module (~14B, used only
for speculative decoding; the published 671B excludes it, HF's 685B includes it).

Besides the linears, each kind of layer has small parameters of its own, counted here: attention
sinks (one logit per head, gpt-oss, DeepSeek-V4), the DSA indexer's key LayerNorm (weight and
bias), a Gated DeltaNet layer's depthwise conv1d (conv_dim x kernel), A_log and dt_bias (one per
value head) and gated RMSNorm (value head dim), and DeepSeek-V4's query and latent norms and its
compressors' position biases (``ape``) and norms. DeepSeek-V4's mHC adds, per sublayer, the
projection of the 4-wide residual stream to its 24 mixing weights with their bias and 3 scales,
and one such head before the final norm.

The multi-token-prediction layers a model carries (``mtp_layer_types``, DeepSeek-V4) are not in
:func:`param_count` (the published totals leave them out: DeepSeek-V3's 671B, V4-Flash's 284B)
but are in :func:`weight_bytes`, since a serving engine loads them: :func:`mtp_param_count`.

Weight bytes use the model's ``weight_dtype`` for every weight except the routed experts, which
use ``expert_weight_dtype`` when it is set (gpt-oss: MXFP4 experts, BF16 elsewhere). Real FP8
checkpoints (DeepSeek-V3) keep embedding, LM head, norms and router in BF16 and add one FP32 scale
per 128x128 block (+0.02%, the ``fp8-block128`` dtype); that adds ~1.9 GB to DeepSeek-V3's
671 GB (0.3%) and is not modelled for a model declared ``fp8``.
"""

from __future__ import annotations

import math

from ctxplan.model import linear
from ctxplan.model.compressed import COMPRESSOR_OVERLAP, compress_ratio, compressor_widths
from ctxplan.model.dtypes import WEIGHT_DTYPES, bytes_per_param
from ctxplan.model.linear import Linear
from ctxplan.model.spec import (
    COMPRESSED_LAYER_TYPES,
    FULL_ATTENTION,
    INDEXED_ATTENTION,
    LINEAR_ATTENTION,
    ModelSpec,
)

# mHC (DeepSeek-V4): per sublayer, (2 + n) n mixing weights from the n-wide stream (24 for n = 4:
# n pre, n post and n x n residual weights), their bias and 3 scales.
MHC_SCALES = 3

__all__ = ["WEIGHT_DTYPES", "bytes_per_param"]  # re-exported: callers import them from here


def _sum_params(linears: list[Linear]) -> int:
    return sum(lin.params for lin in linears)


def attention_params(m: ModelSpec, layer_type: str = FULL_ATTENTION) -> int:
    """Attention weights of one layer of kind ``layer_type``: its linears and its own small
    parameters (MLA latent norms, sinks, indexer key norm, DeltaNet conv / decay / norm)."""
    n = _sum_params(linear.attention_linears(m, layer_type))
    if layer_type in COMPRESSED_LAYER_TYPES:
        return n + _compressed_small_params(m, layer_type)
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


def _compressed_small_params(m: ModelSpec, layer_type: str) -> int:
    """A DeepSeek-V4 layer's parameters besides its linears: the query latent's and the KV
    latent's RMSNorms, a sink logit per head; per compressor its position bias (``ape``, r x
    overlap d) and its RMSNorm (d), in CSA for the indexer's compressor too."""
    spec = m.compressed_attention
    assert spec is not None
    n = spec.q_lora_rank + m.head_dim + m.num_attention_heads
    r = compress_ratio(m, layer_type)
    if r:
        n += sum(r * COMPRESSOR_OVERLAP[layer_type] * d + d
                 for d in compressor_widths(m, layer_type))
    return n


def _moe_ffn_params(m: ModelSpec, experts: int, routed: bool) -> int:
    """A MoE FFN with ``experts`` routed experts counted, its shared experts and, when its
    experts are chosen by a learned gate (``routed``), the router."""
    return ((linear.router_linear(m).params if routed else 0)
            + experts * _sum_params(linear.expert_linears(m))
            + _sum_params(linear.shared_expert_linears(m)))


def ffn_params(m: ModelSpec, layer: int) -> int:
    """FFN weights of one layer: the dense FFN, or router + every routed and shared expert
    (no router in a hash-routed layer: its experts come from a fixed token-id table)."""
    if not m.is_moe_layer(layer):
        return _sum_params(linear.dense_ffn_linears(m))
    assert m.moe is not None
    return _moe_ffn_params(m, m.moe.n_routed_experts, not m.is_hash_routed(layer))


def active_ffn_params(m: ModelSpec, layer: int) -> int:
    """FFN weights one token uses in a layer: router + top-k routed + shared experts."""
    if not m.is_moe_layer(layer):
        return _sum_params(linear.dense_ffn_linears(m))
    assert m.moe is not None
    return _moe_ffn_params(m, m.moe.num_experts_per_tok, not m.is_hash_routed(layer))


def layer_norm_params(m: ModelSpec) -> int:
    """input_layernorm + post_attention_layernorm of one decoder layer, and with mHC
    (hc_mult n > 1) each sublayer's mixing projection of the n-wide stream."""
    return 2 * m.hidden_size + 2 * mhc_params(m)


def mhc_params(m: ModelSpec) -> int:
    """One sublayer's mHC mixing: (2 + n) n weights from the n h-wide stream, their bias and
    the 3 scales (DeepSeek-V4 ``hc_attn_fn`` / ``hc_attn_base`` / ``hc_attn_scale``); 0 for an
    ordinary residual (n = 1)."""
    n = m.hc_mult
    if n == 1:
        return 0
    mix = (2 + n) * n
    return mix * n * m.hidden_size + mix + MHC_SCALES


def layer_params(m: ModelSpec, layer: int) -> int:
    """All weights of decoder layer ``layer``: attention, norms, FFN or MoE (all experts)."""
    return attention_params(m, m.layer_type(layer)) + layer_norm_params(m) + ffn_params(m, layer)


def _mtp_params(m: ModelSpec, experts: int | None) -> int:
    """The MTP layers: each a decoder block of its kind (with the model's MoE FFN, ``experts``
    routed experts of it counted; None: all), eh_proj and three RMSNorms (the embedding's, the
    hidden state's and the block output's); the embedding and the head are shared."""
    total = 0
    for kind in m.mtp_layer_types:
        if m.moe is not None:
            ffn = _moe_ffn_params(m, m.moe.n_routed_experts if experts is None else experts,
                                  True)
        else:
            ffn = _sum_params(linear.dense_ffn_linears(m))
        total += (attention_params(m, kind) + layer_norm_params(m) + ffn
                  + _sum_params(linear.mtp_extra_linears(m)) + 3 * m.hidden_size)
    return total


def mtp_param_count(m: ModelSpec) -> int:
    """Weights of the multi-token-prediction layers the model carries (0 for none)."""
    return _mtp_params(m, None)


def mtp_active_param_count(m: ModelSpec) -> int:
    """Weights one token uses in the MTP layers (a speculative step's draft)."""
    return _mtp_params(m, m.moe.num_experts_per_tok if m.moe is not None else None)


def _mtp_routed_expert_params(m: ModelSpec) -> int:
    if m.moe is None:
        return 0
    return len(m.mtp_layer_types) * m.moe.n_routed_experts * _sum_params(linear.expert_linears(m))


def routed_expert_params(m: ModelSpec, layer: int) -> int:
    """Weights of every routed expert of layer ``layer`` (0 for a dense layer)."""
    if not m.is_moe_layer(layer):
        return 0
    assert m.moe is not None
    return m.moe.n_routed_experts * _sum_params(linear.expert_linears(m))


def non_layer_params(m: ModelSpec) -> int:
    """Weights outside the decoder layers: embedding, LM head (unless tied), final norm, and with
    mHC the head that mixes the n-wide stream back to one (n x n h weights, n biases, a scale)."""
    n = m.hc_mult
    head = 0 if n == 1 else n * n * m.hidden_size + n + 1
    return linear.embedding_params(m) + linear.lm_head_params(m) + m.hidden_size + head


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


def mtp_weight_bytes(m: ModelSpec, dtype: str | None = None) -> int:
    """Bytes of the MTP layers' weights, as :func:`weight_bytes_per_layer` stores a layer's."""
    total = mtp_param_count(m)
    if dtype is not None:
        return math.ceil(total * bytes_per_param(dtype))
    experts = _mtp_routed_expert_params(m)
    expert_dtype = m.expert_weight_dtype or m.weight_dtype
    return math.ceil((total - experts) * bytes_per_param(m.weight_dtype)
                     + experts * bytes_per_param(expert_dtype))


def weight_bytes(m: ModelSpec, dtype: str | None = None) -> int:
    """Bytes of the whole model's weights in ``dtype`` (default: the model's weight_dtype), the
    MTP layers it carries included."""
    layers = sum(weight_bytes_per_layer(m, i, dtype) for i in range(m.num_hidden_layers))
    return layers + non_layer_weight_bytes(m, dtype) + mtp_weight_bytes(m, dtype)
