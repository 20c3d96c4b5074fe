"""The attention half's per-chip shapes under one layout, shared by both phases' emitters.

Only shapes and compute work live here; how queries and KV move between chips (pass-KV in
prefill, pass-Q in decode) stays in each phase's own module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxplan.mapping import ops
from ctxplan.mapping.builder import Work
from ctxplan.mapping.layout import Layout, kv_bytes_per_chip_token
from ctxplan.model.attention import (
    AttentionDims,
    attention_dims,
    attention_pair_flops,
    mla_absorb_flops_per_token,
)
from ctxplan.model.linear import Linear, attention_linears
from ctxplan.model.spec import FULL_ATTENTION, ModelSpec


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
    absorb_flops: float      # absorbed MLA's extra FLOPs per query token on one TP chip

    def projection(self, m: ModelSpec, tokens: Any, lay: Layout) -> list[Work]:
        """Residual add + norm, the q / kv projections and (absorbed MLA) the folded
        up-projections of ``tokens`` tokens on one TP chip."""
        w = lay.precision.attention_weights
        parts = [ops.norm_work(m.hidden_size, tokens, lay),
                 ops.linear_work(self.pre, tokens, lay, w)]
        if self.absorb_flops:
            parts.append(Work("matmul", self.absorb_flops * tokens, 0.0,
                              lay.precision.matmul_dtype(w), m_rows=tokens))
        return parts


def attention_shapes(m: ModelSpec, lay: Layout,
                     layer_type: str = FULL_ATTENTION) -> AttentionShapes:
    """Shapes of a softmax layer of kind ``layer_type`` (full, windowed, DSA: the projections
    differ, DSA adding its indexer's)."""
    mla_mode = lay.mla_mode or "standard"
    standard_mla = m.mla is not None and mla_mode == "standard"
    linears = attention_linears(m, layer_type)
    absorb = (mla_absorb_flops_per_token(m) / lay.tp
              if m.mla is not None and not standard_mla else 0.0)
    dims = attention_dims(m, mla_mode)
    return AttentionShapes(
        dims=dims,
        heads=dims.q_heads // lay.tp,
        pair_flops=attention_pair_flops(m, mla_mode) / lay.tp,
        c_chip=kv_bytes_per_chip_token(m, lay),
        standard_mla=standard_mla,
        pre=[x for x in linears
             if x.name != "o_proj" and (standard_mla or x.name != "kv_b_proj")],
        o_proj=[x for x in linears if x.name == "o_proj"],
        kv_b=[x for x in linears if x.name == "kv_b_proj"],
        absorb_flops=absorb,
    )
