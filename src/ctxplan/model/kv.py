"""KV cache size per token per layer (c_kv), as named tiers or a user's number.

The spec treats c_kv as a discrete input and does not model how compression is done.

- MLA (DeepSeek-V2 arXiv:2405.04434; DeepSeek-V3's config.json: kv_lora_rank 512,
  qk_rope_head_dim 64): the cache holds the latent
  (kv_lora_rank) and the shared rope key (qk_rope_head_dim), 576 values for DeepSeek-V3.
    mla-bf16          (kv_lora + rope) * 2                                 1152 B
    mla-fp8           (kv_lora + rope) * 1                                  576 B
    mla-fp8-flashmla  kv_lora * 1 + 4 B FP32 scale per 128 latent values
                      + rope * 2 (rope part kept in BF16; FlashMLA FP8)     656 B
- MHA / GQA: K and V of every KV head.
    kv-bf16           2 * kv_heads * head_dim * 2                          4096 B (Llama 3.1 405B)
    kv-fp8            2 * kv_heads * head_dim * 1
    kv-nvfp4          2 * kv_heads * head_dim * (1/2 + 1/16): NVFP4, one FP8 scale per 16
                      values (TensorRT-LLM's NVFP4 KV cache on Blackwell)  1152 B
- DSA (DeepSeek-V3.2): a tier is the MLA tier plus the indexer's key cache, which is FP8 with
  FP32 block scales whatever the tier (132 B; ctxplan.model.kinds.indexer_key_bytes):
  mla-bf16 1284, mla-fp8 708, mla-fp8-flashmla 788. A number given for a DSA model is the whole
  per-token figure, indexer included, so it must exceed the indexer's 132 B.

- DeepSeek-V4 (:mod:`ctxplan.model.compressed`): a tier is the bytes a CSA layer keeps per
  compressed entry, the 584-B entry (448 FP8 + 64 BF16 RoPE values + 8 B of scales) and its
  indexer key: v4-fp8 716 (FP8 indexer key, 132 B: the engines' default), v4-fp4-index 652 (FP4
  key, 68 B). Window and HCA entries are the 584-B entry alone. A number given for a V4 model is
  the CSA figure, so it must exceed 584.

A tier is bytes per token of a full-attention layer. Sliding-window and chunked layers keep the
same bytes per token for the tokens they keep; linear-attention layers keep a state of their own
dtype that no tier changes (ctxplan.model.kinds, docs/model.md "KV tiers and the kinds").
"""

from __future__ import annotations

import math

from ctxplan.errors import UserInputError, did_you_mean
from ctxplan.model import compressed
from ctxplan.model.kinds import indexer_key_bytes, layer_kv_bytes
from ctxplan.model.spec import FULL_ATTENTION, INDEXED_ATTENTION, ModelSpec

# NVFP4 (NVIDIA): 16 E2M1 values share one FP8 E4M3 scale.
NVFP4_BYTES_PER_VALUE = 0.5 + 1 / 16

CUSTOM_PREFIX = "custom-"


def kv_tiers(m: ModelSpec) -> dict[str, int]:
    """The named tiers of this model: name -> bytes per token per layer (DeepSeek-V4: per CSA
    entry, its indexer key included)."""
    if m.compressed_attention is not None:
        entry = compressed.entry_bytes(m)
        return {"v4-fp8": entry + compressed.indexer_key_bytes(m, "fp8"),
                "v4-fp4-index": entry + compressed.indexer_key_bytes(m, "fp4")}
    mla = m.mla
    if mla is not None:
        latent = mla.kv_lora_rank + mla.qk_rope_head_dim
        index = indexer_key_bytes(m)  # 0 without DSA
        return {
            "mla-bf16": latent * 2 + index,
            "mla-fp8": latent * 1 + index,
            "mla-fp8-flashmla": mla.kv_lora_rank * 1
            + 4 * math.ceil(mla.kv_lora_rank / 128)
            + mla.qk_rope_head_dim * 2
            + index,
        }
    per_value = 2 * m.num_key_value_heads * m.head_dim  # K and V
    return {"kv-bf16": per_value * 2, "kv-fp8": per_value * 1,
            "kv-nvfp4": math.ceil(per_value * NVFP4_BYTES_PER_VALUE)}


def default_kv_tiers(m: ModelSpec) -> list[str]:
    """Tiers a solve compares when the user names none (NVFP4 KV, offered by one engine on one
    chip family, only when named)."""
    if m.compressed_attention is not None:
        return list(kv_tiers(m))
    return ["mla-bf16", "mla-fp8"] if m.mla is not None else ["kv-bf16", "kv-fp8"]


def _bad(m: ModelSpec, tier: object, problem: str) -> UserInputError:
    names = ", ".join(kv_tiers(m))
    return UserInputError(
        "kv_tier",
        tier,
        f"{did_you_mean(tier, kv_tiers(m))}use one of {m.name}'s tiers ({names}) or a whole "
        "number of bytes per token per layer > 0",
        problem,
    )


def _from_number(m: ModelSpec, tier: object, value: float) -> tuple[str, int]:
    if not math.isfinite(value) or value <= 0:
        raise _bad(m, tier, "bytes per token per layer must be a finite number > 0")
    if value != int(value):
        raise _bad(m, tier, "bytes per token per layer must be a whole number")
    n = int(value)
    if m.compressed_attention is not None:
        entry = compressed.entry_bytes(m)
        if n <= entry:
            raise _bad(m, tier, f"a DeepSeek-V4 tier is the bytes of a CSA entry with its "
                       f"indexer key, beyond the {entry} B entry: give more than {entry}")
        return f"{CUSTOM_PREFIX}{n}", n
    index = indexer_key_bytes(m)
    if n <= index:
        raise _bad(
            m, tier,
            f"a DSA tier includes the indexer's {index} B key per token: give more than {index}",
        )
    return f"{CUSTOM_PREFIX}{n}", n


def resolve_kv_tier(m: ModelSpec, tier: str | int | float) -> tuple[str, int]:
    """(name, bytes per token per layer) for a tier name of this model (case-insensitive) or a
    number of bytes: 700, 700.0, "700" or "custom-700" all give ("custom-700", 700)."""
    if isinstance(tier, bool):
        raise _bad(m, tier, "not a tier")
    if isinstance(tier, int | float):
        return _from_number(m, tier, float(tier))
    if not isinstance(tier, str):
        raise _bad(m, tier, "not a tier")
    key = tier.strip().lower()
    tiers = kv_tiers(m)
    if key in tiers:
        return key, tiers[key]
    text = key.removeprefix(CUSTOM_PREFIX)
    try:
        value = float(text)
    except ValueError:
        raise _bad(m, tier, f"unknown KV tier for {m.name}") from None
    return _from_number(m, tier, value)


def kv_bytes_per_token(m: ModelSpec, c_kv_bytes: int) -> float:
    """KV bytes one more token of context adds over all layers once S is past every window:
    c_kv * (full + DSA layers). Every layer of a full-attention model (DeepSeek-V3 mla-bf16:
    1152 * 61 = 70,272 B); gpt-oss's 128-token windows add nothing beyond 128 tokens.
    DeepSeek-V4's CSA and HCA layers add an entry every r tokens, on average a fraction of a
    byte (V4-Pro v4-fp8: 30 x 716 / 4 + 31 x 584 / 128 = 5,511.4 B)."""
    pooled = sum(n * compressed.growth_bytes_per_token(m, kind, c_kv_bytes)
                 for kind, n in m.layer_type_counts.items()
                 if kind in compressed.COMPRESSOR_OVERLAP)
    per_layer = m.n_layers_of_type(FULL_ATTENTION) + m.n_layers_of_type(INDEXED_ATTENTION)
    return c_kv_bytes * per_layer + pooled


def kv_bytes_per_sequence(m: ModelSpec, context: int, c_kv_bytes: int) -> int:
    """Cache bytes one sequence of ``context`` tokens keeps over all layers: the sum over
    layers of :func:`ctxplan.model.kinds.layer_kv_bytes` (KV of the kept tokens, or the linear
    layers' states). gpt-oss-20b: (12 S + 12 min(S, 128)) * c_kv."""
    return sum(
        n * layer_kv_bytes(m, layer_type, context, c_kv_bytes)
        for layer_type, n in m.layer_type_counts.items()
    )
