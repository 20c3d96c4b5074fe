"""Pydantic schemas for model definitions: ctxplan's model YAML and Hugging Face config.json.

Our YAML uses the config.json field names (DeepSeek's names for MLA and MoE) plus ``name``,
``source`` and ``weight_dtype``, and every field means what it means in config.json. It is
strict: unknown keys are refused, sizes are integers > 0. A config.json is read leniently: keys
ctxplan does not model (rope_scaling, auto_map, token ids, ...) are ignored.
Cross-field rules (heads divisible by KV heads, MLA / MoE / linear-attention / DSA fields
all-or-none, each layer kind with its parameters) are checked in
:mod:`ctxplan.config.model_build`, which names the offending field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

# Bounds far above any real model keep absurd sizes from turning into hours of arithmetic (the
# per-layer sums run over num_hidden_layers) or overflowing floats.
MAX_LAYERS = 10_000
MAX_SIZE = 2**31
PosInt = Annotated[int, Field(strict=True, gt=0, le=MAX_SIZE)]
Layers = Annotated[int, Field(strict=True, gt=0, le=MAX_LAYERS)]
NonNegInt = Annotated[int, Field(strict=True, ge=0, le=MAX_SIZE)]
Name = Annotated[str, Field(strict=True, min_length=1, max_length=200)]
Source = Annotated[str, Field(strict=True, min_length=1, max_length=2000)]
# Storage dtypes of weights (ctxplan.model.dtypes.WEIGHT_DTYPES; a test checks they agree).
WeightDtype = Literal["bf16", "fp16", "fp8", "fp8-block128", "mxfp4", "nvfp4", "fp32", "int8",
                      "int4"]
StateDtype = Literal["bf16", "fp16", "fp32", "fp8"]  # a linear-attention state (bytes_per_value)
# Attention kinds of a layer (ctxplan.model.spec.LAYER_TYPES; a test checks they agree).
LayerType = Literal["full_attention", "sliding_attention", "chunked_attention",
                    "linear_attention", "indexed_attention", "window_attention",
                    "compressed_sparse_attention", "heavily_compressed_attention"]
PosNumber = Annotated[StrictInt | StrictFloat, Field(gt=0, le=MAX_SIZE)]


class RopeScalingFile(BaseModel):
    """config.json's ``rope_scaling``: ctxplan reads the factor and the original context length
    (the model's limit is max(max_position_embeddings, factor x original)); the method's other
    keys (type, beta_fast, mscale, ...) are accepted as config.json writes them and ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    factor: PosNumber | None = None
    original_max_position_embeddings: PosInt | None = None


class _ContextFields(BaseModel):
    """The trained context (docs/model.md, "Context beyond the model")."""

    max_position_embeddings: PosInt | None = None
    rope_scaling: RopeScalingFile | None = None


class _CompressedFields(BaseModel):
    """DeepSeek-V4's fields, named as its config.json names them (docs/model.md,
    "DeepSeek-V4"): one compress ratio per layer and per MTP layer (0 window only, the smaller
    nonzero ratio CSA, the larger HCA), the grouped output projection, mHC's stream width and
    the hash-routed first layers."""

    compress_ratios: list[Annotated[int, Field(strict=True, ge=0, le=MAX_SIZE)]] | None = None
    o_groups: PosInt | None = None
    o_lora_rank: PosInt | None = None
    hc_mult: PosInt | None = None
    num_hash_layers: NonNegInt | None = None
    num_nextn_predict_layers: NonNegInt | None = None


class _SharedFields(BaseModel):
    """The blocks our YAML states with config.json's names: DeepSeek's MLA (all of
    kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, or none), its MoE block (all
    of n_routed_experts, num_experts_per_tok, moe_intermediate_size, or none) and DSA's
    lightning indexer (DeepSeek-V3.2: all three, or none); Qwen3-Next's Gated DeltaNet (all
    five, or none)."""

    q_lora_rank: PosInt | None = None  # None: query projected directly
    kv_lora_rank: PosInt | None = None
    qk_nope_head_dim: PosInt | None = None
    qk_rope_head_dim: PosInt | None = None
    v_head_dim: PosInt | None = None
    n_routed_experts: PosInt | None = None
    n_shared_experts: NonNegInt | None = None
    num_experts_per_tok: PosInt | None = None
    moe_intermediate_size: PosInt | None = None
    index_n_heads: PosInt | None = None
    index_head_dim: PosInt | None = None
    index_topk: PosInt | None = None
    linear_num_key_heads: PosInt | None = None
    linear_num_value_heads: PosInt | None = None
    linear_key_head_dim: PosInt | None = None
    linear_value_head_dim: PosInt | None = None
    linear_conv_kernel_dim: PosInt | None = None


class ModelFile(_ContextFields, _CompressedFields, _SharedFields):
    """A ctxplan model definition (a preset YAML, a user's YAML, or an inline study mapping)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name  # short name, e.g. "deepseek-v3"
    source: Source | None = None  # where the figures come from (model card, config.json, paper)
    weight_dtype: WeightDtype  # dtype of the weights as served
    num_hidden_layers: Layers  # decoder layers
    hidden_size: PosInt  # model width
    num_attention_heads: PosInt  # query heads
    num_key_value_heads: PosInt | None = None  # KV heads; absent: = num_attention_heads (MHA)
    head_dim: PosInt | None = None  # per-head width; absent: hidden_size / num_attention_heads
    intermediate_size: PosInt  # dense FFN width
    vocab_size: PosInt  # vocabulary
    tie_word_embeddings: StrictBool = False  # LM head shares the embedding
    # MoE (_SharedFields): a layer i is MoE when i >= first_k_dense_replace and
    # i % moe_layer_freq == 0 (config.json).
    first_k_dense_replace: NonNegInt = 0
    moe_layer_freq: PosInt = 1
    expert_weight_dtype: WeightDtype | None = None  # routed experts, when not weight_dtype
    # Attention kind per layer (docs/model.md, "Attention kinds"): one of
    #   layer_types    one kind per layer, as config.json's layer_types;
    #   layer_pattern  kinds repeated from layer 0 and cut at num_hidden_layers
    #                  (Qwen3-Next: [linear_attention] * 3 + [full_attention]).
    # Neither: every layer full attention.
    layer_types: list[LayerType] | None = None
    layer_pattern: list[LayerType] | None = None
    sliding_window: PosInt | None = None  # sliding_attention: keys a query sees, itself included
    attention_chunk_size: PosInt | None = None  # chunked_attention: tokens per chunk
    attention_sinks: StrictBool = False  # a learned sink logit per head (gpt-oss)
    attention_output_gate: StrictBool = False  # q_proj also gives a sigmoid output gate
    linear_state_dtype: StateDtype = "bf16"  # dtype the recurrent states are cached in


class HFConfig(_ContextFields, _CompressedFields, _SharedFields):
    """The fields of a Hugging Face config.json that ctxplan reads; the rest is ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    model_type: StrictStr | None = None
    architectures: list[StrictStr] | None = None
    # optional ctxplan overrides a user may add to a pasted config
    name: Name | None = None
    source: Source | None = None
    weight_dtype: WeightDtype | None = None
    # dtype as shipped: torch_dtype (transformers < 4.56) or dtype (newer)
    torch_dtype: StrictStr | None = None
    dtype: StrictStr | None = None
    quantization_config: dict[str, Any] | None = None
    # every supported family
    num_hidden_layers: Layers
    hidden_size: PosInt
    num_attention_heads: PosInt
    num_key_value_heads: PosInt | None = None
    head_dim: PosInt | None = None
    intermediate_size: PosInt | None = None  # a family without dense layers may omit it (V4)
    vocab_size: PosInt
    tie_word_embeddings: StrictBool = False  # the default of every supported config class
    # transformers >= 5 writes rope_scaling as rope_parameters
    rope_parameters: RopeScalingFile | None = None
    expert_dtype: StrictStr | None = None    # DeepSeek-V4: the routed experts' format ("fp4")
    # DeepSeek-V2 / V3: DeepSeekMoE's layer pattern (MLA and the MoE block: _SharedFields)
    first_k_dense_replace: NonNegInt | None = None
    moe_layer_freq: PosInt | None = None
    # Qwen2-MoE / Qwen3-MoE
    num_experts: NonNegInt | None = None
    decoder_sparse_step: PosInt | None = None
    mlp_only_layers: list[NonNegInt] | None = None
    shared_expert_intermediate_size: NonNegInt | None = None
    # Mixtral, gpt-oss, Llama 4
    num_local_experts: NonNegInt | None = None
    # Attention kinds per layer (the families' rules are in hf_config.py)
    layer_types: list[StrictStr] | None = None  # gpt-oss, and newer configs of every family
    sliding_window: PosInt | None = None  # gpt-oss, Gemma 3, Mistral, Qwen2/3 (when used)
    use_sliding_window: StrictBool | None = None  # Qwen2 / Qwen3: sliding_window applies
    max_window_layers: NonNegInt | None = None  # Qwen2 / Qwen3: the first layers stay full
    sliding_window_pattern: PosInt | None = None  # Gemma 3: every n-th layer is global
    attention_chunk_size: PosInt | None = None  # Llama 4
    no_rope_layers: list[NonNegInt] | None = None  # Llama 4: 0 = NoPE (global) layer
    # gpt-oss
    experts_per_token: PosInt | None = None  # GptOssConfig's other name of num_experts_per_tok
    # Llama 4
    intermediate_size_mlp: PosInt | None = None  # width of the dense layers' FFN
    moe_layers: list[NonNegInt] | None = None
    interleave_moe_layer_step: PosInt | None = None
    # Qwen3-Next: Gated DeltaNet layers, a full attention layer every full_attention_interval
    full_attention_interval: PosInt | None = None   # (the DeltaNet fields: _SharedFields)
