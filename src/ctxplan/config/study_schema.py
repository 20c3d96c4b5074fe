"""The pydantic schemas of study and point files, built from the option declarations.

A file field is an option's :meth:`~ctxplan.config.options.Declared.file_type`, with its
:attr:`~ctxplan.config.options.Opt.check` run before pydantic's (strict) type check, its
default, and its help as the description (so ``ctxplan schema`` documents every field). A dotted
file path (``sla.tpot_max``) becomes a nested schema.

* a **study** (``solve`` / ``sweep --config``): model, chip, contexts and the search options;
* a **point** (``eval --config``): model, chip, context, phase, cp and one point's options.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, create_model

from ctxplan.config.loader import STRICT
from ctxplan.config.migration import NEW_FIELDS, VERSIONS
from ctxplan.config.options import Declared, file_options

KINDS = ("study", "point")


def _field(d: Declared) -> tuple[Any, Any]:
    tp = d.file_type()
    if d.opt.check is not None:
        tp = Annotated[tp, BeforeValidator(d.opt.check)]
    added = any(d.name in fields for fields in NEW_FIELDS.values())
    description = d.opt.help + (" Required since version 1." if added else "")
    if d.opt.required_in_file:
        return tp, Field(description=description)
    return tp, Field(d.default, description=description)


def _schema(name: str, doc: str, options: dict[str, Declared], version_number: int
            ) -> type[BaseModel]:
    fields: Any = {}
    nested: dict[str, dict[str, Declared]] = {}
    for d in options.values():
        head, _, rest = d.file_path.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = d
        else:
            fields[head] = _field(d)
    for head, inner in nested.items():
        sub_fields: Any = {rest: _field(d) for rest, d in inner.items()}
        sub = create_model(f"{head.upper()}File", __config__=STRICT,
                           __doc__=f"The {head} fields.", **sub_fields)
        fields[head] = (sub, Field(default_factory=sub))
    version: Any = Literal[version_number]
    fields = {"version": (version, Field(description=f"File format version: {version_number}.")),
              **fields}
    return create_model(name, __config__=STRICT, __doc__=doc, **fields)


StudyFile = _schema("StudyFile", "A study: solve for the minimum chip count at one or more "
                    "context lengths.", file_options("study"), VERSIONS["study"])
PointFile = _schema("PointFile", "A point: one fully specified configuration to simulate.",
                    file_options("point"), VERSIONS["point"])
SCHEMAS: dict[str, type[BaseModel]] = {"study": StudyFile, "point": PointFile}
# Fields a dotted --set path may go into.
NESTED = ("model", "chip", "cluster", "sla", "serving", "sensitivity", "decode_chip",
          "decode_cluster", "handoff_chip", "handoff_cluster")
# The fields naming a chip or cluster of a pool of its own, by what they name, and the chip
# field a pool's cluster defaults from.
POOL_SYSTEMS = {"decode_chip": "chip", "decode_cluster": "cluster", "handoff_chip": "chip",
                "handoff_cluster": "cluster"}


def file_values(kind: str, spec: BaseModel) -> dict[str, Any]:
    """The options of a validated file, by option name, as the API takes them."""
    out: dict[str, Any] = {}
    for name, d in file_options(kind).items():
        node: Any = spec
        for part in d.file_path.split("."):
            node = getattr(node, part)
        out[name] = d.opt.to_api(node) if d.opt.to_api is not None else node
    return out
