"""LLM architectures: MHA / GQA / MLA attention, dense / MoE FFN, weight and KV sizes, KV tiers.

Pure arithmetic on frozen dataclasses; loading from YAML / config.json lives in
:mod:`ctxplan.config.model_presets`.
"""

from ctxplan.model.attention import (
    MLA_MODES,
    AttentionDims,
    attention_core_flops,
    attention_dims,
    attention_pair_flops,
    causal_pairs,
    default_mla_mode,
    mla_absorb_flops_per_token,
)
from ctxplan.model.kv import (
    default_kv_tiers,
    kv_bytes_per_token,
    kv_tiers,
    resolve_kv_tier,
)
from ctxplan.model.linear import (
    Linear,
    attention_linears,
    dense_ffn_linears,
    embedding_params,
    expert_linears,
    lm_head_linear,
    lm_head_params,
    router_linear,
    shared_expert_linears,
)
from ctxplan.model.params import (
    WEIGHT_DTYPES,
    active_param_count,
    bytes_per_param,
    layer_params,
    non_layer_weight_bytes,
    param_count,
    weight_bytes,
    weight_bytes_per_layer,
)
from ctxplan.model.spec import MLASpec, ModelSpec, MoESpec

__all__ = [
    "MLA_MODES",
    "WEIGHT_DTYPES",
    "AttentionDims",
    "Linear",
    "MLASpec",
    "MoESpec",
    "ModelSpec",
    "active_param_count",
    "attention_core_flops",
    "attention_dims",
    "attention_linears",
    "attention_pair_flops",
    "bytes_per_param",
    "causal_pairs",
    "default_kv_tiers",
    "default_mla_mode",
    "dense_ffn_linears",
    "embedding_params",
    "expert_linears",
    "kv_bytes_per_token",
    "kv_tiers",
    "layer_params",
    "lm_head_linear",
    "lm_head_params",
    "mla_absorb_flops_per_token",
    "non_layer_weight_bytes",
    "param_count",
    "resolve_kv_tier",
    "router_linear",
    "shared_expert_linears",
    "weight_bytes",
    "weight_bytes_per_layer",
]
