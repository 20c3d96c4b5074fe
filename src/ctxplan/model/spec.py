"""The architecture of one LLM, as plain frozen dataclasses.

Field names follow Hugging Face config.json (DeepSeek's names for MLA and MoE), so a number can
be checked against the model's published config file. Validation of user input happens at the
edge (ctxplan.config.model_presets); the checks here only guard internal invariants.
"""

from __future__ import annotations

from dataclasses import dataclass

ATTENTION_KINDS = ("mha", "gqa", "mla")


@dataclass(frozen=True)
class MLASpec:
    """Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434, section 2.1)."""

    q_lora_rank: int | None  # query down-projection rank; None: q projected directly (V2-Lite)
    kv_lora_rank: int  # width of the compressed KV latent c_kv (512 in DeepSeek-V2/V3)
    qk_nope_head_dim: int  # per-head q/k dims without rotary embedding (128)
    qk_rope_head_dim: int  # per-head q/k dims with rotary embedding; one k part for all heads (64)
    v_head_dim: int  # per-head value dims (128)

    def __post_init__(self) -> None:
        if self.q_lora_rank is not None and self.q_lora_rank <= 0:
            raise ValueError(f"q_lora_rank must be None or > 0, got {self.q_lora_rank}")
        for name in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")

    @property
    def qk_head_dim(self) -> int:
        """Per-head q/k width in standard (non-absorbed) attention: nope + rope (192)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim


@dataclass(frozen=True)
class MoESpec:
    """Mixture of experts FFN (DeepSeekMoE arXiv:2401.06066; Qwen-MoE)."""

    n_routed_experts: int  # routed experts per MoE layer
    n_shared_experts: int  # always-active shared experts per MoE layer (0 for Qwen3-MoE)
    num_experts_per_tok: int  # top-k routed experts each token visits
    moe_intermediate_size: int  # FFN width of one expert (routed and shared alike)
    first_k_dense_replace: int  # leading dense layers
    moe_layer_freq: int = 1  # every k-th layer after the leading ones is MoE

    def __post_init__(self) -> None:
        if self.n_routed_experts <= 0 or self.moe_intermediate_size <= 0:
            raise ValueError("n_routed_experts and moe_intermediate_size must be > 0")
        if not 0 < self.num_experts_per_tok <= self.n_routed_experts:
            raise ValueError("num_experts_per_tok must be in [1, n_routed_experts]")
        if self.n_shared_experts < 0 or self.first_k_dense_replace < 0 or self.moe_layer_freq <= 0:
            raise ValueError("n_shared_experts, first_k_dense_replace >= 0; moe_layer_freq > 0")


@dataclass(frozen=True)
class ModelSpec:
    """One decoder-only transformer: attention (MHA / GQA / MLA), dense FFN and optional MoE."""

    name: str  # short name, e.g. "deepseek-v3"
    num_hidden_layers: int  # decoder layers (MTP / next-n prediction layers excluded)
    hidden_size: int  # model width d_model
    num_attention_heads: int  # query heads
    num_key_value_heads: int  # = heads for MHA; for MLA keep heads (as HF does) - unused
    head_dim: int  # MHA/GQA head dim (hidden/heads when absent)
    intermediate_size: int  # dense FFN width (SwiGLU: gate, up, down)
    vocab_size: int  # rows of the embedding and of the LM head
    tie_word_embeddings: bool  # LM head shares the embedding matrix
    mla: MLASpec | None  # latent attention; None for MHA / GQA
    moe: MoESpec | None  # expert layers; None for a dense model
    weight_dtype: str  # "bf16" | "fp8": dtype of the weights as shipped / served
    source: str  # where the figures come from (model card, config.json path)

    def __post_init__(self) -> None:
        for name in (
            "num_hidden_layers",
            "hidden_size",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "intermediate_size",
            "vocab_size",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.mla is None and self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.moe is not None and self.n_moe_layers == 0:
            raise ValueError("a MoE spec must make at least one layer MoE")

    @property
    def attention_kind(self) -> str:
        """'mla', 'gqa' (fewer KV heads than query heads, MQA included) or 'mha'."""
        if self.mla is not None:
            return "mla"
        return "gqa" if self.num_key_value_heads < self.num_attention_heads else "mha"

    def is_moe_layer(self, layer: int) -> bool:
        """Layer ``layer`` (0-based) has a MoE FFN: after the leading dense layers, every
        ``moe_layer_freq``-th layer counting from the first MoE layer."""
        if not 0 <= layer < self.num_hidden_layers:
            raise ValueError(f"layer {layer} outside [0, {self.num_hidden_layers})")
        moe = self.moe
        if moe is None or layer < moe.first_k_dense_replace:
            return False
        return (layer - moe.first_k_dense_replace) % moe.moe_layer_freq == 0

    @property
    def n_moe_layers(self) -> int:
        moe = self.moe
        if moe is None or moe.first_k_dense_replace >= self.num_hidden_layers:
            return 0
        # layers first_k, first_k + freq, ... below num_hidden_layers
        span = self.num_hidden_layers - moe.first_k_dense_replace
        return (span - 1) // moe.moe_layer_freq + 1

    @property
    def n_dense_layers(self) -> int:
        return self.num_hidden_layers - self.n_moe_layers
