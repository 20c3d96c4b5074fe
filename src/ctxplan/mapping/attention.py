"""The attention half's per-chip shapes under one layout, shared by both phases' emitters.

Only shapes and compute work live here; how queries and KV move between chips (pass-KV in
prefill, pass-Q in decode) stays in each phase's own module.

Absorbed MLA (DeepSeek-V2/V3's decode trick) folds kv_b_proj into the query and the output:
W_UK (the k_nope half of kv_b_proj) multiplies q_nope before attention, and W_UV (the v half)
multiplies the latent-space attention output after it. Both halves are weights read from HBM
every step (16.8 M parameters per layer in DeepSeek-V3, split over the TP group), so each is a
matmul with its weight bytes: W_UK in the query projection op, W_UV in the output projection op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxplan.mapping import ops
from ctxplan.mapping.builder import Work
from ctxplan.mapping.layout import Layout, kv_bytes_per_chip_token
from ctxplan.model.attention import AttentionDims, attention_dims, attention_pair_flops
from ctxplan.model.compressed import entry_bytes
from ctxplan.model.dtypes import bytes_per_param
from ctxplan.model.linear import Linear, attention_linears
from ctxplan.model.spec import ModelSpec

# The projections after attention: o_proj, or DeepSeek-V4's grouped low-rank wo_a then wo_b.
OUTPUT_LINEARS = ("o_proj", "wo_a", "wo_b")


@dataclass(frozen=True)
class AbsorbedHalf:
    """One half of kv_b_proj applied per query token in absorbed MLA, on one TP chip:
    ``heads`` batched GEMMs of (tokens x in_dim) @ (in_dim x out_dim)."""

    heads: int
    in_dim: int
    out_dim: int

    def work(self, tokens: Any, lay: Layout) -> Work:
        """FLOPs 2 * heads * in * out per token; bytes: the weights once in their storage dtype
        (the attention weights', as linear_work reads every projection) plus input and output;
        the peak of that dtype's matmul dtype (``Precision.matmul_dtype``)."""
        w = lay.precision.attention_weights
        act = lay.precision.activation_bytes
        params = self.heads * self.in_dim * self.out_dim
        return Work("matmul", 2.0 * params * tokens,
                    params * bytes_per_param(w)
                    + tokens * self.heads * (self.in_dim + self.out_dim) * act,
                    lay.precision.matmul_dtype(w), m_rows=tokens)


@dataclass(frozen=True)
class AttentionShapes:
    dims: AttentionDims      # as the attention kernel sees it (MLA: per mode)
    heads: int               # query heads on one TP chip
    pair_flops: float        # FLOPs per (query, key) pair on one TP chip
    c_chip: int              # KV bytes per token per layer one TP chip holds
    standard_mla: bool       # MLA attending on up-projected K / V (kv_b_proj per KV token)
    pre: list[Linear]        # projections before attention (kv_b_proj only in standard MLA)
    o_proj: list[Linear]
    kv_b: list[Linear]       # MLA's up-projection of the latent ([] otherwise)
    absorb_k: AbsorbedHalf | None   # absorbed MLA: W_UK on q_nope (before attention)
    absorb_v: AbsorbedHalf | None   # absorbed MLA: W_UV on the latent output (after)
    q_per_kv: int = 1        # query heads sharing one KV head on a chip (absorbed MLA: all)
    head_dim: float = 0.0    # the kernel's head dim: (qk + v) / 2, FLOPs per pair and head / 4
    rope_width: int = 0      # query and key columns rotated per token on one TP chip
    latent_norms: tuple[int, ...] = ()   # MLA: the widths of the q_a and kv_a latent norms

    def projection(self, m: ModelSpec, tokens: Any, lay: Layout) -> list[Work]:
        """The kernels before attention, for ``tokens`` tokens on one TP chip (docs/mapping.md,
        "What a layer launches"): residual add + norm; the q / kv projections, one GEMM per
        group of linears reading one input (``ops.linear_kernels``); MLA's two latent norms;
        RoPE; the KV-cache write; (absorbed MLA) W_UK on q_nope."""
        w = lay.precision.attention_weights
        parts = [ops.residual_work(m, tokens, lay)]
        for kernel in ops.linear_kernels(self.pre):
            parts.append(ops.linear_work(kernel, tokens, lay, w))
        # MLA's q_a_layernorm and kv_a_layernorm: two RMSNorm kernels (modeling_deepseek.py).
        parts += [ops.norm_work(width, tokens, lay, passes=2) for width in self.latent_norms]
        parts.append(ops.rope_work(self.rope_width, tokens, lay))
        parts.append(ops.cache_write_work(self.c_chip, tokens, lay))
        if self.absorb_k is not None:
            parts.append(self.absorb_k.work(tokens, lay))
        return parts

    def output(self, tokens: Any, lay: Layout) -> list[Work]:
        """(Absorbed MLA) W_UV on the latent output, then o_proj, for ``tokens`` tokens."""
        parts = [] if self.absorb_v is None else [self.absorb_v.work(tokens, lay)]
        parts.append(ops.linear_work(self.o_proj, tokens, lay, lay.precision.attention_weights))
        return parts


def attention_shapes(m: ModelSpec, lay: Layout, layer_type: str) -> AttentionShapes:
    """Shapes of a softmax layer of kind ``layer_type`` (full, windowed, DSA: the projections
    differ, DSA adding its indexer's)."""
    mla_mode = lay.mla_mode or "standard"
    standard_mla = m.mla is not None and mla_mode == "standard"
    linears = attention_linears(m, layer_type)
    dims = attention_dims(m, mla_mode)
    heads = dims.q_heads // lay.tp
    absorb_k = absorb_v = None
    if m.mla is not None and not standard_mla:
        mla = m.mla
        absorb_k = AbsorbedHalf(heads, mla.qk_nope_head_dim, mla.kv_lora_rank)
        absorb_v = AbsorbedHalf(heads, mla.kv_lora_rank, mla.v_head_dim)
    # DeepSeek-V4 keeps one 584-B entry per cached token or compressed entry, whole on every TP
    # chip (MQA: TP replicates it); its tier (c_kv) is a CSA layer's bytes per compressed entry.
    c_chip = (entry_bytes(m) if m.compressed_attention is not None
              else kv_bytes_per_chip_token(m, lay))
    spec = m.compressed_attention
    if m.mla is not None:
        mla = m.mla
        rope_width = (heads + 1) * mla.qk_rope_head_dim   # q_pe per head and the shared k_pe
        latent_norms = ((mla.q_lora_rank,) if mla.q_lora_rank else ()) + (mla.kv_lora_rank,)
        q_per_kv = 1 if standard_mla else heads   # absorbed: every head reads the latent
    elif spec is not None:
        # DeepSeek-V4: RoPE on the last 64 values of each head's query and of the one latent;
        # the query latent's and the latent's RMSNorms (sglang / vLLM deepseek_v4.py); MQA
        rope_width = (heads + 1) * spec.qk_rope_head_dim
        latent_norms = (spec.q_lora_rank, m.head_dim)
        q_per_kv = heads
    else:
        kv_heads = max(1, m.num_key_value_heads // lay.tp)
        rope_width = (heads + kv_heads) * m.head_dim
        latent_norms = ()
        q_per_kv = max(1, heads // kv_heads)
    return AttentionShapes(
        dims=dims,
        heads=heads,
        pair_flops=attention_pair_flops(m, mla_mode) / lay.tp,
        c_chip=c_chip,
        standard_mla=standard_mla,
        pre=[x for x in linears
             if x.name not in OUTPUT_LINEARS and (standard_mla or x.name != "kv_b_proj")],
        o_proj=[x for x in linears if x.name in OUTPUT_LINEARS],
        kv_b=[x for x in linears if x.name == "kv_b_proj"],
        absorb_k=absorb_k,
        absorb_v=absorb_v,
        q_per_kv=q_per_kv,
        head_dim=(dims.qk_dim + dims.v_dim) / 2,
        rope_width=rope_width,
        latent_norms=latent_norms,
    )
