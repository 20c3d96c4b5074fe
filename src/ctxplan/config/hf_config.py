"""Hugging Face config.json -> ModelSpec: a table of small translators, one per ``model_type``.

A config.json is read as the publisher ships it (a local file, no hub access). Every family
shares the fields of :class:`ctxplan.config.model_schema.HFConfig` (layers, widths, heads,
vocabulary); what differs is how the family states attention (MLA or not, the kind of each
layer) and its MoE layers. A translator reads exactly that and returns :class:`FamilyParts`;
:func:`model_from_hf_config` then builds and checks the ModelSpec in one place
(:func:`ctxplan.config.model_build.build_model`).

Multimodal checkpoints (Gemma 3, Llama 4) keep the text model's fields in ``text_config``; they
are read from there, the top level filling in what it lacks. Fields a publisher may leave to the
configuration class's defaults are filled from :attr:`Family.defaults` (and said so in the
source line).

To add a family: write its translator (cite the transformers modeling / configuration file that
defines its layer pattern) and add one line to :data:`FAMILIES`. Keys ctxplan does not model
(rope_scaling, MTP layers, ...) are ignored. weight_dtype comes from quantization_config, else
torch_dtype / dtype, else bf16; an MXFP4 quantization_config (gpt-oss) sets the experts' dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ctxplan.config.loader import validate
from ctxplan.config.model_build import (
    MLA_FIELDS,
    SHAPE_FIELDS,
    AttentionLayers,
    MoELayers,
    build_model,
    compressed_from,
    context_from,
    dsa_from,
    linear_attention_from,
    mla_from,
    require_all,
    require_groups,
    same_named,
)
from ctxplan.config.model_schema import HFConfig
from ctxplan.errors import UserInputError
from ctxplan.model.spec import (
    CHUNKED_ATTENTION,
    FULL_ATTENTION,
    INDEXED_ATTENTION,
    LINEAR_ATTENTION,
    SLIDING_ATTENTION,
    MLASpec,
    ModelSpec,
)

_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
# Keys a user may add to a pasted config.json to override what it says.
_OVERRIDES = ("name", "source", "weight_dtype")
_NO_DEFAULTS: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class FamilyParts:
    """What a family's config says beyond the shared fields: MLA, the MoE block, the attention
    kind of each layer, and the dense FFN's width when ``intermediate_size`` means another."""

    mla: MLASpec | None = None
    moe: MoELayers | None = None
    layers: AttentionLayers = field(default_factory=AttentionLayers)
    intermediate_size: int | None = None  # dense FFN width (Llama 4: intermediate_size_mlp)
    hc_mult: int = 1                      # residual stream copies (DeepSeek-V4's mHC)


Translator = Callable[[HFConfig, str], FamilyParts]


@dataclass(frozen=True)
class Family:
    architecture: str          # architectures[0] of its config.json (for files without model_type)
    translate: Translator
    # The configuration class's defaults for fields publishers leave out of config.json.
    defaults: Mapping[str, Any] = field(default_factory=lambda: _NO_DEFAULTS)


# ----------------------------------------------------------------------------- layer kinds


def _layer_types(c: HFConfig, rule: Callable[[int], str]) -> tuple[str, ...]:
    """config.json's ``layer_types`` when it gives them (the configuration classes keep a given
    list as it is), else the family's rule for layer i."""
    if c.layer_types is not None:
        return tuple(c.layer_types)
    return tuple(rule(i) for i in range(c.num_hidden_layers))


def _kinds(types: tuple[str, ...], c: HFConfig, where: str, *, attention_sinks: bool = False,
           attention_output_gate: bool = False) -> AttentionLayers:
    """The attention layers of ``types``, each kind present with its parameters from ``c``
    (parameters of absent kinds are left out: Qwen configs carry an unused sliding_window)."""
    present = set(types)
    return AttentionLayers(
        layer_types=types,
        sliding_window=c.sliding_window if SLIDING_ATTENTION in present else None,
        attention_chunk_size=c.attention_chunk_size if CHUNKED_ATTENTION in present else None,
        linear_attention=linear_attention_from(c, where) if LINEAR_ATTENTION in present else None,
        dsa=dsa_from(c, where) if INDEXED_ATTENTION in present else None,
        attention_sinks=attention_sinks,
        attention_output_gate=attention_output_gate,
    )


def _windowed_everywhere(c: HFConfig, where: str) -> AttentionLayers:
    """Mistral / Mixtral: every layer attends its last ``sliding_window`` tokens when the config
    sets one (modeling_mistral.py: ``sliding_window=config.sliding_window`` in every layer)."""
    if c.sliding_window is None:
        return AttentionLayers()
    return _kinds(_layer_types(c, lambda i: SLIDING_ATTENTION), c, where)


def _qwen_windows(c: HFConfig, where: str) -> AttentionLayers:
    """Qwen2 / Qwen3 (dense and MoE): with ``use_sliding_window``, layers from
    ``max_window_layers`` on attend a sliding window (configuration_qwen2.py: layer_types
    "sliding_attention" if sliding_window is not None and i >= max_window_layers)."""
    window = c.sliding_window if c.use_sliding_window else None
    first = c.max_window_layers if c.max_window_layers is not None else c.num_hidden_layers
    types = _layer_types(c, lambda i: SLIDING_ATTENTION if window is not None and i >= first
                         else FULL_ATTENTION)
    return _kinds(types, c, where)


# --------------------------------------------------------------------------------- translators


def _width(c: HFConfig, where: str) -> int:
    """``intermediate_size``, which these families require (DeepSeek-V4's config omits it)."""
    require_all(c, ("intermediate_size",), where, "the FFN")
    assert c.intermediate_size is not None
    return c.intermediate_size


def dense(c: HFConfig, where: str) -> FamilyParts:
    """Dense GQA / MHA decoders (Llama): nothing beyond the shared fields."""
    return FamilyParts(layers=_kinds(_layer_types(c, lambda i: FULL_ATTENTION), c, where))


def mistral(c: HFConfig, where: str) -> FamilyParts:
    """Mistral: dense GQA, a sliding window in every layer when the config sets one (7B v0.1)."""
    return FamilyParts(layers=_windowed_everywhere(c, where))


def qwen_dense(c: HFConfig, where: str) -> FamilyParts:
    """Qwen2 / Qwen3 dense: GQA, sliding-window layers only with use_sliding_window."""
    return FamilyParts(layers=_qwen_windows(c, where))


def deepseek(c: HFConfig, where: str) -> FamilyParts:
    """DeepSeek-V2 / V3 and Kimi K2 (DeepSeek-V3's layout): MLA, and DeepSeekMoE after the
    first dense layers."""
    moe_fields = ("num_experts_per_tok", "moe_intermediate_size")
    require_groups(c, {"MLA": MLA_FIELDS, **({"MoE": moe_fields} if c.n_routed_experts
                                            is not None else {})}, where)
    if c.n_routed_experts is None:
        return FamilyParts(mla=mla_from(c, where))
    assert c.num_experts_per_tok is not None and c.moe_intermediate_size is not None
    first_k = c.first_k_dense_replace or 0
    freq = c.moe_layer_freq or 1
    # modeling_deepseek.py, DeepseekV3DecoderLayer: MoE when
    # layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq == 0
    layers = [i for i in range(c.num_hidden_layers) if i >= first_k and i % freq == 0]
    moe = MoELayers(c.n_routed_experts, c.n_shared_experts or 0, c.num_experts_per_tok,
                    c.moe_intermediate_size, layers, "moe_layer_freq") if layers else None
    return FamilyParts(mla=mla_from(c, where), moe=moe)


def deepseek_v32(c: HFConfig, where: str) -> FamilyParts:
    """DeepSeek-V3.2: DeepSeek-V3 with DSA in every layer (modeling_deepseek_v32.py: every
    DeepseekV32Attention holds a DeepseekV32Indexer; index_* fields of DeepseekV32Config)."""
    parts = deepseek(c, where)
    types = _layer_types(c, lambda i: INDEXED_ATTENTION)
    return FamilyParts(mla=parts.mla, moe=parts.moe, layers=_kinds(types, c, where))


def deepseek_v4(c: HFConfig, where: str) -> FamilyParts:
    """DeepSeek-V4 (sglang / vLLM ``models/deepseek_v4.py``; docs/model.md, "DeepSeek-V4"):
    MQA over one head_dim-wide latent with a grouped low-rank output projection; each layer's
    kind from ``compress_ratios`` (window only, CSA, HCA; the entries after the decoder layers
    are the MTP layers'); DeepSeekMoE in every layer, the first ``num_hash_layers`` routed by a
    token-id hash; mHC's ``hc_mult``-wide residual stream. No dense layer: the dense FFN width
    (unused) is taken as the experts'."""
    fields = ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")
    require_all(c, fields, where, "MoE")
    assert c.n_routed_experts and c.num_experts_per_tok and c.moe_intermediate_size
    layers = list(range(c.first_k_dense_replace or 0, c.num_hidden_layers))
    moe = MoELayers(c.n_routed_experts, c.n_shared_experts or 0, c.num_experts_per_tok,
                    c.moe_intermediate_size, layers, "first_k_dense_replace",
                    num_hash_layers=c.num_hash_layers or 0) if layers else None
    return FamilyParts(moe=moe, layers=compressed_from(c, where), hc_mult=c.hc_mult or 1,
                       intermediate_size=c.intermediate_size or c.moe_intermediate_size)


def qwen_moe(c: HFConfig, where: str) -> FamilyParts:
    """Qwen2-MoE / Qwen3-MoE: sparse every decoder_sparse_step-th layer, but mlp_only_layers;
    the shared expert as whole experts of moe_intermediate_size."""
    layers = _qwen_windows(c, where)
    if not c.num_experts:
        return FamilyParts(layers=layers)
    require_all(c, ("num_experts_per_tok", "moe_intermediate_size"), where, "MoE")
    assert c.num_experts_per_tok is not None and c.moe_intermediate_size is not None
    step = c.decoder_sparse_step or 1
    dense_only = set(c.mlp_only_layers or [])
    # modeling_qwen3_moe.py, Qwen3MoeDecoderLayer: MoE when layer_idx not in mlp_only_layers and
    # num_experts > 0 and (layer_idx + 1) % decoder_sparse_step == 0
    moe_layers = [i for i in range(c.num_hidden_layers)
                  if i not in dense_only and (i + 1) % step == 0]
    shared_width = c.shared_expert_intermediate_size or 0
    if shared_width % c.moe_intermediate_size:
        raise UserInputError(
            f"{where}: shared_expert_intermediate_size",
            shared_width,
            f"ctxplan models the shared expert as whole experts of moe_intermediate_size "
            f"= {c.moe_intermediate_size}; write a ctxplan model YAML",
            "not a multiple of moe_intermediate_size",
        )
    if not moe_layers:  # every layer listed in mlp_only_layers: a dense model
        return FamilyParts(layers=layers)
    field_name = "mlp_only_layers" if c.mlp_only_layers else "moe_layer_freq"
    return FamilyParts(moe=MoELayers(c.num_experts, shared_width // c.moe_intermediate_size,
                                     c.num_experts_per_tok, c.moe_intermediate_size, moe_layers,
                                     field_name), layers=layers)


def qwen3_next(c: HFConfig, where: str) -> FamilyParts:
    """Qwen3-Next: Qwen3-MoE's experts; Gated DeltaNet layers with a gated full attention layer
    every ``full_attention_interval`` (configuration_qwen3_next.py: layer_types
    "linear_attention" if (i + 1) % full_attention_interval else "full_attention";
    modeling_qwen3_next.py: Qwen3NextAttention's q_proj also yields a sigmoid output gate)."""
    moe = qwen_moe(c, where).moe
    interval = c.full_attention_interval or 4
    types = _layer_types(c, lambda i: LINEAR_ATTENTION if (i + 1) % interval else FULL_ATTENTION)
    return FamilyParts(moe=moe, layers=_kinds(types, c, where, attention_output_gate=True))


def mixtral(c: HFConfig, where: str) -> FamilyParts:
    """Mixtral: every layer sparse; each expert is an FFN of intermediate_size."""
    layers = _windowed_everywhere(c, where)
    if not c.num_local_experts:
        return FamilyParts(layers=layers)
    require_all(c, ("num_experts_per_tok",), where, "MoE")
    assert c.num_experts_per_tok is not None
    # modeling_mixtral.py: every decoder layer holds a MixtralSparseMoeBlock
    return FamilyParts(moe=MoELayers(c.num_local_experts, 0, c.num_experts_per_tok,
                                     _width(c, where), list(range(c.num_hidden_layers)),
                                     "moe_layer_freq"), layers=layers)


def gpt_oss(c: HFConfig, where: str) -> FamilyParts:
    """gpt-oss: every layer MoE (router + experts of intermediate_size, no shared expert,
    modeling_gpt_oss.py GptOssMLP); sliding-window and full attention alternating from a
    sliding layer (configuration_gpt_oss.py: "sliding_attention" if (i + 1) % 2 else
    "full_attention"), with a learned sink logit per head in every layer (``sinks``)."""
    require_all(c, ("num_local_experts",), where, "MoE")
    top_k = c.num_experts_per_tok or c.experts_per_token
    if top_k is None:
        raise UserInputError(f"{where}: num_experts_per_tok", None,
                             "add 'num_experts_per_tok' (or 'experts_per_token')",
                             "required field missing")
    assert c.num_local_experts is not None
    moe = MoELayers(c.num_local_experts, 0, top_k, _width(c, where),
                    list(range(c.num_hidden_layers)), "num_local_experts")
    types = _layer_types(c, lambda i: SLIDING_ATTENTION if (i + 1) % 2 else FULL_ATTENTION)
    return FamilyParts(moe=moe, layers=_kinds(types, c, where, attention_sinks=True))


def glm4_moe(c: HFConfig, where: str) -> FamilyParts:
    """GLM-4.5 / 4.6 (glm4_moe): GQA; DeepSeekMoE-style experts (routed + shared) in every layer
    from first_k_dense_replace on (modeling_glm4_moe.py, Glm4MoeDecoderLayer: Glm4MoeMoE when
    layer_idx >= config.first_k_dense_replace)."""
    fields = ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")
    require_all(c, fields, where, "MoE")
    assert c.n_routed_experts and c.num_experts_per_tok and c.moe_intermediate_size
    first_k = c.first_k_dense_replace or 0
    layers = list(range(first_k, c.num_hidden_layers))
    moe = MoELayers(c.n_routed_experts, c.n_shared_experts or 0, c.num_experts_per_tok,
                    c.moe_intermediate_size, layers, "first_k_dense_replace") if layers else None
    return FamilyParts(moe=moe)


def gemma3(c: HFConfig, where: str) -> FamilyParts:
    """Gemma 3: dense (GeGLU, costed as SwiGLU); sliding-window layers with a global one every
    ``sliding_window_pattern`` (configuration_gemma3.py: "sliding_attention" if
    (i + 1) % sliding_window_pattern else "full_attention")."""
    every = c.sliding_window_pattern or 6
    types = _layer_types(c, lambda i: SLIDING_ATTENTION if (i + 1) % every else FULL_ATTENTION)
    return FamilyParts(layers=_kinds(types, c, where))


def llama4(c: HFConfig, where: str) -> FamilyParts:
    """Llama 4: chunked local attention on the RoPE layers, full attention on the NoPE ones
    (configuration_llama4.py: no_rope_layers[i] = 1 for RoPE layers, by default every layer but
    each 4th; layer_types "chunked_attention" if no_rope_layers[i] else "full_attention").
    MoE layers (``moe_layers``, by default every interleave_moe_layer_step-th) hold routed
    experts of ``intermediate_size`` and one shared expert of that width (modeling_llama4.py,
    Llama4TextMoe); the dense layers' FFN is ``intermediate_size_mlp`` wide."""
    n = c.num_hidden_layers
    rope = c.no_rope_layers or [int((i + 1) % 4 != 0) for i in range(n)]
    if len(rope) != n:
        raise UserInputError(f"{where}: no_rope_layers", f"{len(rope)} entries",
                             f"give one entry per layer (num_hidden_layers = {n})",
                             "wrong number of layers")
    chunked = CHUNKED_ATTENTION if c.attention_chunk_size is not None else FULL_ATTENTION
    types = _layer_types(c, lambda i: chunked if rope[i] else FULL_ATTENTION)
    parts = FamilyParts(layers=_kinds(types, c, where), intermediate_size=c.intermediate_size_mlp)
    if not c.num_local_experts:
        return parts
    require_all(c, ("num_experts_per_tok",), where, "MoE")
    assert c.num_experts_per_tok is not None
    step = c.interleave_moe_layer_step or 1
    layers = (sorted(c.moe_layers) if c.moe_layers is not None
              else list(range(step - 1, n, step)))
    if not layers:
        return parts
    moe = MoELayers(c.num_local_experts, 1, c.num_experts_per_tok, _width(c, where), layers,
                    "moe_layers")
    return FamilyParts(moe=moe, layers=parts.layers, intermediate_size=parts.intermediate_size)


# model_type -> its architecture class and translator (and its config class's defaults for
# fields configs omit): one line per family.
FAMILIES: dict[str, Family] = {
    "llama": Family("LlamaForCausalLM", dense),
    "mistral": Family("MistralForCausalLM", mistral),
    "qwen2": Family("Qwen2ForCausalLM", qwen_dense),
    "qwen3": Family("Qwen3ForCausalLM", qwen_dense),
    "qwen2_moe": Family("Qwen2MoeForCausalLM", qwen_moe),
    "qwen3_moe": Family("Qwen3MoeForCausalLM", qwen_moe),
    "deepseek_v2": Family("DeepseekV2ForCausalLM", deepseek),
    "deepseek_v3": Family("DeepseekV3ForCausalLM", deepseek),
    "mixtral": Family("MixtralForCausalLM", mixtral),
    # Kimi K2's config.json names DeepSeek-V3's class (remote code): a file without model_type
    # is read as deepseek_v3, the same translator.
    "kimi_k2": Family("DeepseekV3ForCausalLM", deepseek),
    "deepseek_v32": Family("DeepseekV32ForCausalLM", deepseek_v32, MappingProxyType(
        {"index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048})),
    "deepseek_v4": Family("DeepseekV4ForCausalLM", deepseek_v4),
    "gpt_oss": Family("GptOssForCausalLM", gpt_oss, MappingProxyType({"sliding_window": 128})),
    "glm4_moe": Family("Glm4MoeForCausalLM", glm4_moe),
    "qwen3_next": Family("Qwen3NextForCausalLM", qwen3_next, MappingProxyType({
        "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4})),
    "gemma3": Family("Gemma3ForConditionalGeneration", gemma3, MappingProxyType({
        "vocab_size": 262208, "tie_word_embeddings": True, "sliding_window": 4096,
        "sliding_window_pattern": 6, "max_position_embeddings": 131072})),
    "gemma3_text": Family("Gemma3ForCausalLM", gemma3, MappingProxyType({
        "vocab_size": 262208, "tie_word_embeddings": True, "sliding_window": 4096,
        "sliding_window_pattern": 6, "max_position_embeddings": 131072})),
    "llama4": Family("Llama4ForConditionalGeneration", llama4, MappingProxyType(
        {"attention_chunk_size": 8192, "intermediate_size_mlp": 16384})),
    "llama4_text": Family("Llama4ForCausalLM", llama4, MappingProxyType(
        {"attention_chunk_size": 8192, "intermediate_size_mlp": 16384})),
}
SUPPORTED_MODEL_TYPES = tuple(FAMILIES)
_ARCHITECTURES: dict[str, str] = {}
for _model_type_name, _family in FAMILIES.items():  # the first family naming a class keeps it
    _ARCHITECTURES.setdefault(_family.architecture, _model_type_name)


# ------------------------------------------------------------------------------ translation


def looks_like_hf(d: Mapping[str, Any], path: str | Path | None = None) -> bool:
    """A Hugging Face config: a file named config.json (the name transformers gives it), or a
    mapping carrying model_type or architectures (at its top or in its text_config)."""
    if path is not None and Path(path).name.lower() == "config.json":
        return True
    text = d.get("text_config")
    keys = set(d) | (set(text) if isinstance(text, Mapping) else set())
    return "model_type" in keys or "architectures" in keys


def model_from_hf_config(d: dict[str, Any], where: str) -> ModelSpec:
    """A Hugging Face config.json mapping (with optional ``name`` / ``source`` /
    ``weight_dtype`` overrides) as a checked ModelSpec; supported model_type: see FAMILIES."""
    model_type = _model_type(d, where)
    family = FAMILIES[model_type]
    flat = _text_model(d, where)
    defaulted = {k: v for k, v in family.defaults.items() if k not in flat}
    c = validate(HFConfig, flat | defaulted, where, every=True)
    parts = family.translate(c, where)
    weight_dtype, expert_dtype, dtype_note = _hf_weight_dtypes(c, parts.moe is not None, where)
    if defaulted:
        shown = ", ".join(f"{k} {v}" for k, v in defaulted.items())
        dtype_note += f"; {shown} from the configuration class's defaults"
    if c.num_nextn_predict_layers and not parts.layers.mtp_layer_types:
        dtype_note += f"; {c.num_nextn_predict_layers} MTP layer(s) not modelled"
    intermediate = parts.intermediate_size or c.intermediate_size
    if intermediate is None:
        raise UserInputError(f"{where}: intermediate_size", None, "add the dense FFN's width",
                             "required field missing")
    return build_model(
        where,
        name=c.name or _name_from(where, model_type),
        source=c.source or f"Hugging Face config.json ({where}); model_type {model_type}"
        f"{dtype_note}",
        weight_dtype=weight_dtype,
        **same_named(c, SHAPE_FIELDS),
        intermediate_size=intermediate,
        mla=parts.mla,
        moe=parts.moe,
        layers=parts.layers,
        expert_weight_dtype=expert_dtype,
        context=context_from(c),
        hc_mult=parts.hc_mult,
    )


def _text_model(d: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The text model's fields: a multimodal config's ``text_config`` with the top level filling
    in what it lacks (quantization, dtype, tied embeddings); ``model_type``, ``architectures``
    and the user's overrides come from the top level."""
    text = d.get("text_config")
    if text is None:
        return dict(d)
    if not isinstance(text, Mapping):
        raise UserInputError(f"{where}: text_config", type(text).__name__,
                             "give the text model's fields as a mapping", "not a mapping")
    top = {k: v for k, v in d.items() if k not in ("text_config", "vision_config")}
    merged = top | dict(text)
    for key in ("model_type", "architectures", *_OVERRIDES):
        if key in top:
            merged[key] = top[key]
    return merged


def _model_type(d: Any, where: str) -> str:
    if not isinstance(d, Mapping):
        raise UserInputError(where, type(d).__name__, "give a config.json mapping", "not a mapping")
    text = d.get("text_config")
    inner = text if isinstance(text, Mapping) else {}
    raw = d.get("model_type", inner.get("model_type"))
    if raw is None:  # older files: infer it from the architecture class name
        archs = d.get("architectures", inner.get("architectures"))
        arch = archs[0] if isinstance(archs, list) and archs else archs
        raw = _ARCHITECTURES.get(arch, arch) if isinstance(arch, str) else arch
    if raw is None:
        raise UserInputError(
            f"{where}: model_type", None,
            f"add 'model_type' as the publisher's config.json states it (one of "
            f"{', '.join(SUPPORTED_MODEL_TYPES)}), or 'architectures', or describe the model "
            "in a ctxplan model YAML", "required field missing")
    if raw not in FAMILIES:
        raise UserInputError(
            f"{where}: model_type",
            raw,
            f"use a config.json with model_type one of {', '.join(SUPPORTED_MODEL_TYPES)}, or "
            "describe the model in a ctxplan model YAML",
            "unsupported model_type",
        )
    assert isinstance(raw, str)
    return raw


def _hf_weight_dtypes(c: HFConfig, has_experts: bool, where: str
                      ) -> tuple[str, str | None, str]:
    """(weight_dtype, the routed experts' dtype when it differs, note for the source line)."""
    if c.weight_dtype is not None:
        return c.weight_dtype, None, ""
    base, experts, note = _hf_base_dtypes(c, has_experts, where)
    if c.expert_dtype is None:
        return base, experts, note
    # DeepSeek-V4: expert_dtype states the routed experts' format apart from quantization_config
    given = _EXPERT_DTYPES.get(c.expert_dtype.lower())
    if given is None:
        raise UserInputError(f"{where}: expert_dtype", c.expert_dtype,
                             f"use one of {', '.join(_EXPERT_DTYPES)}, or give "
                             "expert_weight_dtype in a ctxplan model YAML",
                             "expert format not understood")
    if not has_experts:
        raise UserInputError(f"{where}: expert_dtype", c.expert_dtype,
                             "drop it: the model has no experts", "a dense model")
    given = given or base
    return base, (given if given != base else None), note + f"; routed experts {given} " \
        f"(expert_dtype {c.expert_dtype})"


# config.json's expert_dtype -> the routed experts' storage dtype ("" : the rest's). DeepSeek-V4's
# "fp4" experts carry one UE8M0 scale per 32 values: MXFP4 (docs/model.md, "DeepSeek-V4").
_EXPERT_DTYPES = {"fp4": "mxfp4", "mxfp4": "mxfp4", "nvfp4": "nvfp4", "fp8": "", "bf16": "bf16"}


def _hf_base_dtypes(c: HFConfig, has_experts: bool, where: str
                    ) -> tuple[str, str | None, str]:
    """The weights' dtypes as quantization_config and torch_dtype state them."""
    raw = c.torch_dtype or c.dtype
    plain = _TORCH_DTYPES.get(raw or "")
    q = c.quantization_config
    if q:
        method = str(q.get("quant_method", "")).lower()
        if method == "mxfp4":
            # gpt-oss: the MoE experts in MXFP4, attention, router, embeddings and head left in
            # the checkpoint dtype (quantization_config.modules_to_not_convert).
            if not has_experts:
                raise UserInputError(
                    f"{where}: quantization_config.quant_method", q.get("quant_method"),
                    "add weight_dtype (e.g. mxfp4) to the config: ctxplan reads MXFP4 as the "
                    "routed experts' format", "mxfp4 without MoE experts")
            base = plain or "bf16"
            return base, "mxfp4", f"; routed experts mxfp4, the rest {base} (quantization_config)"
        dtype = _quant_dtype(method, q)
        if dtype is None:
            raise UserInputError(
                f"{where}: quantization_config.quant_method",
                q.get("quant_method"),
                "add weight_dtype (bf16, fp16, fp8, fp8-block128, mxfp4, nvfp4, fp32, int8 or "
                "int4) to the config to say how the weights are stored",
                "quantization scheme not understood",
            )
        return dtype, None, f"; weights {dtype} from quantization_config ({method})"
    if plain is not None:
        return plain, None, ""
    return "bf16", None, "; weight_dtype bf16 assumed (no torch_dtype)"


def _quant_dtype(method: str, q: Mapping[str, Any]) -> str | None:
    if method in ("fp8", "fbgemm_fp8"):
        # DeepSeek-V3 / V3.2, Kimi K2: FP8 with an FP32 scale per 128 x 128 block
        block = q.get("weight_block_size")
        return "fp8-block128" if block == [128, 128] else "fp8"
    if method in ("gptq", "awq"):
        return {4: "int4", 8: "int8"}.get(q.get("bits"))  # type: ignore[arg-type]
    if method == "bitsandbytes":
        if q.get("load_in_4bit"):
            return "int4"
        return "int8" if q.get("load_in_8bit") else None
    if method == "compressed-tensors":
        groups = q.get("config_groups")
        kinds: set[tuple[Any, Any]] = set()
        if isinstance(groups, Mapping):
            for g in groups.values():
                w = g.get("weights") if isinstance(g, Mapping) else None
                if isinstance(w, Mapping):
                    kinds.add((w.get("num_bits"), w.get("type")))
        table: dict[tuple[Any, Any], str] = {
            (8, "float"): "fp8",
            (8, "int"): "int8",
            (4, "int"): "int4",
        }
        return table.get(kinds.pop()) if len(kinds) == 1 else None
    return None


def _name_from(where: str, model_type: str) -> str:
    p = Path(where)
    if p.suffix.lower() == ".json":
        return p.parent.name if p.stem == "config" and p.parent.name else p.stem
    return model_type
