"""``--set path=value`` overrides, and command-line flags laid over a study / point file.

The value is read as YAML (safely: no aliases, no object tags), so 96 is a number, 30ms a text,
[8K, 1M] a list. A dotted path that goes into a model / chip / cluster named by a preset or a
file first expands it into its inline definition (asking the preset registries for it), so
``--set chip.memory_gb=96`` works on ``chip: sg2262``; list items are addressed by index
(``cluster.levels.0.bandwidth_gbps``).
"""

from __future__ import annotations

import copy
import difflib
import re
from typing import Any

import yaml

from ctxplan.config.hardware_presets import chip_from_dict, hardware_definition, load_chip
from ctxplan.config.loader import NoAliasSafeLoader
from ctxplan.config.model_presets import model_definition
from ctxplan.config.study_schema import NESTED, POOL_SYSTEMS, SCHEMAS
from ctxplan.errors import UserInputError

MAX_SETS = 256               # --set overrides on one command line
_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def parse_set(text: str) -> tuple[list[str], Any]:
    """``"chip.memory_gb=96"`` -> (["chip", "memory_gb"], 96)."""
    if not isinstance(text, str) or "=" not in text:
        raise UserInputError("--set", text, "write --set path=value, e.g. --set "
                             "sla.tpot_max=30ms or --set chip.memory_gb=96", "no '='")
    path_text, raw = text.split("=", 1)
    parts = [p.strip() for p in path_text.strip().split(".")]
    if not path_text.strip() or any(not p for p in parts):
        raise UserInputError("--set", text, "name a field before '=', with dots between "
                             "levels, e.g. --set chip.memory_gb=96", "empty path")
    if len(raw) > 100_000:
        raise UserInputError("--set", text[:40], "give a value under 100,000 characters",
                             "value too long")
    try:
        value = yaml.load(raw, Loader=NoAliasSafeLoader) if raw.strip() else None
    except (yaml.YAMLError, RecursionError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserInputError(f"--set {path_text.strip()}", raw, "give a YAML value: a number, "
                             "a text, true / false, null or [a, b]",
                             f"cannot parse: {first}") from None
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        # YAML 1.1 reads 1e3 (no dot) as text; on a command line it means a number.
        number = float(value)
        value = int(number) if number.is_integer() and "." not in value and "e" not in \
            value.lower() else number
    return parts, value


def apply_sets(data: dict[str, Any], sets: tuple[str, ...] | list[str], kind: str) -> None:
    """Apply ``--set`` overrides in order."""
    if len(sets) > MAX_SETS:
        raise UserInputError("--set", f"{len(sets)} overrides", f"give at most {MAX_SETS}",
                             "too many overrides")
    for text in sets:
        parts, value = parse_set(text)
        assign(data, ".".join(parts), value, kind, origin="--set")


def assign(data: dict[str, Any], path: str, value: Any, kind: str, origin: str = "--set") -> None:
    """Set ``data[path] = value`` for a dotted path, creating mappings on the way."""
    parts = path.split(".")
    schema = SCHEMAS[kind]
    head = parts[0]
    if head not in schema.model_fields:
        close = difflib.get_close_matches(head, list(schema.model_fields), n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise UserInputError(f"{origin} {path}", value if scalar(value) else "...",
                             f"{hint}use one of the {kind} fields: "
                             f"{', '.join(schema.model_fields)}", f"unknown field '{head}'")
    if len(parts) > 1 and head not in NESTED:
        raise UserInputError(f"{origin} {path}", value if scalar(value) else "...",
                             f"'{head}' holds a single value, not fields; set it directly "
                             f"(--set {head}=...)", "path goes through a value")
    if len(parts) > 1 and head in ("model", "chip", "cluster", *POOL_SYSTEMS):
        _expand(data, head, parts, path, origin)
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        here = ".".join(parts[: i + 1])
        if isinstance(node, dict):
            if node.get(part) is None:
                node[part] = {}
            node = node[part]
        elif isinstance(node, list):
            node = node[_index(node, part, here, path, origin)]
        else:
            raise UserInputError(f"{origin} {path}", _shown(node), f"'{here}' holds a single "
                                 "value, not fields; set it directly (--set "
                                 f"{'.'.join(parts[:i])}=...)", "path goes through a value")
        if not isinstance(node, dict | list):
            raise UserInputError(f"{origin} {path}", _shown(node), f"'{here}' holds a single "
                                 f"value, not fields; set it directly (--set {here}=...)",
                                 "path goes through a value")
    last = parts[-1]
    if isinstance(node, list):
        node[_index(node, last, path, path, origin)] = copy.deepcopy(value)
    else:
        node[last] = copy.deepcopy(value)


def _expand(data: dict[str, Any], head: str, parts: list[str], path: str, origin: str) -> None:
    """A model / chip / cluster named by preset or file becomes its inline definition, renamed
    '<name>-custom' (unless the path sets the name itself)."""
    current = data.get(head)
    what = POOL_SYSTEMS.get(head, head)     # decode_chip is a chip, decode_cluster a cluster
    if current is None and head in POOL_SYSTEMS:
        # a pool of its own not named yet starts from what it shares: the chip, the pool's
        # own chip's cluster, else the cluster
        own_chip = data.get(head.replace("cluster", "chip"))
        if what == "chip":
            current = data.get("chip")
        elif own_chip is not None:
            own = (chip_from_dict(own_chip, "chip", name="custom-chip")
                   if isinstance(own_chip, dict) else load_chip(own_chip))
            current = own.default_cluster
        else:
            current = data.get("cluster")   # None: the chip's default cluster, below
    if current is None and what == "cluster":
        chip = data.get("chip")
        chip_obj = (chip_from_dict(chip, "chip", name="custom-chip")
                    if isinstance(chip, dict) else
                    load_chip(chip) if isinstance(chip, str) else None)
        if chip_obj is None:
            raise UserInputError(f"{origin} {path}", None, "give the chip (or the "
                                 "cluster) first", "no cluster to change")
        current = chip_obj.default_cluster
    if isinstance(current, str):
        expanded = (model_definition(current) if head == "model"
                    else hardware_definition(what, current))
        if "name" in expanded and parts[1] != "name":
            expanded["name"] = f"{expanded['name']}-custom"
        data[head] = expanded
    elif isinstance(current, dict) and head in POOL_SYSTEMS and head not in data:
        data[head] = copy.deepcopy(current)   # the shared inline one, copied for this pool


def _index(node: list[Any], part: str, here: str, path: str, origin: str) -> int:
    if not part.isdigit() or int(part) >= len(node):
        raise UserInputError(f"{origin} {path}", part, f"'{here}' is a list of {len(node)}: "
                             f"use an index 0..{len(node) - 1}", "no such list item")
    return int(part)


def scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _shown(value: Any) -> Any:
    return value if scalar(value) else type(value).__name__
