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

# The attention *shape* of the softmax layers: heads and KV heads, MLA, or DeepSeek-V4's MQA over
# one latent that serves as both key and value ("latent-mqa", CompressedAttentionSpec).
ATTENTION_KINDS = ("mha", "gqa", "mla", "latent-mqa")

# The attention *kind* of a layer (``layer_types`` in config.json):
FULL_ATTENTION = "full_attention"  # causal over every earlier token (MHA / GQA / MLA)
SLIDING_ATTENTION = "sliding_attention"  # the last ``sliding_window`` tokens (gpt-oss, Gemma 3)
CHUNKED_ATTENTION = "chunked_attention"  # the tokens of its attention_chunk_size chunk (Llama 4)
LINEAR_ATTENTION = "linear_attention"  # Gated DeltaNet: a fixed-size recurrent state (Qwen3-Next)
INDEXED_ATTENTION = "indexed_attention"  # DSA: indexer + MLA over the top-k tokens (DeepSeek-V3.2)
# DeepSeek-V4's kinds (config.json ``compress_ratios``: 0, 4, 128), all over its latent MQA
# (CompressedAttentionSpec) and all with the last ``sliding_window`` tokens uncompressed:
WINDOW_ATTENTION = "window_attention"  # the window only (compress ratio 0)
# CSA: every csa_compress_ratio tokens pooled into one entry; a lightning indexer scores the
# entries and the top index_topk of them are attended, with the window
COMPRESSED_SPARSE_ATTENTION = "compressed_sparse_attention"
# HCA: every hca_compress_ratio tokens pooled into one entry, all attended, with the window
HEAVILY_COMPRESSED_ATTENTION = "heavily_compressed_attention"
COMPRESSED_LAYER_TYPES = (WINDOW_ATTENTION, COMPRESSED_SPARSE_ATTENTION,
                          HEAVILY_COMPRESSED_ATTENTION)
LAYER_TYPES = (
    FULL_ATTENTION,
    SLIDING_ATTENTION,
    CHUNKED_ATTENTION,
    LINEAR_ATTENTION,
    INDEXED_ATTENTION,
    *COMPRESSED_LAYER_TYPES,
)
# Kinds that attend with softmax over cached keys of the model's attention shape (heads, KV heads
# or MLA latent): a KV tier's bytes per token apply to their cache.
SOFTMAX_LAYER_TYPES = (FULL_ATTENTION, SLIDING_ATTENTION, CHUNKED_ATTENTION, INDEXED_ATTENTION)


def _positive(obj: object, *names: str) -> None:
    """Each field named is > 0, or a ValueError naming it (a bug: the edge checked them)."""
    for name in names:
        if getattr(obj, name) <= 0:
            raise ValueError(f"{name} must be > 0, got {getattr(obj, name)}")


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
        _positive(self, "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")

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
        _positive(self, "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                  "linear_value_head_dim", "linear_conv_kernel_dim")
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
        _positive(self, "index_n_heads", "index_head_dim", "index_topk")


@dataclass(frozen=True)
class CompressedAttentionSpec:
    """DeepSeek-V4's attention block (sglang / vLLM ``deepseek_v4.py``; docs/model.md,
    "DeepSeek-V4"): MQA over one ``head_dim``-wide latent that is both key and value (RoPE on its
    last ``qk_rope_head_dim`` values; ``num_key_value_heads`` 1), a low-rank query (``q_lora_rank``)
    and a grouped low-rank output projection: the heads' outputs in ``o_groups`` groups, each
    projected to ``o_lora_rank``, then together to the hidden size. Each layer keeps its last
    ``ModelSpec.sliding_window`` tokens uncompressed; CSA layers (``compressed_sparse_attention``)
    pool every ``csa_compress_ratio`` tokens into one entry and attend the top
    ``ModelSpec.dsa.index_topk`` of them, as a lightning indexer scores them; HCA layers
    (``heavily_compressed_attention``) pool every ``hca_compress_ratio`` tokens and attend all."""

    q_lora_rank: int          # query down-projection rank (1536 Pro, 1024 Flash)
    qk_rope_head_dim: int     # RoPE part of the latent (64)
    o_groups: int             # groups of the output projection (16 Pro, 8 Flash)
    o_lora_rank: int          # each group's low-rank width (1024)
    csa_compress_ratio: int = 4
    hca_compress_ratio: int = 128

    def __post_init__(self) -> None:
        _positive(self, "q_lora_rank", "qk_rope_head_dim", "o_groups", "o_lora_rank",
                  "csa_compress_ratio", "hca_compress_ratio")
        if self.csa_compress_ratio >= self.hca_compress_ratio:
            raise ValueError("csa_compress_ratio must be below hca_compress_ratio")


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
    # -- the trained context (docs/model.md, "Context beyond the model") ---------------------
    max_position_embeddings: int | None = None    # config.json's; None: not stated
    rope_scaling_factor: float | None = None       # rope_scaling.factor
    original_max_position_embeddings: int | None = None  # rope_scaling's original length
    # -- DeepSeek-V4 (docs/model.md, "DeepSeek-V4"); the defaults leave other models as they were
    compressed_attention: CompressedAttentionSpec | None = None  # the V4 kinds' attention block
    hc_mult: int = 1              # residual stream copies (mHC; 1: an ordinary residual)
    num_hash_layers: int = 0      # first MoE layers routed by a token-id hash (no learned gate)
    # The kinds of the multi-token-prediction layers whose weights the model carries (weights
    # only: speculative decoding is not simulated). () for the models before V4, whose MTP
    # modules are noted in their source and not modelled.
    mtp_layer_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _positive(self, "num_hidden_layers", "hidden_size", "num_attention_heads",
                  "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size")
        if self.mla is None and self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.moe is not None and self.n_moe_layers == 0:
            raise ValueError("a MoE spec must make at least one layer MoE")
        for dtype in (self.weight_dtype, self.expert_weight_dtype):
            if dtype is not None and dtype not in WEIGHT_DTYPES:
                raise ValueError(f"unknown weight dtype {dtype!r}; known: {WEIGHT_DTYPES}")
        if self.expert_weight_dtype is not None and self.moe is None:
            raise ValueError("expert_weight_dtype needs MoE layers")
        for name in ("max_position_embeddings", "original_max_position_embeddings",
                     "rope_scaling_factor"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be None or > 0, got {value}")
        if self.hc_mult < 1 or self.num_hash_layers < 0:
            raise ValueError("hc_mult must be >= 1 and num_hash_layers >= 0")
        if self.num_hash_layers and (self.moe is None or self.num_hash_layers > self.n_moe_layers
                                     or self.moe.first_k_dense_replace):
            raise ValueError("num_hash_layers needs that many MoE layers from layer 0")
        self._check_layer_types()
        self._check_compressed()

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

    def _check_compressed(self) -> None:
        """DeepSeek-V4's kinds run over its attention block, and its block has only them."""
        object.__setattr__(self, "mtp_layer_types", tuple(self.mtp_layer_types))
        unknown = sorted(set(self.mtp_layer_types) - set(LAYER_TYPES))
        if unknown:
            raise ValueError(f"unknown MTP layer type {unknown[0]!r}; known: {LAYER_TYPES}")
        kinds = set(self.layer_types or (FULL_ATTENTION,)) | set(self.mtp_layer_types)
        v4 = kinds & set(COMPRESSED_LAYER_TYPES)
        spec = self.compressed_attention
        if spec is None:
            if v4:
                raise ValueError(f"{sorted(v4)[0]} layers need compressed_attention")
            return
        if kinds - set(COMPRESSED_LAYER_TYPES):
            raise ValueError("a compressed_attention model has only window_attention, "
                             "compressed_sparse_attention and heavily_compressed_attention layers")
        if self.mla is not None or self.num_key_value_heads != 1:
            raise ValueError("compressed_attention is MQA over one latent: no mla, one KV head")
        if self.sliding_window is None:
            raise ValueError("compressed_attention layers keep a window: give sliding_window")
        if COMPRESSED_SPARSE_ATTENTION in kinds and self.dsa is None:
            raise ValueError("compressed_sparse_attention layers need their indexer (dsa)")
        if spec.qk_rope_head_dim >= self.head_dim:
            raise ValueError("qk_rope_head_dim must be below head_dim")
        if (self.num_attention_heads * self.head_dim) % spec.o_groups:
            raise ValueError("o_groups must divide num_attention_heads * head_dim")

    @property
    def context_limit(self) -> int | None:
        """The longest context the model was trained or extended to: max(max_position_embeddings,
        rope_scaling factor x original_max_position_embeddings where rope_scaling declares
        both); None when the model states neither (docs/model.md, "Context beyond the model")."""
        limits = []
        if self.max_position_embeddings is not None:
            limits.append(self.max_position_embeddings)
        if self.rope_scaling_factor is not None and \
                self.original_max_position_embeddings is not None:
            limits.append(int(self.rope_scaling_factor * self.original_max_position_embeddings))
        return max(limits) if limits else None

    def is_hash_routed(self, layer: int) -> bool:
        """Layer ``layer``'s experts are chosen by a fixed token-id hash, not a learned gate
        (DeepSeek-V4's first ``num_hash_layers`` layers)."""
        self._check_layer(layer)
        return layer < self.num_hash_layers

    @property
    def residual_width(self) -> int:
        """Values per token of the residual stream: hc_mult copies of the hidden state (mHC),
        what a layer reads and writes around each sublayer and what pipeline stages pass."""
        return self.hc_mult * self.hidden_size

    @property
    def attention_kind(self) -> str:
        """'mla', 'latent-mqa' (DeepSeek-V4), 'gqa' (fewer KV heads than query heads, MQA
        included) or 'mha'."""
        if self.compressed_attention is not None:
            return "latent-mqa"
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
        """The same model cut to its first ``n`` layers (``layer_types`` and the hash-routed
        layers cut to match), e.g.
        for small test graphs; ``dataclasses.replace(num_hidden_layers=n)`` would leave
        ``layer_types`` too long."""
        if not 1 <= n <= self.num_hidden_layers:
            raise ValueError(f"n must be in [1, {self.num_hidden_layers}], got {n}")
        return replace(self, num_hidden_layers=n, layer_types=self.layer_types[:n],
                       num_hash_layers=min(self.num_hash_layers, n))

    def n_layers_of_type(self, layer_type: str) -> int:
        """How many layers have attention kind ``layer_type`` (0 when none)."""
        return self.layer_type_counts.get(layer_type, 0)
