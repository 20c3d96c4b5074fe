"""Hypothesis strategies for random, valid model specs (shared by the tests/model files)."""

from __future__ import annotations

from hypothesis import strategies as st

from ctxplan.model import MLASpec, ModelSpec, MoESpec


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
