"""Shapes of the weight matrices of one decoder layer, so the mapping layer can shard them.

Names follow the Hugging Face modeling files (modeling_llama.py, modeling_deepseek.py), with the
SwiGLU gate and up projections fused into one ``gate_up`` matrix (as vLLM / SGLang store them).
Biases (Qwen2 q/k/v: < 0.01% of the weights) and norms are not linears and are left out here;
norms are counted in :mod:`ctxplan.model.params`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxplan.model.compressed import COMPRESSOR_OVERLAP
from ctxplan.model.spec import (
    COMPRESSED_LAYER_TYPES,
    COMPRESSED_SPARSE_ATTENTION,
    FULL_ATTENTION,
    INDEXED_ATTENTION,
    LAYER_TYPES,
    LINEAR_ATTENTION,
    ModelSpec,
)

SHARDS = ("col", "row", "replicated")


@dataclass(frozen=True)
class Linear:
    """One weight matrix y = x @ W, W of shape (in_features, out_features)."""

    name: str  # "q_a_proj", "kv_b_proj", "o_proj", "gate_up", "down", ...
    in_features: int  # input width
    out_features: int  # output width
    shard: str  # how TP splits it: "col" (output features split), "row" (input split), "replicated"
    # A grouped (block-diagonal) matrix: input and output in ``groups`` equal slices, slice g of
    # the output from slice g of the input only (DeepSeek-V4's grouped output projection).
    groups: int = 1

    def __post_init__(self) -> None:
        if self.shard not in SHARDS:
            raise ValueError(f"shard must be one of {SHARDS}, got {self.shard!r}")
        if self.in_features <= 0 or self.out_features <= 0:
            raise ValueError(f"{self.name}: features must be > 0")
        if self.groups < 1 or self.in_features % self.groups or self.out_features % self.groups:
            raise ValueError(f"{self.name}: groups must divide in_features and out_features")

    @property
    def params(self) -> int:
        return self.in_features * self.out_features // self.groups

    def flops(self, tokens: float) -> float:
        """Matmul FLOPs for ``tokens`` rows: 2 * in * out per token (one multiply-add = 2)."""
        return 2.0 * self.params * tokens


def attention_linears(m: ModelSpec, layer_type: str = FULL_ATTENTION) -> list[Linear]:
    """Per-layer attention projections of a layer of kind ``layer_type``, in the order they run.

    Softmax kinds (full, sliding, chunked) share the model's attention shape:
    MHA / GQA: q, k, v (col), o (row), as in modeling_llama.py; with ``attention_output_gate``
    q_proj is twice as wide, the second half being the per-head sigmoid gate of the attention
    output (Qwen3-Next ``Qwen3NextAttention``; Qiu et al., arXiv:2505.06708).
    MLA (modeling_deepseek.py, DeepseekV3Attention): q_a_proj (replicated) -> q_b_proj (col), or a
    direct q_proj (col) when q_lora_rank is None; kv_a_proj_with_mqa (replicated) giving the latent
    plus the shared rope key; kv_b_proj (col) up-projecting the latent to per-head k_nope and v;
    o_proj (row). The latent norms (q_a_layernorm, kv_a_layernorm) are not linears.
    indexed_attention (DSA): the MLA linears plus the indexer's (transformers
    ``DeepseekV32Indexer``): indexer_wq_b q_lora -> index_heads * index_dim, indexer_wk
    hidden -> index_dim (one key head for all) and indexer_weights_proj hidden -> index_heads,
    before o_proj. All three are replicated under TP (vLLM's ``Indexer`` builds them as
    ``ReplicatedLinear``): a token's score sums over every indexer head, so splitting the heads
    would need the scores of every (query, key) pair all-reduced; each TP chip scores the rank's
    queries whole instead (docs/mapping.md, "DSA").
    linear_attention (Gated DeltaNet, ``Qwen3NextGatedDeltaNet``): in_proj_qkvz hidden ->
    2 * key_dim + 2 * value_dim (q, k, v and the output gate z; col, heads split as vLLM does),
    in_proj_ba hidden -> 2 * value_heads (beta and the decay's input; col), out_proj value_dim ->
    hidden (row). The depthwise conv1d is not a matmul (:mod:`ctxplan.model.kinds`).
    """
    if layer_type not in LAYER_TYPES:
        raise ValueError(f"unknown layer type {layer_type!r}; known: {LAYER_TYPES}")
    if layer_type == LINEAR_ATTENTION:
        return _linear_attention_linears(m)
    if layer_type in COMPRESSED_LAYER_TYPES:
        return _compressed_attention_linears(m, layer_type)
    h = m.hidden_size
    heads = m.num_attention_heads
    mla = m.mla
    if mla is None:
        gate = 2 if m.attention_output_gate else 1
        return [
            Linear("q_proj", h, heads * m.head_dim * gate, "col"),
            Linear("k_proj", h, m.num_key_value_heads * m.head_dim, "col"),
            Linear("v_proj", h, m.num_key_value_heads * m.head_dim, "col"),
            Linear("o_proj", heads * m.head_dim, h, "row"),
        ]
    q_out = heads * mla.qk_head_dim
    if mla.q_lora_rank is None:
        q = [Linear("q_proj", h, q_out, "col")]
    else:
        q = [
            Linear("q_a_proj", h, mla.q_lora_rank, "replicated"),
            Linear("q_b_proj", mla.q_lora_rank, q_out, "col"),
        ]
    mla_linears = [
        *q,
        Linear("kv_a_proj_with_mqa", h, mla.kv_lora_rank + mla.qk_rope_head_dim, "replicated"),
        Linear(
            "kv_b_proj", mla.kv_lora_rank, heads * (mla.qk_nope_head_dim + mla.v_head_dim), "col"
        ),
    ]
    o_proj = Linear("o_proj", heads * mla.v_head_dim, h, "row")
    if layer_type != INDEXED_ATTENTION:
        return [*mla_linears, o_proj]
    return [*mla_linears, *_indexer_linears(m), o_proj]


def _indexer_linears(m: ModelSpec) -> list[Linear]:
    dsa, mla = m.dsa, m.mla
    if dsa is None or mla is None or mla.q_lora_rank is None:
        raise ValueError(f"model {m.name} has no DSA indexer (needs dsa and MLA with q_lora_rank)")
    h = m.hidden_size
    return [
        Linear("indexer_wq_b", mla.q_lora_rank, dsa.index_n_heads * dsa.index_head_dim,
               "replicated"),
        Linear("indexer_wk", h, dsa.index_head_dim, "replicated"),
        Linear("indexer_weights_proj", h, dsa.index_n_heads, "replicated"),
    ]


def _compressed_attention_linears(m: ModelSpec, layer_type: str) -> list[Linear]:
    """DeepSeek-V4's attention block (sglang / vLLM ``deepseek_v4.py``), in the order it runs:
    wq_a h -> q_lora (replicated) and wq_b q_lora -> heads * d (col); wkv h -> d, the one latent
    (replicated, as MLA's kv_a: every head reads it); in CSA and HCA the compressor's wkv and
    wgate h -> overlap * d (replicated: the entries serve every head; overlap 2 in CSA, whose
    entries pool overlapping windows); in CSA the indexer's wq_b q_lora -> index_heads *
    index_dim and weights_proj h -> index_heads (replicated, as DSA's) and its own compressor
    h -> 2 index_dim twice; then the grouped output: wo_a heads * d -> o_groups * o_lora_rank,
    block-diagonal over the groups (col: a TP rank's heads are whole groups), and wo_b
    o_groups * o_lora_rank -> h (row)."""
    spec = m.compressed_attention
    assert spec is not None  # ModelSpec checks the V4 kinds have it
    h, d = m.hidden_size, m.head_dim
    heads = m.num_attention_heads
    out = [
        Linear("wq_a", h, spec.q_lora_rank, "replicated"),
        Linear("wq_b", spec.q_lora_rank, heads * d, "col"),
        Linear("wkv", h, d, "replicated"),
    ]
    if layer_type in COMPRESSOR_OVERLAP:
        width = COMPRESSOR_OVERLAP[layer_type] * d
        out += [Linear("compressor_wkv", h, width, "replicated"),
                Linear("compressor_wgate", h, width, "replicated")]
    if layer_type == COMPRESSED_SPARSE_ATTENTION:
        dsa = m.dsa
        assert dsa is not None
        width = COMPRESSOR_OVERLAP[layer_type] * dsa.index_head_dim
        out += [
            Linear("indexer_wq_b", spec.q_lora_rank, dsa.index_n_heads * dsa.index_head_dim,
                   "replicated"),
            Linear("indexer_weights_proj", h, dsa.index_n_heads, "replicated"),
            Linear("indexer_compressor_wkv", h, width, "replicated"),
            Linear("indexer_compressor_wgate", h, width, "replicated"),
        ]
    o_width = spec.o_groups * spec.o_lora_rank
    return [*out, Linear("wo_a", heads * d, o_width, "col", groups=spec.o_groups),
            Linear("wo_b", o_width, h, "row")]


def mtp_extra_linears(m: ModelSpec) -> list[Linear]:
    """What a multi-token-prediction layer has besides a decoder block: eh_proj, the projection
    of the concatenated embedding and hidden state, 2h -> h (DeepSeek-V3 / V4 MTP modules; the
    embedding and the LM head are the model's, shared)."""
    h = m.hidden_size
    return [Linear("eh_proj", 2 * h, h, "replicated")]


def _linear_attention_linears(m: ModelSpec) -> list[Linear]:
    la = m.linear_attention
    if la is None:
        raise ValueError(f"model {m.name} has no linear attention spec")
    h = m.hidden_size
    return [
        Linear("in_proj_qkvz", h, 2 * la.key_dim + 2 * la.value_dim, "col"),
        Linear("in_proj_ba", h, 2 * la.linear_num_value_heads, "col"),
        Linear("out_proj", la.value_dim, h, "row"),
    ]


def _swiglu(prefix: str, hidden: int, ffn: int) -> list[Linear]:
    # SwiGLU FFN (Shazeer 2020, arXiv:2002.05202): down(silu(gate(x)) * up(x)); gate, up fused.
    return [
        Linear(f"{prefix}gate_up", hidden, 2 * ffn, "col"),
        Linear(f"{prefix}down", ffn, hidden, "row"),
    ]


def dense_ffn_linears(m: ModelSpec) -> list[Linear]:
    """The dense FFN of a non-MoE layer: gate_up (col, hidden -> 2*ffn), down (row)."""
    return _swiglu("", m.hidden_size, m.intermediate_size)


def _moe(m: ModelSpec) -> tuple[int, int, int]:
    if m.moe is None:
        raise ValueError(f"model {m.name} has no MoE layers")
    return m.moe.n_routed_experts, m.moe.n_shared_experts, m.moe.moe_intermediate_size


def expert_linears(m: ModelSpec) -> list[Linear]:
    """ONE routed expert: gate_up and down with moe_intermediate_size."""
    _, _, width = _moe(m)
    return _swiglu("", m.hidden_size, width)


def shared_expert_linears(m: ModelSpec) -> list[Linear]:
    """All shared experts of a MoE layer as one SwiGLU of width n_shared * moe_intermediate_size
    (how DeepSeek's modeling file builds them); [] when the model has none (Qwen3-MoE)."""
    _, n_shared, width = _moe(m)
    if n_shared == 0:
        return []
    return _swiglu("shared_", m.hidden_size, n_shared * width)


def router_linear(m: ModelSpec) -> Linear:
    """The gate scoring each token against every routed expert: hidden -> n_routed, replicated."""
    n_routed, _, _ = _moe(m)
    return Linear("router", m.hidden_size, n_routed, "replicated")


def embedding_params(m: ModelSpec) -> int:
    """Token embedding table: vocab * hidden."""
    return m.vocab_size * m.hidden_size


def lm_head_params(m: ModelSpec) -> int:
    """Output projection hidden -> vocab; 0 when tied to the embedding."""
    return 0 if m.tie_word_embeddings else m.vocab_size * m.hidden_size


def lm_head_linear(m: ModelSpec) -> Linear:
    """The LM head as a matmul (computed even when its weights are tied to the embedding);
    vocab-parallel under TP, i.e. col."""
    return Linear("lm_head", m.hidden_size, m.vocab_size, "col")
