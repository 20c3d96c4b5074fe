"""``ctxplan schema``: the JSON Schema of study and point files."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxplan.cli.app import app, emit_json, lazy_module
from ctxplan.cli.options import Invocation, command
from ctxplan.config.options import Declared, Opt

if TYPE_CHECKING:
    from ctxplan import api
else:
    api = lazy_module("ctxplan.api")  # loaded on first use: --help stays fast


@command(app, "schema", local=(Declared("kind", str, Opt(
    "study", "study (solve / sweep --config) or point (eval --config).", unit="study|point")),))
def schema_cmd(inv: Invocation) -> None:
    """Print the JSON Schema of study or point files (for editor completion)."""
    emit_json(api.file_schema(inv["kind"]))
