"""``ctxplan validate``: the simulator against published measurements."""

from __future__ import annotations

import sys

from rich.console import Console

from ctxplan import api
from ctxplan.cli.app import app, console, emit_json
from ctxplan.cli.options import Invocation, command
from ctxplan.config.options import Declared, Opt
from ctxplan.report.validation import validation_report

LOCAL = (
    Declared("cases", str | None, Opt(
        None, "Directory of validation cases (*.yaml; default: the source tree's validation/).",
        unit="DIR")),
    Declared("case", list[str] | None, Opt(None, "Run only this case (repeatable).",
                                           unit="NAME")),
    Declared("check", bool, Opt(False, "Exit 1 if any case is outside its tolerance.")),
)


@command(app, "validate", local=LOCAL, cli=("as_json",))
def validate_cmd(inv: Invocation) -> None:
    """Simulate every published measurement in validation/ and print measured vs simulated,
    the relative error, then the median and worst absolute error."""
    report = api.validate(inv["cases"], names=inv["case"])
    if inv["as_json"]:
        emit_json(report.to_dict())
    else:
        wide = Console(highlight=False, width=max(console.width, 150))
        for part in validation_report(report):
            wide.print(part)
    if inv["check"] and not report.all_within:
        sys.exit(1)
