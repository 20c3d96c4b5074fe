"""``ctxplan schema``: the JSON Schema of study and point files."""

from __future__ import annotations

from ctxplan.cli.app import api, app, emit_json
from ctxplan.cli.options import Invocation, command
from ctxplan.config.options import Declared, Opt


@command(app, "schema", local=(Declared("kind", str, Opt(
    "study", "study (solve / sweep --config) or point (eval --config).", unit="study|point")),))
def schema_cmd(inv: Invocation) -> None:
    """Print the JSON Schema of study or point files (for editor completion)."""
    emit_json(api.file_schema(inv["kind"]))
