"""Hugging Face config.json -> ModelSpec: a table of small translators, one per ``model_type``.

A config.json is read as the publisher ships it (a local file, no hub access). Every family
shares the fields of :class:`ctxplan.config.model_schema.HFConfig` (layers, widths, heads,
vocabulary); what differs is how the family states attention (MLA or not) and its MoE layers.
A translator reads exactly that and returns :class:`FamilyParts`; :func:`model_from_hf_config`
then builds and checks the ModelSpec in one place (:func:`ctxplan.config.model_build.build_model`).

To add a family: write its translator (cite the transformers modeling file that defines its
layer pattern) and add one line to :data:`FAMILIES`. Keys ctxplan does not model (rope_scaling,
sliding_window, MTP layers, ...) are ignored. weight_dtype comes from quantization_config, else
torch_dtype / dtype, else bf16.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxplan.config.loader import validate
from ctxplan.config.model_build import MLA_FIELDS, MoELayers, build_model, mla_from, require_all
from ctxplan.config.model_schema import HFConfig
from ctxplan.errors import UserInputError
from ctxplan.model.spec import MLASpec, ModelSpec

_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


@dataclass(frozen=True)
class FamilyParts:
    """What a family's config says beyond the shared fields: MLA, and the MoE block."""

    mla: MLASpec | None = None
    moe: MoELayers | None = None


Translator = Callable[[HFConfig, str], FamilyParts]


@dataclass(frozen=True)
class Family:
    architecture: str          # architectures[0] of its config.json (for files without model_type)
    translate: Translator


# --------------------------------------------------------------------------------- translators


def dense(c: HFConfig, where: str) -> FamilyParts:
    """Dense GQA / MHA decoders: nothing beyond the shared fields."""
    return FamilyParts()


def deepseek(c: HFConfig, where: str) -> FamilyParts:
    """DeepSeek-V2 / V3: MLA, and DeepSeekMoE after the first dense layers."""
    require_all(c, MLA_FIELDS, where, "MLA")
    if c.n_routed_experts is None:
        return FamilyParts(mla=mla_from(c, where))
    require_all(c, ("num_experts_per_tok", "moe_intermediate_size"), where, "MoE")
    assert c.num_experts_per_tok is not None and c.moe_intermediate_size is not None
    first_k = c.first_k_dense_replace or 0
    freq = c.moe_layer_freq or 1
    # modeling_deepseek.py, DeepseekV3DecoderLayer: MoE when
    # layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq == 0
    layers = [i for i in range(c.num_hidden_layers) if i >= first_k and i % freq == 0]
    moe = MoELayers(c.n_routed_experts, c.n_shared_experts or 0, c.num_experts_per_tok,
                    c.moe_intermediate_size, layers, "moe_layer_freq") if layers else None
    return FamilyParts(mla=mla_from(c, where), moe=moe)


def qwen_moe(c: HFConfig, where: str) -> FamilyParts:
    """Qwen2-MoE / Qwen3-MoE: sparse every decoder_sparse_step-th layer, but mlp_only_layers;
    the shared expert as whole experts of moe_intermediate_size."""
    if not c.num_experts:
        return FamilyParts()
    require_all(c, ("num_experts_per_tok", "moe_intermediate_size"), where, "MoE")
    assert c.num_experts_per_tok is not None and c.moe_intermediate_size is not None
    step = c.decoder_sparse_step or 1
    dense_only = set(c.mlp_only_layers or [])
    # modeling_qwen3_moe.py, Qwen3MoeDecoderLayer: MoE when layer_idx not in mlp_only_layers and
    # num_experts > 0 and (layer_idx + 1) % decoder_sparse_step == 0
    layers = [i for i in range(c.num_hidden_layers)
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
    if not layers:  # every layer listed in mlp_only_layers: a dense model
        return FamilyParts()
    field = "mlp_only_layers" if c.mlp_only_layers else "moe_layer_freq"
    return FamilyParts(moe=MoELayers(c.num_experts, shared_width // c.moe_intermediate_size,
                                     c.num_experts_per_tok, c.moe_intermediate_size, layers,
                                     field))


def mixtral(c: HFConfig, where: str) -> FamilyParts:
    """Mixtral: every layer sparse; each expert is an FFN of intermediate_size."""
    if not c.num_local_experts:
        return FamilyParts()
    require_all(c, ("num_experts_per_tok",), where, "MoE")
    assert c.num_experts_per_tok is not None
    # modeling_mixtral.py: every decoder layer holds a MixtralSparseMoeBlock
    return FamilyParts(moe=MoELayers(c.num_local_experts, 0, c.num_experts_per_tok,
                                     c.intermediate_size, list(range(c.num_hidden_layers)),
                                     "moe_layer_freq"))


# model_type -> its architecture class and translator: one line per family.
FAMILIES: dict[str, Family] = {
    "llama": Family("LlamaForCausalLM", dense),
    "mistral": Family("MistralForCausalLM", dense),
    "qwen2": Family("Qwen2ForCausalLM", dense),
    "qwen3": Family("Qwen3ForCausalLM", dense),
    "qwen2_moe": Family("Qwen2MoeForCausalLM", qwen_moe),
    "qwen3_moe": Family("Qwen3MoeForCausalLM", qwen_moe),
    "deepseek_v2": Family("DeepseekV2ForCausalLM", deepseek),
    "deepseek_v3": Family("DeepseekV3ForCausalLM", deepseek),
    "mixtral": Family("MixtralForCausalLM", mixtral),
}
SUPPORTED_MODEL_TYPES = tuple(FAMILIES)
_ARCHITECTURES = {f.architecture: model_type for model_type, f in FAMILIES.items()}


# ------------------------------------------------------------------------------ translation


def looks_like_hf(d: Mapping[str, Any]) -> bool:
    """A mapping carrying model_type or architectures is a config.json."""
    return "model_type" in d or "architectures" in d


def model_from_hf_config(d: dict[str, Any], where: str) -> ModelSpec:
    """A Hugging Face config.json mapping (with optional ``name`` / ``source`` /
    ``weight_dtype`` overrides) as a checked ModelSpec; supported model_type: see FAMILIES."""
    model_type = _model_type(d, where)
    c = validate(HFConfig, d, where)
    parts = FAMILIES[model_type].translate(c, where)
    weight_dtype, dtype_note = _hf_weight_dtype(c, where)
    if c.num_nextn_predict_layers:
        dtype_note += f"; {c.num_nextn_predict_layers} MTP layer(s) not modelled"
    return build_model(
        where,
        name=c.name or _name_from(where, model_type),
        source=c.source or f"Hugging Face config.json ({where}); model_type {model_type}"
        f"{dtype_note}",
        weight_dtype=weight_dtype,
        num_hidden_layers=c.num_hidden_layers,
        hidden_size=c.hidden_size,
        num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads,
        head_dim=c.head_dim,
        intermediate_size=c.intermediate_size,
        vocab_size=c.vocab_size,
        tie_word_embeddings=c.tie_word_embeddings,
        mla=parts.mla,
        moe=parts.moe,
    )


def _model_type(d: Any, where: str) -> str:
    if not isinstance(d, Mapping):
        raise UserInputError(where, type(d).__name__, "give a config.json mapping", "not a mapping")
    raw = d.get("model_type")
    if raw is None:  # older files: infer it from the architecture class name
        archs = d.get("architectures")
        arch = archs[0] if isinstance(archs, list) and archs else archs
        raw = _ARCHITECTURES.get(arch, arch) if isinstance(arch, str) else arch
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


def _hf_weight_dtype(c: HFConfig, where: str) -> tuple[str, str]:
    """(weight_dtype, note for the source line)."""
    if c.weight_dtype is not None:
        return c.weight_dtype, ""
    q = c.quantization_config
    if q:
        method = str(q.get("quant_method", "")).lower()
        dtype = _quant_dtype(method, q)
        if dtype is None:
            raise UserInputError(
                f"{where}: quantization_config.quant_method",
                q.get("quant_method"),
                "add weight_dtype (bf16, fp16, fp8, fp32, int8 or int4) to the config to say "
                "how the weights are stored",
                "quantization scheme not understood",
            )
        return dtype, f"; weights {dtype} from quantization_config ({method})"
    raw = c.torch_dtype or c.dtype
    if raw in _TORCH_DTYPES:
        return _TORCH_DTYPES[raw], ""
    return "bf16", "; weight_dtype bf16 assumed (no torch_dtype)"


def _quant_dtype(method: str, q: Mapping[str, Any]) -> str | None:
    if method in ("fp8", "fbgemm_fp8"):
        return "fp8"
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
