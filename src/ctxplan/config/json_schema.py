"""The JSON Schema of study and point files (``ctxplan schema``), for editor completion:
pydantic's schema of the file (itself derived from the option declarations), with the inline
chip / cluster / model definitions spelled out."""

from __future__ import annotations

from typing import Any

from ctxplan.config.hardware_schema import ChipSchema, ClusterSchema
from ctxplan.config.migration import VERSIONS
from ctxplan.config.model_schema import ModelFile
from ctxplan.config.study_schema import KINDS, SCHEMAS
from ctxplan.errors import UserInputError


def json_schema(kind: str = "study") -> dict[str, Any]:
    if kind not in KINDS:
        raise UserInputError("kind", kind, f"use one of {', '.join(KINDS)}")
    schema = SCHEMAS[kind].model_json_schema()
    defs = schema.setdefault("$defs", {})
    for field, sub in (("model", ModelFile), ("chip", ChipSchema), ("cluster", ClusterSchema)):
        sub_schema = sub.model_json_schema()
        defs.update(sub_schema.pop("$defs", {}))
        defs[sub.__name__] = sub_schema
        prop = schema["properties"][field]
        options: list[dict[str, Any]] = [
            {"type": "string", "description": "preset name or path"},
            {"$ref": f"#/$defs/{sub.__name__}"},
        ]
        if field == "model":
            options.append({"type": "object", "description": "a pasted Hugging Face "
                            "config.json (recognised by model_type / architectures)"})
        if field == "cluster":
            options.append({"type": "null"})
        schema["properties"][field] = {k: v for k, v in prop.items()
                                       if k not in ("anyOf", "type")} | {"anyOf": options}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"ctxplan {kind} file, version {VERSIONS[kind]}"
    return schema
