"""Safe loading of YAML / JSON files and pydantic validation with one-line errors."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TypeVar, get_args

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from ctxplan.errors import UserInputError, did_you_mean

SchemaT = TypeVar("SchemaT", bound=BaseModel)

# Every ctxplan file schema: unknown keys refused, no type coercion ("80" is not a number), no
# NaN or infinities.
STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

# A file larger than this is not a configuration; refuse before parsing it.
MAX_CONFIG_BYTES = 4 * 1024 * 1024


class _NoAliasSafeLoader(yaml.SafeLoader):
    """SafeLoader that refuses YAML aliases, so an alias bomb cannot expand in memory."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"aliases (*{event.anchor}) are not allowed in ctxplan files",
                event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        # A key given twice would silently keep the last value: refuse it instead.
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # unhashable: the base class reports it
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


NoAliasSafeLoader = _NoAliasSafeLoader


class _DuplicateKeyError(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(f"duplicate key {key!r}")
        out[key] = value
    return out


def read_mapping(path: str | Path, what: str) -> dict[str, Any]:
    """Read a YAML or JSON file holding one mapping; every failure is a UserInputError."""
    p = Path(path)
    if p.is_dir():
        raise UserInputError(what, str(path), "give the path of a file, not a directory",
                             "is a directory")
    if not p.is_file():
        raise UserInputError(what, str(path), "give the path of an existing file", "no such file")
    if p.stat().st_size > MAX_CONFIG_BYTES:
        raise UserInputError(what, str(path), "give a configuration file under 4 MiB",
                             "file too large")
    raw = p.read_bytes()
    if b"\x00" in raw:
        raise UserInputError(what, str(path), "give a YAML or JSON text file", "binary file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UserInputError(what, str(path), "save the file as UTF-8 text", "not UTF-8") from None
    if not text.strip():
        raise UserInputError(what, str(path), "fill the file with a YAML mapping", "empty file")
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
        else:
            data = yaml.load(text, Loader=_NoAliasSafeLoader)
    except RecursionError:
        raise UserInputError(what, str(path), "flatten the file: ctxplan files are a few "
                             "levels deep", "nested too deeply") from None
    except (yaml.YAMLError, json.JSONDecodeError, _DuplicateKeyError) as exc:
        raise UserInputError(what, str(path), "fix the file's syntax there",
                             f"cannot parse: {_syntax_error(exc)}") from None
    if not isinstance(data, dict):
        raise UserInputError(
            what, str(path), "the file must hold a mapping of field: value", "not a mapping"
        )
    return data


def _syntax_error(exc: Exception) -> str:
    """What is wrong and where: "expected ',' or ']', but got ':' at line 3, column 2" (line
    and column count from 1, as editors show them)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno}, column {exc.colno}"
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None)
    if problem and mark is not None:
        return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(root)"


def validate(schema: type[SchemaT], data: Any, where: str, *, every: bool = False) -> SchemaT:
    """Validate ``data`` against ``schema``; turn the first pydantic error into one line
    (``every``: all of them, in one line, so a pasted file is fixed in one go).

    ``where`` names the object (e.g. ``chip sg2262`` or a file path) so the message says
    which file and which field.
    """
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        found = [_problem(schema, err) for err in exc.errors()]
    if not every or len(found) == 1:
        field, value, fix, problem = found[0]
        raise UserInputError(f"{where}: {field}", value, fix, problem)
    fields = list(dict.fromkeys(f for f, *_ in found))
    raise UserInputError(f"{where}: {', '.join(fields)}", f"{len(found)} problems",
                         "; ".join(f"{f}: {fix}" for f, _, fix, _ in found),
                         "; ".join(f"{f}: {p}" + ("" if v is None or p.endswith("missing")
                                                  else f" ({v!r})")
                                   for f, v, _, p in found))


def _problem(schema: type[BaseModel], err: Any) -> tuple[str, object, str, str]:
    """(field, value, fix, problem) of one pydantic error."""
    field = _loc(tuple(err.get("loc", ())))
    value = err.get("input")
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        return field, value, unknown_key_fix(schema, tuple(err.get("loc", ()))), "unknown key"
    if kind == "missing":
        return field, None, f"add '{field}'", "required field missing"
    fix = str(err.get("msg", "give a valid value")).removeprefix("Value error, ")
    return field, value, fix, "invalid value"


def unknown_key_fix(schema: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """The fix for an unknown key at ``loc``: the close key it was probably meant to be, else
    the keys allowed there. Never "remove it" alone: a misspelt key dropped would silently leave
    its field (an SLA, say) at the default."""
    keys = _keys_at(schema, loc[:-1])
    field = _loc(loc)
    parent = _loc(loc[:-1]) + "." if len(loc) > 1 else ""
    hint = did_you_mean(str(loc[-1]), keys)
    if hint:
        close = hint.split("'")[1]
        return (f"did you mean '{parent}{close}'? rename it to '{parent}{close}' (an unknown "
                "key is refused, not ignored: removing it instead would drop what it sets)")
    known = f"use one of: {', '.join(keys)}; " if keys else ""
    return (f"{known}or remove '{field}' if it is not meant to set anything (see `ctxplan "
            "schema` for the valid keys)")


def _keys_at(schema: type[BaseModel], path: tuple[Any, ...]) -> list[str]:
    """The field names of the (nested) model at ``path`` within ``schema`` ([] if unknown)."""
    model: Any = schema
    for part in path:
        fields = getattr(model, "model_fields", {})
        if part not in fields:
            return []
        annotation = fields[part].annotation
        model = next((a for a in (annotation, *get_args(annotation))
                      if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if model is None:
            return []
    return list(getattr(model, "model_fields", {}))


def finite_positive(name: str, value: float) -> float:
    """Shared check for numeric fields: finite and > 0."""
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0")
    return value
