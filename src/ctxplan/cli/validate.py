"""``ctxplan validate``: the simulator against published measurements."""

from __future__ import annotations

import sys

from rich.console import Console

from ctxplan.cli.app import api, app, console, emit_json, show
from ctxplan.cli.options import Invocation, command
from ctxplan.config.options import Declared, Opt
from ctxplan.report.screens import validation_screen, validation_sensitivity_screen

LOCAL = (
    Declared("cases", str | None, Opt(
        None, "Directory of validation cases (*.yaml; default: the source tree's validation/).",
        unit="DIR")),
    Declared("case", list[str] | None, Opt(None, "Run only this case (repeatable).",
                                           unit="NAME")),
    Declared("kernels", str | None, Opt(
        None, "Directory of kernel-level tables (default: the source tree's validation/kernels/, "
        "run with the default cases); 'none' to skip them.", unit="DIR")),
    Declared("check", bool, Opt(False, "Exit 1 if any case is outside its tolerance, or the "
                                "kernel rows of a role miss their median target.")),
    Declared("sensitivity", bool, Opt(
        False, "Also rerun every case with each hardware figure of its chip and cluster scaled "
        "by --factor, one at a time, and show how the latency moves.")),
    Declared("figure", list[str] | None, Opt(
        None, "With --sensitivity: only this figure (repeatable), e.g. chip.memory_bandwidth, "
        "cluster.host.latency.", unit="NAME")),
    Declared("factor", float, Opt(1.1, "With --sensitivity: the scale factor.")),
)


@command(app, "validate", local=LOCAL, cli=("as_json",))
def validate_cmd(inv: Invocation) -> None:
    """Simulate every published measurement in validation/ and print measured vs simulated and
    the relative error, calibration rows (used to set figures) apart from prediction rows (used
    for nothing), each with its median and worst absolute error."""
    given = inv["kernels"]
    kernels = None if given is None else False if given.lower() == "none" else given
    report = api.validate(inv["cases"], names=inv["case"], kernels=kernels)
    moves = (api.validation_sensitivity(report, inv["figure"], inv["factor"])
             if inv["sensitivity"] else None)
    data = report.to_dict()
    if moves is not None:
        data["sensitivity"] = [m.to_dict() for m in moves]
    if inv["as_json"]:
        emit_json(data)
    else:
        wide = Console(highlight=False, width=max(console.width, 150)) if moves else console
        show(validation_screen(data))
        # a column per case: wide by nature
        show(validation_sensitivity_screen(data.get("sensitivity") or []), wide)
    if inv["check"] and not (report.all_within and report.kernel_targets_met):
        sys.exit(1)
