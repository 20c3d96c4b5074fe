"""KV cache size per token per layer (c_kv), as named tiers or a user's number.

The spec treats c_kv as a discrete input and does not model how compression is done.

- MLA (DeepSeek-V2 arXiv:2405.04434; reference/models.md): the cache holds the latent
  (kv_lora_rank) and the shared rope key (qk_rope_head_dim), 576 values for DeepSeek-V3.
    mla-bf16          (kv_lora + rope) * 2                                 1152 B
    mla-fp8           (kv_lora + rope) * 1                                  576 B
    mla-fp8-flashmla  kv_lora * 1 + 4 B FP32 scale per 128 latent values
                      + rope * 2 (rope part kept in BF16; FlashMLA FP8)     656 B
- MHA / GQA: K and V of every KV head.
    kv-bf16           2 * kv_heads * head_dim * 2                          4096 B (Llama 3.1 405B)
    kv-fp8            2 * kv_heads * head_dim * 1
"""

from __future__ import annotations

import math

from ctxplan.errors import UserInputError
from ctxplan.model.spec import ModelSpec

CUSTOM_PREFIX = "custom-"


def kv_tiers(m: ModelSpec) -> dict[str, int]:
    """The named tiers of this model: name -> bytes per token per layer."""
    mla = m.mla
    if mla is not None:
        latent = mla.kv_lora_rank + mla.qk_rope_head_dim
        return {
            "mla-bf16": latent * 2,
            "mla-fp8": latent * 1,
            "mla-fp8-flashmla": mla.kv_lora_rank * 1
            + 4 * math.ceil(mla.kv_lora_rank / 128)
            + mla.qk_rope_head_dim * 2,
        }
    per_value = 2 * m.num_key_value_heads * m.head_dim  # K and V
    return {"kv-bf16": per_value * 2, "kv-fp8": per_value * 1}


def default_kv_tiers(m: ModelSpec) -> list[str]:
    """Tiers a solve compares when the user names none."""
    return ["mla-bf16", "mla-fp8"] if m.mla is not None else ["kv-bf16", "kv-fp8"]


def _bad(m: ModelSpec, tier: object, problem: str) -> UserInputError:
    names = ", ".join(kv_tiers(m))
    return UserInputError(
        "kv_tier",
        tier,
        f"use one of {m.name}'s tiers ({names}) or a whole number of bytes per token per layer > 0",
        problem,
    )


def _from_number(m: ModelSpec, tier: object, value: float) -> tuple[str, int]:
    if not math.isfinite(value) or value <= 0:
        raise _bad(m, tier, "bytes per token per layer must be a finite number > 0")
    if value != int(value):
        raise _bad(m, tier, "bytes per token per layer must be a whole number")
    n = int(value)
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


def kv_bytes_per_token(m: ModelSpec, c_kv_bytes: int) -> int:
    """KV bytes one token occupies over all layers: c_kv * num_hidden_layers
    (every layer caches; DeepSeek-V3 mla-bf16: 1152 * 61 = 70,272 B)."""
    return c_kv_bytes * m.num_hidden_layers
