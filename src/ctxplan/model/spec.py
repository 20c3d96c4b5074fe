"""The architecture of one LLM, as plain frozen dataclasses.

Field names follow Hugging Face config.json (DeepSeek's names for MLA and MoE), so a number can
be checked against the model's published config file. Validation of user input happens at the
edge (ctxplan.config.model_presets); the checks here only guard internal invariants.

Each decoder layer has an attention kind, named as transformers' configuration classes name it
in ``layer_types`` (docs/model.md, "Attention kinds"); what each kind costs is in
:mod:`ctxplan.model.kinds`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from functools import cached_property
from types import MappingProxyType
from typing import NamedTuple

from ctxplan.model.dtypes import WEIGHT_DTYPES, bytes_per_value

# The attention *shape* of the softmax layers: heads and KV heads, or MLA.
ATTENTION_KINDS = ("mha", "gqa", "mla")

# The attention *kind* of a layer (``layer_types`` in config.json):
FULL_ATTENTION = "full_attention"  # causal over every earlier token (MHA / GQA / MLA)
SLIDING_ATTENTION = "sliding_attention"  # the last ``sliding_window`` tokens (gpt-oss, Gemma 3)
CHUNKED_ATTENTION = "chunked_attention"  # the tokens of its attention_chunk_size chunk (Llama 4)
LINEAR_ATTENTION = "linear_attention"  # Gated DeltaNet: a fixed-size recurrent state (Qwen3-Next)
INDEXED_ATTENTION = "indexed_attention"  # DSA: indexer + MLA over the top-k tokens (DeepSeek-V3.2)
LAYER_TYPES = (
    FULL_ATTENTION,
    SLIDING_ATTENTION,
    CHUNKED_ATTENTION,
    LINEAR_ATTENTION,
    INDEXED_ATTENTION,
)
# Kinds that attend with softmax over cached keys of the model's attention shape (heads, KV heads
# or MLA latent): a KV tier's bytes per token apply to their cache.
SOFTMAX_LAYER_TYPES = (FULL_ATTENTION, SLIDING_ATTENTION, CHUNKED_ATTENTION, INDEXED_ATTENTION)


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
class LinearAttentionSpec:
    """Gated DeltaNet layers (Yang, Kautz, Hatamizadeh, arXiv:2412.06464; Qwen3-Next's
    ``linear_attention`` layers, modeling_qwen3_next.py ``Qwen3NextGatedDeltaNet``).

    Queries and keys have ``linear_num_key_heads`` heads, values ``linear_num_value_heads``
    (each key head serves value_heads / key_heads value heads). The state a sequence keeps is one
    ``key_head_dim x value_head_dim`` matrix per value head plus the causal conv1d's last
    ``kernel - 1`` inputs, whatever the context length."""

    linear_num_key_heads: int  # q / k heads (16 in Qwen3-Next)
    linear_num_value_heads: int  # v heads, one recurrent state each (32)
    linear_key_head_dim: int  # d_k per head (128)
    linear_value_head_dim: int  # d_v per head (128)
    linear_conv_kernel_dim: int  # depthwise causal conv1d over q, k, v (4)
    state_dtype: str = "bf16"  # dtype of the cached states (vLLM's default: the model dtype)

    def __post_init__(self) -> None:
        for name in (
            "linear_num_key_heads",
            "linear_num_value_heads",
            "linear_key_head_dim",
            "linear_value_head_dim",
            "linear_conv_kernel_dim",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.linear_num_value_heads % self.linear_num_key_heads:
            raise ValueError("linear_num_value_heads must be a multiple of linear_num_key_heads")
        bytes_per_value(self.state_dtype)  # a known dtype

    @property
    def key_dim(self) -> int:
        """Width of q and of k over all key heads (2048)."""
        return self.linear_num_key_heads * self.linear_key_head_dim

    @property
    def value_dim(self) -> int:
        """Width of v (and of the output before out_proj) over all value heads (4096)."""
        return self.linear_num_value_heads * self.linear_value_head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the depthwise conv1d: q, k and v (2 * key_dim + value_dim = 8192)."""
        return 2 * self.key_dim + self.value_dim


@dataclass(frozen=True)
class DSASpec:
    """DeepSeek Sparse Attention (DeepSeek-V3.2; transformers ``DeepseekV32Indexer``): a
    lightning indexer scores every earlier token, I(t, s) = sum_j w(t, j) * ReLU(q(t, j) . k(s))
    over ``index_n_heads`` heads of ``index_head_dim`` sharing one key per token, and the MLA
    attention attends only the ``index_topk`` best-scored tokens."""

    index_n_heads: int  # indexer query heads (64)
    index_head_dim: int  # indexer q / k width (128)
    index_topk: int  # tokens the main attention attends per query (2048)

    def __post_init__(self) -> None:
        for name in ("index_n_heads", "index_head_dim", "index_topk"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")


class LayerSignature(NamedTuple):
    """What makes two decoder layers of one model cost the same: their attention kind and
    whether their FFN is dense or MoE. Layers with equal signatures are identical ops."""

    layer_type: str  # one of LAYER_TYPES
    ffn: str  # "dense" | "moe"


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
    weight_dtype: str  # storage dtype of the weights as shipped / served (dtypes.WEIGHT_DTYPES)
    source: str  # where the figures come from (model card, config.json path)
    # -- per-layer attention kinds (defaults: every layer full attention, as before) --------
    layer_types: tuple[str, ...] = ()  # one LAYER_TYPES entry per layer; () = all full_attention
    sliding_window: int | None = None  # keys a sliding_attention query sees, itself included
    attention_chunk_size: int | None = None  # tokens per chunk of chunked_attention layers
    attention_sinks: bool = False  # a learned sink logit per head in the softmax (gpt-oss)
    attention_output_gate: bool = False  # q_proj also gives a sigmoid output gate (Qwen3-Next)
    linear_attention: LinearAttentionSpec | None = None  # linear_attention layers
    dsa: DSASpec | None = None  # indexed_attention layers (DSA over MLA)
    expert_weight_dtype: str | None = None  # routed experts' storage dtype when not weight_dtype

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
        for dtype in (self.weight_dtype, self.expert_weight_dtype):
            if dtype is not None and dtype not in WEIGHT_DTYPES:
                raise ValueError(f"unknown weight dtype {dtype!r}; known: {WEIGHT_DTYPES}")
        if self.expert_weight_dtype is not None and self.moe is None:
            raise ValueError("expert_weight_dtype needs MoE layers")
        self._check_layer_types()

    def _check_layer_types(self) -> None:
        # A list given by a caller becomes a tuple (hashable); an explicit all-full list is the
        # default, so that both spellings of one model compare equal.
        types = tuple(self.layer_types)
        if all(t == FULL_ATTENTION for t in types):
            types = ()
        object.__setattr__(self, "layer_types", types)
        if types and len(types) != self.num_hidden_layers:
            raise ValueError(
                f"layer_types has {len(types)} entries for {self.num_hidden_layers} layers"
            )
        unknown = sorted(set(types) - set(LAYER_TYPES))
        if unknown:
            raise ValueError(f"unknown layer type {unknown[0]!r}; known: {LAYER_TYPES}")
        for name in ("sliding_window", "attention_chunk_size"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be None or > 0, got {value}")
        needs = {
            SLIDING_ATTENTION: ("sliding_window", self.sliding_window),
            CHUNKED_ATTENTION: ("attention_chunk_size", self.attention_chunk_size),
            LINEAR_ATTENTION: ("linear_attention", self.linear_attention),
            INDEXED_ATTENTION: ("dsa", self.dsa),
        }
        for kind, (field, value) in needs.items():
            if kind in types and value is None:
                raise ValueError(f"{kind} layers need {field}")
        if INDEXED_ATTENTION in types and (self.mla is None or self.mla.q_lora_rank is None):
            # the indexer's queries come from MLA's query latent (q_lora_rank wide)
            raise ValueError("indexed_attention (DSA) runs over MLA with a q_lora_rank: give mla")
        if self.attention_output_gate and self.mla is not None:
            raise ValueError("attention_output_gate is modelled for MHA / GQA only")

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

    def _check_layer(self, layer: int) -> None:
        if not 0 <= layer < self.num_hidden_layers:
            raise ValueError(f"layer {layer} outside [0, {self.num_hidden_layers})")

    def layer_type(self, layer: int) -> str:
        """Attention kind of layer ``layer`` (0-based): one of LAYER_TYPES."""
        self._check_layer(layer)
        return self.layer_types[layer] if self.layer_types else FULL_ATTENTION

    def layer_signature(self, layer: int) -> LayerSignature:
        """(attention kind, "dense" | "moe") of layer ``layer``: equal signatures, equal layers."""
        ffn = "moe" if self.is_moe_layer(layer) else "dense"
        return LayerSignature(self.layer_type(layer), ffn)

    def __getstate__(self) -> dict[str, object]:
        # Pickle (process pools, Ray) and copy carry the fields only, not the cached views below.
        return {f.name: getattr(self, f.name) for f in fields(self)}

    # Computed once per spec (cached in the instance, outside the dataclass fields, so equality,
    # hashing and asdict are unchanged) and read-only, so no caller can alter the cache.
    @cached_property
    def layer_groups(self) -> Mapping[LayerSignature, tuple[int, ...]]:
        """The distinct layer signatures, in order of first appearance, each with its layers."""
        groups: dict[LayerSignature, list[int]] = {}
        for j in range(self.num_hidden_layers):
            groups.setdefault(self.layer_signature(j), []).append(j)
        return MappingProxyType({sig: tuple(layers) for sig, layers in groups.items()})

    @cached_property
    def layer_type_counts(self) -> Mapping[str, int]:
        """Layers of each attention kind present, in LAYER_TYPES order (absent kinds left out)."""
        if not self.layer_types:
            return MappingProxyType({FULL_ATTENTION: self.num_hidden_layers})
        return MappingProxyType(
            {t: n for t in LAYER_TYPES if (n := self.layer_types.count(t))})

    def first_layers(self, n: int) -> ModelSpec:
        """The same model cut to its first ``n`` layers (``layer_types`` cut to match), e.g.
        for small test graphs; ``dataclasses.replace(num_hidden_layers=n)`` would leave
        ``layer_types`` too long."""
        if not 1 <= n <= self.num_hidden_layers:
            raise ValueError(f"n must be in [1, {self.num_hidden_layers}], got {n}")
        return replace(self, num_hidden_layers=n, layer_types=self.layer_types[:n])

    def n_layers_of_type(self, layer_type: str) -> int:
        """How many layers have attention kind ``layer_type`` (0 when none)."""
        return self.layer_type_counts.get(layer_type, 0)
