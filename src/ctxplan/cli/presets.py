"""``ctxplan presets``: the chips, clusters and models that ship with ctxplan."""

from __future__ import annotations

from ctxplan.cli.app import app, console, emit_json
from ctxplan.cli.options import Invocation, command


@command(app, "presets", cli=("as_json",))
def presets_cmd(inv: Invocation) -> None:
    """List the chip, cluster and model presets with their key figures."""
    from ctxplan.report.presets import presets_data, presets_tables  # pydantic, YAML: on use

    data = presets_data()
    if inv["as_json"]:
        emit_json(data)
        return
    for table in presets_tables(data):
        console.print(table)
