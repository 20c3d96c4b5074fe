"""Model presets and loaders: preset names, ctxplan model YAML, Hugging Face config.json.

Everything here turns user input into a :class:`ctxplan.model.ModelSpec` or raises a one-line
:class:`ctxplan.errors.UserInputError` naming the field. No hub access: a config.json is read
from a local file.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from ctxplan.config.loader import read_mapping, validate
from ctxplan.config.model_schema import HFConfig, ModelFile
from ctxplan.errors import UserInputError
from ctxplan.model.spec import MLASpec, ModelSpec, MoESpec

PRESET_DIR = Path(__file__).resolve().parent / "presets" / "models"

# Other names users reach for (the spec's worked example says "deepseek-v3-671b").
ALIASES: dict[str, str] = {
    "deepseek-v3-671b": "deepseek-v3",
    "llama-3.1-405b": "llama3.1-405b",
    "llama-3.1-70b": "llama3.1-70b",
    "llama-3.1-8b": "llama3.1-8b",
    "qwen2.5-7b-instruct-1m": "qwen2.5-7b-1m",
}

DENSE_TYPES = ("llama", "mistral", "qwen2", "qwen3")
QWEN_MOE_TYPES = ("qwen2_moe", "qwen3_moe")
DEEPSEEK_TYPES = ("deepseek_v2", "deepseek_v3")
MIXTRAL_TYPES = ("mixtral",)
SUPPORTED_MODEL_TYPES = DENSE_TYPES + QWEN_MOE_TYPES + DEEPSEEK_TYPES + MIXTRAL_TYPES

# architectures[0] -> model_type, for config files that omit model_type
_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "MixtralForCausalLM": "mixtral",
}

_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
_MLA_FIELDS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
_MOE_FIELDS = ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")


# --------------------------------------------------------------------------------------- presets


def model_names() -> list[str]:
    """Names of the built-in model presets."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


@cache
def _load_preset(name: str) -> ModelSpec:
    path = PRESET_DIR / f"{name}.yaml"
    return model_from_dict(read_mapping(path, f"model preset {name}"), f"model preset {name}")


def load_model(name_or_path: str) -> ModelSpec:
    """A preset name (case-insensitive), a ctxplan model YAML / JSON, a local Hugging Face
    config.json (recognised by its model_type / architectures keys), or a directory holding one."""
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise _unknown(name_or_path)
    key = name_or_path.strip().lower()
    key = ALIASES.get(key, key)
    if key in model_names():
        return _load_preset(key)
    path = Path(name_or_path).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    if not path.is_file():
        raise _unknown(name_or_path)
    where = str(path)
    data = read_mapping(path, "model")
    if _looks_like_hf(data):
        return model_from_hf_config(data, where)
    return model_from_dict(data, where)


def _unknown(value: object) -> UserInputError:
    return UserInputError(
        "model",
        value,
        f"use a preset ({', '.join(model_names())}) or the path of a model YAML or a "
        "Hugging Face config.json",
        "unknown model",
    )


def _looks_like_hf(d: Mapping[str, Any]) -> bool:
    return "model_type" in d or "architectures" in d


# ------------------------------------------------------------------------------- our YAML format


def model_from_dict(d: dict[str, Any], where: str) -> ModelSpec:
    """A ctxplan model mapping (preset file, user file or inline study definition).

    A mapping carrying ``model_type`` or ``architectures`` is a pasted config.json and is read
    as one (with optional ``name`` / ``source`` / ``weight_dtype`` overrides).
    """
    if isinstance(d, Mapping) and _looks_like_hf(d):
        return model_from_hf_config(dict(d), where)
    f = validate(ModelFile, d, where)

    def err(field: str, fix: str, problem: str) -> UserInputError:
        return UserInputError(f"{where}: {field}", getattr(f, field), fix, problem)

    heads = f.num_attention_heads
    kv_heads = f.num_key_value_heads if f.num_key_value_heads is not None else heads
    mla = _mla_from(f, where)
    if mla is None and heads % kv_heads:
        raise err(
            "num_key_value_heads",
            f"give a divisor of num_attention_heads = {heads}",
            "num_attention_heads is not a multiple of it",
        )
    head_dim = _head_dim(f.head_dim, f.hidden_size, heads, mla is not None, where)
    moe = None
    moe_keys = {*_MOE_FIELDS, "n_shared_experts", "first_k_dense_replace", "moe_layer_freq"}
    if any(getattr(f, k) is not None for k in f.model_fields_set & moe_keys):
        _require_all(f, _MOE_FIELDS, where, "MoE")
        assert f.n_routed_experts and f.num_experts_per_tok and f.moe_intermediate_size
        if f.num_experts_per_tok > f.n_routed_experts:
            raise err(
                "num_experts_per_tok",
                f"give at most n_routed_experts = {f.n_routed_experts}",
                "more experts per token than experts",
            )
        layers = [
            i
            for i in range(f.num_hidden_layers)
            if i >= f.first_k_dense_replace and i % f.moe_layer_freq == 0
        ]
        if not layers:
            raise err(
                "first_k_dense_replace",
                f"give a value below num_hidden_layers = {f.num_hidden_layers}, or drop the MoE "
                "fields for a dense model",
                "no layer would be MoE",
            )
        first, freq = _fit_layer_pattern(layers, f.num_hidden_layers, where, "moe_layer_freq")
        moe = MoESpec(
            n_routed_experts=f.n_routed_experts,
            n_shared_experts=f.n_shared_experts or 0,
            num_experts_per_tok=f.num_experts_per_tok,
            moe_intermediate_size=f.moe_intermediate_size,
            first_k_dense_replace=first,
            moe_layer_freq=freq,
        )
    return ModelSpec(
        name=f.name,
        num_hidden_layers=f.num_hidden_layers,
        hidden_size=f.hidden_size,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=f.intermediate_size,
        vocab_size=f.vocab_size,
        tie_word_embeddings=f.tie_word_embeddings,
        mla=mla,
        moe=moe,
        weight_dtype=f.weight_dtype,
        source=f.source or f"user model ({where})",
    )


def model_to_dict(m: ModelSpec) -> dict[str, Any]:
    """The ctxplan YAML mapping of ``m``; ``model_from_dict`` reads it back to an equal spec."""
    d: dict[str, Any] = {
        "name": m.name,
        "source": m.source,
        "weight_dtype": m.weight_dtype,
        "num_hidden_layers": m.num_hidden_layers,
        "hidden_size": m.hidden_size,
        "num_attention_heads": m.num_attention_heads,
        "num_key_value_heads": m.num_key_value_heads,
        "head_dim": m.head_dim,
        "intermediate_size": m.intermediate_size,
        "vocab_size": m.vocab_size,
        "tie_word_embeddings": m.tie_word_embeddings,
    }
    if m.mla is not None:
        d |= {
            "q_lora_rank": m.mla.q_lora_rank,
            "kv_lora_rank": m.mla.kv_lora_rank,
            "qk_nope_head_dim": m.mla.qk_nope_head_dim,
            "qk_rope_head_dim": m.mla.qk_rope_head_dim,
            "v_head_dim": m.mla.v_head_dim,
        }
    if m.moe is not None:
        moe = m.moe
        if moe.moe_layer_freq > 1 and moe.first_k_dense_replace % moe.moe_layer_freq:
            # config.json counts the frequency from layer 0; express the same layer set.
            raise ValueError(
                f"{m.name}: MoE layers {moe.first_k_dense_replace} + k*{moe.moe_layer_freq} "
                "have no config.json form (first MoE layer must be a multiple of moe_layer_freq)"
            )
        d |= {
            "n_routed_experts": moe.n_routed_experts,
            "n_shared_experts": moe.n_shared_experts,
            "num_experts_per_tok": moe.num_experts_per_tok,
            "moe_intermediate_size": moe.moe_intermediate_size,
            "first_k_dense_replace": moe.first_k_dense_replace,
            "moe_layer_freq": moe.moe_layer_freq,
        }
    return d


# ------------------------------------------------------------------------- Hugging Face config.json


def model_from_hf_config(d: dict[str, Any], where: str) -> ModelSpec:
    """A Hugging Face config.json as the publisher ships it (local file content, no hub access).

    Supported model_type: llama, mistral, qwen2, qwen3 (dense GQA); qwen2_moe, qwen3_moe, mixtral
    (GQA + MoE); deepseek_v2, deepseek_v3 (MLA + MoE). Keys ctxplan does not model are ignored
    (rope_scaling, sliding_window, MTP layers, ...). weight_dtype comes from quantization_config,
    else torch_dtype / dtype, else bf16.
    """
    model_type = _model_type(d, where)
    c = validate(HFConfig, d, where)
    heads = c.num_attention_heads
    kv_heads = c.num_key_value_heads if c.num_key_value_heads is not None else heads
    mla: MLASpec | None = None
    moe: MoESpec | None = None
    n_layers = c.num_hidden_layers

    if model_type in DEEPSEEK_TYPES:
        _require_all(c, _MLA_FIELDS, where, "MLA")
        mla = _mla_from(c, where)
        if c.n_routed_experts is not None:
            _require_all(c, ("num_experts_per_tok", "moe_intermediate_size"), where, "MoE")
            first_k = c.first_k_dense_replace or 0
            freq = c.moe_layer_freq or 1
            # modeling_deepseek.py, DeepseekV3DecoderLayer: MoE when
            # layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq == 0
            layers = [i for i in range(n_layers) if i >= first_k and i % freq == 0]
            moe = _moe_spec(c, where, layers, c.n_routed_experts, c.n_shared_experts or 0)
    elif model_type in QWEN_MOE_TYPES:
        if c.num_experts:
            _require_all(c, ("num_experts_per_tok", "moe_intermediate_size"), where, "MoE")
            assert c.moe_intermediate_size is not None
            step = c.decoder_sparse_step or 1
            dense_only = set(c.mlp_only_layers or [])
            # modeling_qwen3_moe.py, Qwen3MoeDecoderLayer: MoE when layer_idx not in
            # mlp_only_layers and num_experts > 0 and (layer_idx + 1) % decoder_sparse_step == 0
            layers = [i for i in range(n_layers) if i not in dense_only and (i + 1) % step == 0]
            shared_width = c.shared_expert_intermediate_size or 0
            if shared_width % c.moe_intermediate_size:
                raise UserInputError(
                    f"{where}: shared_expert_intermediate_size",
                    shared_width,
                    f"ctxplan models the shared expert as whole experts of moe_intermediate_size "
                    f"= {c.moe_intermediate_size}; write a ctxplan model YAML",
                    "not a multiple of moe_intermediate_size",
                )
            n_shared = shared_width // c.moe_intermediate_size
            moe = _moe_spec(c, where, layers, c.num_experts, n_shared)
    elif model_type in MIXTRAL_TYPES and c.num_local_experts:
        # modeling_mixtral.py: every layer is sparse; each expert has intermediate_size
        _require_all(c, ("num_experts_per_tok",), where, "MoE")
        n_experts = c.num_local_experts
        c = c.model_copy(update={"moe_intermediate_size": c.intermediate_size})
        moe = _moe_spec(c, where, list(range(n_layers)), n_experts, 0)

    if mla is None and heads % kv_heads:
        raise UserInputError(
            f"{where}: num_key_value_heads",
            kv_heads,
            f"give a divisor of num_attention_heads = {heads}",
            "num_attention_heads is not a multiple of it",
        )
    weight_dtype, dtype_note = _hf_weight_dtype(c, where)
    if c.num_nextn_predict_layers:
        dtype_note += f"; {c.num_nextn_predict_layers} MTP layer(s) not modelled"
    source = c.source or f"Hugging Face config.json ({where}); model_type {model_type}{dtype_note}"
    return ModelSpec(
        name=c.name or _name_from(where, model_type),
        num_hidden_layers=n_layers,
        hidden_size=c.hidden_size,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=_head_dim(c.head_dim, c.hidden_size, heads, mla is not None, where),
        intermediate_size=c.intermediate_size,
        vocab_size=c.vocab_size,
        tie_word_embeddings=c.tie_word_embeddings,
        mla=mla,
        moe=moe,
        weight_dtype=weight_dtype,
        source=source,
    )


def _model_type(d: Any, where: str) -> str:
    if not isinstance(d, Mapping):
        raise UserInputError(where, type(d).__name__, "give a config.json mapping", "not a mapping")
    raw = d.get("model_type")
    if raw is None:  # older files: infer it from the architecture class name
        archs = d.get("architectures")
        arch = archs[0] if isinstance(archs, list) and archs else archs
        raw = _ARCHITECTURES.get(arch, arch) if isinstance(arch, str) else arch
    if raw not in SUPPORTED_MODEL_TYPES:
        raise UserInputError(
            f"{where}: model_type",
            raw,
            f"use a config.json with model_type one of {', '.join(SUPPORTED_MODEL_TYPES)}, or "
            "describe the model in a ctxplan model YAML",
            "unsupported model_type",
        )
    assert isinstance(raw, str)
    return raw


def _moe_spec(
    c: HFConfig, where: str, layers: list[int], n_routed: int, n_shared: int
) -> MoESpec | None:
    if not layers:
        return None  # e.g. every layer listed in mlp_only_layers: a dense model
    assert c.num_experts_per_tok is not None and c.moe_intermediate_size is not None
    if c.num_experts_per_tok > n_routed:
        raise UserInputError(
            f"{where}: num_experts_per_tok",
            c.num_experts_per_tok,
            f"give at most the number of experts ({n_routed})",
            "more experts per token than experts",
        )
    field = "mlp_only_layers" if c.mlp_only_layers else "moe_layer_freq"
    first, freq = _fit_layer_pattern(layers, c.num_hidden_layers, where, field)
    return MoESpec(
        n_routed_experts=n_routed,
        n_shared_experts=n_shared,
        num_experts_per_tok=c.num_experts_per_tok,
        moe_intermediate_size=c.moe_intermediate_size,
        first_k_dense_replace=first,
        moe_layer_freq=freq,
    )


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


# ------------------------------------------------------------------------------------ shared


def _require_all(obj: Any, fields: tuple[str, ...], where: str, what: str) -> None:
    for field in fields:
        if getattr(obj, field) is None:
            given = [f for f in fields if getattr(obj, f) is not None]
            raise UserInputError(
                f"{where}: {field}",
                None,
                f"add '{field}': {what} needs all of {', '.join(fields)}"
                + (f" (found {', '.join(given)})" if given else ""),
                "required field missing",
            )


def _mla_from(f: ModelFile | HFConfig, where: str) -> MLASpec | None:
    if all(getattr(f, k) is None for k in (*_MLA_FIELDS, "q_lora_rank")):
        return None
    _require_all(f, _MLA_FIELDS, where, "MLA")
    assert f.kv_lora_rank and f.qk_nope_head_dim and f.qk_rope_head_dim and f.v_head_dim
    return MLASpec(
        q_lora_rank=f.q_lora_rank,
        kv_lora_rank=f.kv_lora_rank,
        qk_nope_head_dim=f.qk_nope_head_dim,
        qk_rope_head_dim=f.qk_rope_head_dim,
        v_head_dim=f.v_head_dim,
    )


def _head_dim(head_dim: int | None, hidden: int, heads: int, is_mla: bool, where: str) -> int:
    if head_dim is not None:
        return head_dim
    if hidden % heads and not is_mla:  # MLA does not use head_dim: floor is harmless there
        raise UserInputError(
            f"{where}: head_dim",
            None,
            f"add head_dim (hidden_size {hidden} is not a multiple of num_attention_heads {heads})",
            "required field missing",
        )
    return max(1, hidden // heads)


def _fit_layer_pattern(layers: list[int], n_layers: int, where: str, field: str) -> tuple[int, int]:
    """(first_k_dense_replace, moe_layer_freq) of MoESpec reproducing exactly the MoE layer set
    ``layers``; UserInputError naming ``field`` when no such pair exists."""
    first = layers[0]
    if len(layers) > 1:
        freq = layers[1] - layers[0]
    elif first > 0 and 2 * first >= n_layers:
        # One MoE layer: take its own index as the period, so the pair also has a config.json
        # form (first a multiple of freq), which model_to_dict needs to write it back.
        freq = first
    else:
        freq = max(1, n_layers - first)
    produced = list(range(first, n_layers, freq))
    if produced != layers:
        raise UserInputError(
            f"{where}: {field}",
            layers if len(layers) <= 8 else f"{len(layers)} MoE layers from {first}",
            "ctxplan models MoE layers as every k-th layer after the leading dense ones; "
            "describe the model in a ctxplan model YAML with that pattern",
            "irregular MoE layer pattern",
        )
    return first, freq
