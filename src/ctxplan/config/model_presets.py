"""The model registry: preset names and aliases, and :func:`load_model`, which turns whatever a
user names (a preset, our model YAML, a Hugging Face config.json, or a directory holding one)
into a :class:`ctxplan.model.ModelSpec`.

Reading the formats is not done here: our YAML is :mod:`ctxplan.config.model_yaml`, config.json
is :mod:`ctxplan.config.hf_config` (a table of translators per model_type), and both build and
check the ModelSpec in :mod:`ctxplan.config.model_build`. No hub access: a config.json is read
from a local file. Every failure is a one-line :class:`ctxplan.errors.UserInputError`.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from ctxplan.config.hf_config import SUPPORTED_MODEL_TYPES, looks_like_hf, model_from_hf_config
from ctxplan.config.loader import read_mapping
from ctxplan.config.model_yaml import model_from_dict, model_to_dict
from ctxplan.errors import UserInputError, did_you_mean
from ctxplan.model.spec import ModelSpec

__all__ = [
    "ALIASES", "PRESET_DIR", "SUPPORTED_MODEL_TYPES", "is_model_preset", "load_model",
    "model_definition", "model_from_dict", "model_from_hf_config", "model_names",
    "model_to_dict",
]

PRESET_DIR = Path(__file__).resolve().parent / "presets" / "models"

# Other names users reach for (the spec's worked example says "deepseek-v3-671b").
ALIASES: dict[str, str] = {
    "deepseek-v3-671b": "deepseek-v3",
    "llama-3.1-405b": "llama3.1-405b",
    "llama-3.1-70b": "llama3.1-70b",
    "llama-3.1-8b": "llama3.1-8b",
    "qwen2.5-7b-instruct-1m": "qwen2.5-7b-1m",
    "deepseek-v3.2-exp": "deepseek-v3.2",
    "kimi-k2-instruct": "kimi-k2",
    "qwen3-next-80b-a3b-instruct": "qwen3-next-80b-a3b",
}


def model_names() -> list[str]:
    """Names of the built-in model presets."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def _preset_key(name: str) -> str | None:
    """The preset a name (case-insensitive, aliases allowed) stands for, or None."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    return key if key in model_names() else None


def is_model_preset(name: str) -> bool:
    return _preset_key(name) is not None


@cache
def _load_preset(name: str) -> ModelSpec:
    return model_from_dict(_preset_data(name), f"model preset {name}")


def _preset_data(name: str) -> dict[str, Any]:
    return read_mapping(PRESET_DIR / f"{name}.yaml", f"model preset {name}")


def _model_file(name_or_path: str) -> Path:
    """The file a path names (a directory holding a config.json names that file)."""
    path = Path(name_or_path).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    if not path.is_file():
        if _looks_like_path(name_or_path):
            raise UserInputError("model file", name_or_path, "give the path of an existing "
                                 "file (a model YAML or a Hugging Face config.json)",
                                 "no such file")
        raise _unknown(name_or_path)
    return path


def _looks_like_path(text: str) -> bool:
    """A path, not a misspelt preset: it has a directory part or a file suffix."""
    return "/" in text or "\\" in text or Path(text).suffix.lower() in (".yaml", ".yml",
                                                                        ".json")


def load_model(name_or_path: str) -> ModelSpec:
    """A preset name (case-insensitive), a ctxplan model YAML / JSON, a local Hugging Face
    config.json (recognised by its name, config.json, or its model_type / architectures keys),
    or a directory holding one."""
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise _unknown(name_or_path)
    preset = _preset_key(name_or_path)
    if preset is not None:
        return _load_preset(preset)
    path = _model_file(name_or_path)
    data = read_mapping(path, "model")
    if looks_like_hf(data, path):
        return model_from_hf_config(data, str(path))
    return model_from_dict(data, str(path))


def model_definition(name_or_path: str) -> dict[str, Any]:
    """The inline definition (a mapping, as a study file would hold it) that a preset name or a
    model file stands for, with its ``name`` filled in."""
    preset = _preset_key(name_or_path)
    if preset is not None:
        return _preset_data(preset)
    path = _model_file(name_or_path)
    data = read_mapping(path, "model")
    data.setdefault("name", path.parent.name if path.name == "config.json" else path.stem)
    return data


def _unknown(value: object) -> UserInputError:
    return UserInputError(
        "model",
        value,
        f"{did_you_mean(value, model_names())}use a preset ({', '.join(model_names())}) or "
        "the path of a model YAML or a Hugging Face config.json",
        "unknown model",
    )
