"""The new families as ModelSpecs, written by hand from the fixtures in tests/data/hf-configs.

These are the expected values the Hugging Face translators (stage 2 of issue 16) must reproduce
from the fixture files; test_model_families.py checks every number here against its fixture,
and the parameter counts against the publishers' totals.
"""

from __future__ import annotations

import dataclasses

from ctxplan.model import (
    CompressedAttentionSpec,
    DSASpec,
    LinearAttentionSpec,
    MLASpec,
    ModelSpec,
    MoESpec,
)
from ctxplan.model.spec import (
    CHUNKED_ATTENTION,
    COMPRESSED_SPARSE_ATTENTION,
    FULL_ATTENTION,
    HEAVILY_COMPRESSED_ATTENTION,
    INDEXED_ATTENTION,
    LINEAR_ATTENTION,
    SLIDING_ATTENTION,
    WINDOW_ATTENTION,
)


def every_kth(n_layers: int, k: int, on_kth: str, otherwise: str) -> tuple[str, ...]:
    """Layer i gets ``on_kth`` when (i + 1) % k == 0 (the rule of gpt-oss, Gemma 3, Llama 4
    and Qwen3-Next's configuration classes), ``otherwise`` else."""
    return tuple(on_kth if (i + 1) % k == 0 else otherwise for i in range(n_layers))


def _gpt_oss(name: str, layers: int, experts: int) -> ModelSpec:
    return ModelSpec(
        name=name,
        num_hidden_layers=layers,
        hidden_size=2880,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=64,
        intermediate_size=2880,
        vocab_size=201088,
        tie_word_embeddings=False,
        mla=None,
        moe=MoESpec(
            n_routed_experts=experts,
            n_shared_experts=0,
            num_experts_per_tok=4,
            moe_intermediate_size=2880,
            first_k_dense_replace=0,
        ),
        weight_dtype="bf16",
        expert_weight_dtype="mxfp4",  # mxfp4 except attention, router, embeddings (config.json)
        source=f"tests/data/hf-configs/openai--{name}.json",
        layer_types=every_kth(layers, 2, FULL_ATTENTION, SLIDING_ATTENTION),
        sliding_window=128,
        attention_sinks=True,
    )


GPT_OSS_120B = _gpt_oss("gpt-oss-120b", 36, 128)
GPT_OSS_20B = _gpt_oss("gpt-oss-20b", 24, 32)

_DEEPSEEK_MLA = MLASpec(
    q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128
)

KIMI_K2 = ModelSpec(
    name="kimi-k2",
    num_hidden_layers=61,
    hidden_size=7168,
    num_attention_heads=64,
    num_key_value_heads=64,
    head_dim=112,  # unused by MLA; hidden / heads, as every MLA config without head_dim reads
    intermediate_size=18432,
    vocab_size=163840,
    tie_word_embeddings=False,
    mla=_DEEPSEEK_MLA,
    moe=MoESpec(
        n_routed_experts=384,
        n_shared_experts=1,
        num_experts_per_tok=8,
        moe_intermediate_size=2048,
        first_k_dense_replace=1,
    ),
    weight_dtype="fp8-block128",
    source="tests/data/hf-configs/moonshotai--Kimi-K2-Instruct.json",
)

DEEPSEEK_V32 = ModelSpec(
    name="deepseek-v3.2",
    num_hidden_layers=61,
    hidden_size=7168,
    num_attention_heads=128,
    num_key_value_heads=128,
    head_dim=56,  # unused by MLA; hidden / heads, as the deepseek-v3 preset
    intermediate_size=18432,
    vocab_size=129280,
    tie_word_embeddings=False,
    mla=_DEEPSEEK_MLA,
    moe=MoESpec(
        n_routed_experts=256,
        n_shared_experts=1,
        num_experts_per_tok=8,
        moe_intermediate_size=2048,
        first_k_dense_replace=3,
    ),
    weight_dtype="fp8-block128",
    source="tests/data/hf-configs/deepseek-ai--DeepSeek-V3.2-Exp.json",
    layer_types=(INDEXED_ATTENTION,) * 61,
    dsa=DSASpec(index_n_heads=64, index_head_dim=128, index_topk=2048),
)

GLM_45 = ModelSpec(
    name="glm-4.5",
    num_hidden_layers=92,
    hidden_size=5120,
    num_attention_heads=96,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=12288,
    vocab_size=151552,
    tie_word_embeddings=False,
    mla=None,
    moe=MoESpec(
        n_routed_experts=160,
        n_shared_experts=1,
        num_experts_per_tok=8,
        moe_intermediate_size=1536,
        first_k_dense_replace=3,
    ),
    weight_dtype="bf16",
    source="tests/data/hf-configs/zai-org--GLM-4.5.json",
)

QWEN3_NEXT = ModelSpec(
    name="qwen3-next-80b-a3b",
    num_hidden_layers=48,
    hidden_size=2048,
    num_attention_heads=16,
    num_key_value_heads=2,
    head_dim=256,
    intermediate_size=5120,
    vocab_size=151936,
    tie_word_embeddings=False,
    mla=None,
    moe=MoESpec(
        n_routed_experts=512,
        n_shared_experts=1,  # shared_expert_intermediate_size 512 = one expert's width
        num_experts_per_tok=10,
        moe_intermediate_size=512,
        first_k_dense_replace=0,
    ),
    weight_dtype="bf16",
    source="tests/data/hf-configs/Qwen--Qwen3-Next-80B-A3B-Instruct.json",
    layer_types=every_kth(48, 4, FULL_ATTENTION, LINEAR_ATTENTION),
    attention_output_gate=True,
    linear_attention=LinearAttentionSpec(
        linear_num_key_heads=16,
        linear_num_value_heads=32,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel_dim=4,
    ),
)

GEMMA3_27B = ModelSpec(
    name="gemma-3-27b",
    num_hidden_layers=62,
    hidden_size=5376,
    num_attention_heads=32,
    num_key_value_heads=16,
    head_dim=128,
    intermediate_size=21504,
    vocab_size=262208,
    tie_word_embeddings=True,
    mla=None,
    moe=None,
    weight_dtype="bf16",
    source="tests/data/hf-configs/google--gemma-3-27b-it.json",
    layer_types=every_kth(62, 6, FULL_ATTENTION, SLIDING_ATTENTION),
    sliding_window=1024,
)

LLAMA4_SCOUT = ModelSpec(
    name="llama-4-scout",
    num_hidden_layers=48,
    hidden_size=5120,
    num_attention_heads=40,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=16384,  # HF intermediate_size_mlp (dense layers); experts use 8192
    vocab_size=202048,
    tie_word_embeddings=False,
    mla=None,
    moe=MoESpec(
        n_routed_experts=16,
        n_shared_experts=1,
        num_experts_per_tok=1,
        moe_intermediate_size=8192,
        first_k_dense_replace=0,
    ),
    weight_dtype="bf16",
    source="tests/data/hf-configs/meta-llama--Llama-4-Scout-17B-16E-Instruct.json",
    layer_types=every_kth(48, 4, FULL_ATTENTION, CHUNKED_ATTENTION),
    attention_chunk_size=8192,
)

LLAMA4_MAVERICK = dataclasses.replace(
    LLAMA4_SCOUT,
    name="llama-4-maverick",
    moe=MoESpec(
        n_routed_experts=128,
        n_shared_experts=1,
        num_experts_per_tok=1,
        moe_intermediate_size=8192,
        first_k_dense_replace=1,  # moe_layers 1, 3, 5, ... (interleave_moe_layer_step 2)
        moe_layer_freq=2,
    ),
    source="tests/data/hf-configs/meta-llama--Llama-4-Maverick-17B-128E-Instruct.json",
)


def _deepseek_v4(name: str, repo: str, layers: int, hidden: int, heads: int, q_lora: int,
                 groups: int, experts: int, width: int, topk: int, first: str) -> ModelSpec:
    """DeepSeek-V4 from its config.json: compress_ratios gives layers 0-1 ``first``, then CSA
    (ratio 4) and HCA (128) alternating, and the MTP layer window only (ratio 0)."""
    alternating = tuple(COMPRESSED_SPARSE_ATTENTION if i % 2 == 0 else
                        HEAVILY_COMPRESSED_ATTENTION for i in range(layers - 2))
    return ModelSpec(
        name=name, num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
        num_key_value_heads=1, head_dim=512,
        intermediate_size=width,  # no dense layer: the experts' width
        vocab_size=129280, tie_word_embeddings=False, mla=None,
        moe=MoESpec(n_routed_experts=experts, n_shared_experts=1, num_experts_per_tok=6,
                    moe_intermediate_size=width, first_k_dense_replace=0),
        weight_dtype="fp8-block128", expert_weight_dtype="mxfp4",  # expert_dtype fp4
        source=f"tests/data/hf-configs/deepseek-ai--{repo}.json",
        layer_types=(first, first, *alternating), sliding_window=128, attention_sinks=True,
        dsa=DSASpec(index_n_heads=64, index_head_dim=128, index_topk=topk),
        compressed_attention=CompressedAttentionSpec(
            q_lora_rank=q_lora, qk_rope_head_dim=64, o_groups=groups, o_lora_rank=1024),
        hc_mult=4, num_hash_layers=3, mtp_layer_types=(WINDOW_ATTENTION,),
    )


DEEPSEEK_V4_PRO = _deepseek_v4("deepseek-v4-pro", "DeepSeek-V4-Pro", 61, 7168, 128, 1536, 16,
                               384, 3072, 1024, HEAVILY_COMPRESSED_ATTENTION)
DEEPSEEK_V4_FLASH = _deepseek_v4("deepseek-v4-flash", "DeepSeek-V4-Flash", 43, 4096, 64, 1024, 8,
                                 256, 2048, 512, WINDOW_ATTENTION)

# The trained context each config.json states: (max_position_embeddings, rope_scaling factor,
# original_max_position_embeddings); Gemma 3's max_position_embeddings is Gemma3TextConfig's
# default (131,072), its linear rope scaling has no original length.
_TRAINED = {
    "gpt-oss-120b": (131072, 32.0, 4096), "gpt-oss-20b": (131072, 32.0, 4096),
    "kimi-k2": (131072, 32.0, 4096), "deepseek-v3.2": (163840, 40.0, 4096),
    "glm-4.5": (131072, None, None), "qwen3-next-80b-a3b": (262144, None, None),
    "gemma-3-27b": (131072, 8.0, None), "llama-4-scout": (10485760, 16.0, 8192),
    "llama-4-maverick": (1048576, None, None),
    "deepseek-v4-pro": (1048576, 16.0, 65536), "deepseek-v4-flash": (1048576, 16.0, 65536),
}

FAMILIES = {
    m.name: dataclasses.replace(
        m, max_position_embeddings=_TRAINED[m.name][0], rope_scaling_factor=_TRAINED[m.name][1],
        original_max_position_embeddings=_TRAINED[m.name][2])
    for m in (
        GPT_OSS_120B,
        GPT_OSS_20B,
        KIMI_K2,
        DEEPSEEK_V32,
        GLM_45,
        QWEN3_NEXT,
        GEMMA3_27B,
        LLAMA4_SCOUT,
        LLAMA4_MAVERICK,
        DEEPSEEK_V4_PRO,
        DEEPSEEK_V4_FLASH,
    )
}
