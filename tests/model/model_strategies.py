"""Hypothesis strategies for random, valid model specs (shared by the tests/model files)."""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from ctxplan.model import (
    CHUNKED_ATTENTION,
    COMPRESSED_LAYER_TYPES,
    FULL_ATTENTION,
    INDEXED_ATTENTION,
    LINEAR_ATTENTION,
    SLIDING_ATTENTION,
    CompressedAttentionSpec,
    DSASpec,
    LinearAttentionSpec,
    MLASpec,
    ModelSpec,
    MoESpec,
)


@st.composite
def model_specs(draw: st.DrawFn) -> ModelSpec:
    layers = draw(st.integers(1, 96))
    kv_heads = draw(st.integers(1, 16))
    heads = kv_heads * draw(st.integers(1, 16))
    head_dim = draw(st.sampled_from([32, 64, 80, 128, 256]))
    hidden = heads * head_dim
    mla = None
    if draw(st.booleans()):
        mla = MLASpec(
            q_lora_rank=draw(st.none() | st.integers(1, 3072)),
            kv_lora_rank=draw(st.integers(1, 1024)),
            qk_nope_head_dim=draw(st.integers(1, 256)),
            qk_rope_head_dim=draw(st.integers(1, 128)),
            v_head_dim=draw(st.integers(1, 256)),
        )
        kv_heads = heads
    moe = None
    if draw(st.booleans()):
        n_routed = draw(st.integers(1, 512))
        moe = MoESpec(
            n_routed_experts=n_routed,
            n_shared_experts=draw(st.integers(0, 4)),
            num_experts_per_tok=draw(st.integers(1, n_routed)),
            moe_intermediate_size=draw(st.integers(1, 8192)),
            first_k_dense_replace=draw(st.integers(0, layers - 1)),
            moe_layer_freq=draw(st.integers(1, 4)),
        )
    return ModelSpec(
        name="random",
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=draw(st.integers(1, 65536)),
        vocab_size=draw(st.integers(1, 262144)),
        tie_word_embeddings=draw(st.booleans()),
        mla=mla,
        moe=moe,
        weight_dtype=draw(st.sampled_from(["bf16", "fp8", "fp16", "fp32", "int8", "int4"])),
        source="hypothesis",
    )


# The kinds a hybrid model (below) mixes; DeepSeek-V4's have a strategy of their own.
HYBRID_LAYER_TYPES = (FULL_ATTENTION, SLIDING_ATTENTION, CHUNKED_ATTENTION, LINEAR_ATTENTION,
                      INDEXED_ATTENTION)


@st.composite
def hybrid_model_specs(draw: st.DrawFn) -> ModelSpec:
    """A random valid model whose layers mix attention kinds (DSA only over MLA with a
    q_lora_rank, as the spec requires)."""
    base = draw(model_specs())
    kinds = [FULL_ATTENTION, SLIDING_ATTENTION, CHUNKED_ATTENTION, LINEAR_ATTENTION]
    if base.mla is not None and base.mla.q_lora_rank is not None:
        kinds.append(INDEXED_ATTENTION)
    n = base.num_hidden_layers
    types = tuple(draw(st.lists(st.sampled_from(kinds), min_size=n, max_size=n)))
    k_heads = draw(st.integers(1, 8))
    return dataclasses.replace(
        base,
        layer_types=types,
        sliding_window=draw(st.integers(1, 4096)),
        attention_chunk_size=draw(st.integers(1, 8192)),
        attention_sinks=draw(st.booleans()),
        linear_attention=LinearAttentionSpec(
            linear_num_key_heads=k_heads,
            linear_num_value_heads=k_heads * draw(st.integers(1, 4)),
            linear_key_head_dim=draw(st.sampled_from([64, 128])),
            linear_value_head_dim=draw(st.sampled_from([64, 128])),
            linear_conv_kernel_dim=draw(st.integers(1, 4)),
            state_dtype=draw(st.sampled_from(["bf16", "fp32"])),
        ),
        dsa=DSASpec(
            index_n_heads=draw(st.integers(1, 64)),
            index_head_dim=draw(st.sampled_from([64, 128, 192])),
            index_topk=draw(st.integers(1, 4096)),
        ),
    )


@st.composite
def compressed_model_specs(draw: st.DrawFn) -> ModelSpec:
    """A random valid DeepSeek-V4-like model: its three kinds mixed, random ratios, window,
    indexer and output groups."""
    base = draw(model_specs())
    n = base.num_hidden_layers
    types = tuple(draw(st.lists(st.sampled_from(COMPRESSED_LAYER_TYPES), min_size=n,
                                max_size=n)))
    heads = draw(st.integers(1, 32))
    head_dim = draw(st.sampled_from([128, 256, 512]))
    groups = draw(st.sampled_from([g for g in (1, 2, 4, 8, 16) if (heads * head_dim) % g == 0]))
    csa = draw(st.integers(1, 16))
    return dataclasses.replace(
        base, mla=None, num_attention_heads=heads, num_key_value_heads=1, head_dim=head_dim,
        layer_types=types, sliding_window=draw(st.integers(1, 512)), attention_sinks=True,
        compressed_attention=CompressedAttentionSpec(
            q_lora_rank=draw(st.integers(1, 2048)), qk_rope_head_dim=draw(st.integers(1, 64)),
            o_groups=groups, o_lora_rank=draw(st.integers(1, 1024)) * groups,
            csa_compress_ratio=csa, hca_compress_ratio=draw(st.integers(csa + 1, 256))),
        dsa=DSASpec(index_n_heads=draw(st.integers(1, 64)),
                    index_head_dim=draw(st.sampled_from([64, 128])),
                    index_topk=draw(st.integers(1, 4096))),
        mtp_layer_types=draw(st.sampled_from([(), (COMPRESSED_LAYER_TYPES[0],)])),
    )
