"""FLOPs of the attention core (the two matmuls with the KV: Q K^T and P V), per layer.

Projections (q/k/v/o, MLA's q_a/q_b/kv_a/kv_b/o) are linears: see :mod:`ctxplan.model.linear`.

MLA can run two ways (DeepSeek-V2, arXiv:2405.04434, section 2.1.2 "absorb"; FlashMLA):
- "standard": kv_b_proj up-projects the latent of every attended token to per-head k_nope and v;
  attention runs per head with qk dim nope + rope (192) and v dim 128. Cheap per (query, key) pair
  but needs the up-projected K/V of every key: the usual choice for prefill, where every key is a
  new token whose kv_b_proj runs anyway.
- "absorbed": W_UK is folded into the query and W_UV into the output, so every head attends
  directly on the shared 576-wide cache entry (latent 512 + rope 64; one KV "head") and produces a
  512-wide latent output. 3.4x the FLOPs per pair, but it reads only the compressed cache and never
  up-projects it: the usual choice for decode.
The default is "standard" for prefill and "absorbed" for decode (:func:`default_mla_mode`),
except for DSA models (DeepSeek-V3.2), which DeepSeek implements in the absorbed ("MQA") mode in
both phases, so that every selected latent is shared by all query heads (DeepSeek-V3.2-Exp
report, "Instantiate DSA under MLA"; :func:`model_default_mla_mode`).
For MHA / GQA models the mode has no effect.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxplan.model.spec import ModelSpec

MLA_MODES = ("standard", "absorbed")


@dataclass(frozen=True)
class AttentionDims:
    """Shape of the attention core as the kernel sees it."""

    q_heads: int  # query heads
    kv_heads: int  # distinct K/V heads read (GQA groups; 1 for absorbed MLA)
    qk_dim: int  # per-head width of the Q K^T dot product
    v_dim: int  # per-head width of V (and of the attention output before o_proj)


def default_mla_mode(is_prefill: bool) -> str:
    """Standard MLA for prefill, absorbed MLA for decode (see module docstring)."""
    return "standard" if is_prefill else "absorbed"


def model_default_mla_mode(m: ModelSpec, is_prefill: bool) -> str:
    """The default MLA mode of model ``m`` in a phase: absorbed in both phases for a DSA model,
    else :func:`default_mla_mode` ("" is not returned: non-MLA models ignore the mode)."""
    if m.dsa is not None:
        return "absorbed"
    return default_mla_mode(is_prefill)


def _check_mode(mla_mode: str) -> None:
    if mla_mode not in MLA_MODES:
        raise ValueError(f"mla_mode must be one of {MLA_MODES}, got {mla_mode!r}")


def attention_dims(m: ModelSpec, mla_mode: str = "standard") -> AttentionDims:
    """MLA standard: (heads, heads, nope+rope, v) = (128, 128, 192, 128) for DeepSeek-V3;
    MLA absorbed: (heads, 1, kv_lora+rope, kv_lora) = (128, 1, 576, 512);
    MHA / GQA: (heads, kv_heads, head_dim, head_dim), whatever the mode;
    DeepSeek-V4's latent MQA: (heads, 1, head_dim, head_dim) = (128, 1, 512, 512) for V4-Pro,
    the one latent being key (RoPE on its last 64 values) and value, whatever the mode."""
    _check_mode(mla_mode)
    mla = m.mla
    heads = m.num_attention_heads
    if m.compressed_attention is not None:
        return AttentionDims(heads, 1, m.head_dim, m.head_dim)
    if mla is None:
        return AttentionDims(heads, m.num_key_value_heads, m.head_dim, m.head_dim)
    if mla_mode == "standard":
        return AttentionDims(heads, heads, mla.qk_head_dim, mla.v_head_dim)
    return AttentionDims(heads, 1, mla.kv_lora_rank + mla.qk_rope_head_dim, mla.kv_lora_rank)


def attention_pair_flops(m: ModelSpec, mla_mode: str = "standard") -> float:
    """FLOPs per (query, key) pair over all heads: 2 * q_heads * (qk_dim + v_dim)
    (one multiply-add of Q K^T per qk element, one of P V per v element; softmax ignored)."""
    d = attention_dims(m, mla_mode)
    return 2.0 * d.q_heads * (d.qk_dim + d.v_dim)


def attention_core_flops(
    m: ModelSpec, q_tokens: float, kv_tokens_visible: float, mla_mode: str = "standard"
) -> float:
    """FLOPs of Q K^T and P V for ``q_tokens`` queries that each see ``kv_tokens_visible`` keys
    on average: attention_pair_flops * q_tokens * kv_tokens_visible.

    The caller passes the average. A causal full prefill over S tokens has S*(S+1)/2 pairs
    (:func:`causal_pairs`), i.e. kv_tokens_visible = (S+1)/2, giving
    ~ 2 * S^2 * heads * (dqk + dv) / 2 per layer, the count of Meta's arXiv:2411.01783 (its
    Llama 3 405B 1M prefill: 2 W T + 0.5 * 4 T^2 D layers = 4.9e18 FLOPs). A decode step of a
    sequence holding S tokens is q_tokens = 1, kv_tokens_visible = S.
    """
    if q_tokens < 0 or kv_tokens_visible < 0:
        raise ValueError("q_tokens and kv_tokens_visible must be >= 0")
    return attention_pair_flops(m, mla_mode) * q_tokens * kv_tokens_visible


def causal_pairs(q_tokens: int, kv_before: int = 0) -> int:
    """(query, key) pairs of ``q_tokens`` consecutive queries under a causal mask, each also
    seeing ``kv_before`` earlier tokens: q * kv_before + q * (q + 1) / 2 (diagonal included)."""
    if q_tokens < 0 or kv_before < 0:
        raise ValueError("q_tokens and kv_before must be >= 0")
    return q_tokens * kv_before + q_tokens * (q_tokens + 1) // 2


def mla_absorb_flops_per_token(m: ModelSpec) -> float:
    """Extra FLOPs per query token of absorbed MLA: q_nope @ W_UK (2 * heads * nope * kv_lora)
    and latent output @ W_UV (2 * heads * kv_lora * v). 0 for non-MLA models.

    This equals 2 * kv_b_proj.params: absorbed mode applies kv_b_proj's weights once per query
    instead of once per attended key; the mapping layer runs kv_b_proj as a linear only in
    standard mode.
    """
    mla = m.mla
    if mla is None:
        return 0.0
    heads = m.num_attention_heads
    return 2.0 * heads * mla.qk_nope_head_dim * mla.kv_lora_rank + (
        2.0 * heads * mla.kv_lora_rank * mla.v_head_dim
    )
