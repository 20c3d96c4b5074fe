"""What every API function takes: models, chips and clusters by preset, path or object; context
lengths as typed; the options of a point or a search turned into the frozen :class:`Policy`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxplan.config.hardware_presets import load_chip, load_cluster
from ctxplan.config.model_presets import load_model
from ctxplan.config.paths import check_writable
from ctxplan.config.units import format_tokens, parse_token_list, parse_tokens
from ctxplan.errors import UserInputError
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.model.precision import Precision
from ctxplan.model.spec import ModelSpec
from ctxplan.policy import Policy

if TYPE_CHECKING:
    from ctxplan.config.study import Study

ModelLike = str | ModelSpec
ChipLike = str | Chip
ClusterLike = str | Cluster | None


def resolve_model(model: ModelLike) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else load_model(model)


def resolve_chip(chip: ChipLike) -> Chip:
    return chip if isinstance(chip, Chip) else load_chip(chip)


def other_pool_system(chip: Chip, cluster: Cluster, other_chip: ChipLike | None,
                      other_cluster: ClusterLike) -> tuple[Chip | None, Cluster | None]:
    """The chip and cluster of a pool that may sit on its own (a handoff's or a solve's decode
    pool), each None where it is ``chip`` / ``cluster``: the chip given; the cluster given,
    else that chip's own when it is another chip, else ``cluster`` (docs/handoff.md, "Pools
    on two clusters")."""
    oc = resolve_chip(other_chip) if other_chip is not None else None
    if oc is not None and oc == chip:
        oc = None
    if other_cluster is not None:
        ok: Cluster | None = resolve_cluster(other_cluster, oc or chip)
    else:
        ok = resolve_cluster(None, oc) if oc is not None else None
    if ok is not None and ok == cluster:
        ok = None
    return oc, ok


def resolve_cluster(cluster: ClusterLike, chip: Chip) -> Cluster:
    """The cluster given, or the chip's default cluster."""
    if isinstance(cluster, Cluster):
        return cluster
    return load_cluster(cluster if cluster else chip.default_cluster)


def model_items(model: ModelLike | Sequence[ModelLike]) -> list[ModelLike]:
    """The models ``model`` names, unresolved: a list, or names separated by commas
    ("deepseek-v3,deepseek-v3.2"; a path that exists is one model even if it holds a comma)."""
    if isinstance(model, str) and "," in model and not Path(model).expanduser().exists():
        items: list[ModelLike] = [m.strip() for m in model.split(",") if m.strip()]
        if not items:
            raise UserInputError("model", model, "name one model or several separated by "
                                 "commas, e.g. deepseek-v3,deepseek-v3.2")
        return items
    if isinstance(model, str | ModelSpec):
        return [model]
    items = list(model)
    if not items:
        raise UserInputError("model", "[]", "give at least one model")
    return items


def resolve_models(model: ModelLike | Sequence[ModelLike]) -> list[ModelSpec]:
    """One model or several (:func:`model_items`). Duplicates are swept once."""
    specs: dict[str, ModelSpec] = {}
    for item in model_items(model):
        spec = resolve_model(item)
        specs.setdefault(spec.name, spec)
    return list(specs.values())


def context_lengths(contexts: str | Sequence[int | str]) -> list[int]:
    """"8K,128K,1M" or a list of sizes, as token counts."""
    if isinstance(contexts, str):
        return parse_token_list(contexts)
    sizes = [parse_tokens(s, "contexts") for s in contexts]
    if not sizes:
        raise UserInputError("contexts", contexts, "give at least one context length")
    return sizes


def format_context(n: int) -> str:
    return format_tokens(n)


def policy_of(model: ModelSpec, options: Mapping[str, Any],
              precision: Precision | None = None) -> tuple[Policy, dict[str, Any]]:
    """(the policy of the checked ``options``, the options left): every option named like a
    policy field goes to that field; per-part weight dtypes become its precision (``precision``
    takes their place when given); an option left at None takes the policy's default."""
    o = dict(options)
    weights = precision_for(model, o.pop("attention_weights"), o.pop("ffn_weights"))
    o["precision"] = precision or weights
    names = Policy.names()
    return Policy.of({k: v for k, v in o.items() if v is not None or k not in names})


def precision_for(model: ModelSpec, attention_weights: str | None = None,
                  ffn_weights: str | None = None) -> Precision | None:
    """A Precision from per-part weight dtypes (None: the model's own weight dtype); None when
    neither is given, so the model's default applies."""
    if attention_weights is None and ffn_weights is None:
        return None
    return Precision(attention_weights=attention_weights or model.weight_dtype,
                     ffn_weights=ffn_weights or model.weight_dtype)


def one_model(s: Study, what: str) -> None:
    """Refuse a study listing several models where one is needed (capacity, sensitivity)."""
    if len(s.models) > 1:
        raise UserInputError("model", [m.name for m in s.models],
                             f"name one model for a {what} study; a list of models is for "
                             "solve and sweep (one curve each)",
                             f"a {what} study sizes one model")


def check_output(path: str | Path, field: str, suffixes: tuple[str, ...] = ()) -> Path:
    """Refuse an output path that cannot be written (before any simulation runs)."""
    return check_writable(path, field, suffixes)
