"""``ctxplan presets``: the chips, clusters and models that ship with ctxplan."""

from __future__ import annotations

from ctxplan.cli.app import app, console, emit_json
from ctxplan.cli.options import Invocation, command
from ctxplan.report.presets import presets_data, presets_tables


@command(app, "presets", cli=("as_json",))
def presets_cmd(inv: Invocation) -> None:
    """List the chip, cluster and model presets with their key figures."""
    data = presets_data()
    if inv["as_json"]:
        emit_json(data)
        return
    for table in presets_tables(data):
        console.print(table)
