"""``ctxplan report``: one self-contained HTML page for a design review."""

from __future__ import annotations

from ctxplan.cli.app import api, app, console
from ctxplan.cli.options import Invocation, command, require
from ctxplan.cli.run import solving, study_of
from ctxplan.config.options import Declared, Opt, SolveOptions, SolveReportOptions
from ctxplan.errors import UserInputError

LOCAL = (
    Declared("out", str | None, Opt(None, "Write the report to FILE.html (required).",
                                    unit="FILE.html")),
    Declared("from_", str | None, Opt(
        None, "Render a saved result instead of solving: the --json output of solve, sweep, "
        "capacity or sensitivity. Its chip, cluster and model figures are the presets it names, "
        "unless --chip / --cluster / --model give the files it was solved with.",
        flag="--from", unit="RESULT.json")),
    Declared("cases", str | None, Opt(
        None, "Directory of validation cases to run for the chip (default: the source tree's "
        "validation/).", unit="DIR")),
)
# What --from may be given with: it renders a result, so nothing else would change it.
WITH_FROM = ("out", "from_", "cases", "model", "chip", "cluster")


@command(app, "report", subject=("model", "chip", "context"),
         groups=(SolveOptions, SolveReportOptions), local=LOCAL,
         cli=("config", "set_", "store", "no_store"), file_kind="study",
         file_paths={"context": "contexts"})
def report_cmd(inv: Invocation) -> None:
    """Write one self-contained HTML page (no network needed) for a design review: the answer
    with its SLA, N*(S), the per-tier table, the search path, the chip, cluster and model
    figures with their sources and flags, the validation rows on the chip and, with
    --sensitivity, what the answer hinges on.

    Solves a study file (--config) or the flags of solve (--model --chip --context ...),
    or renders a saved result (--from)."""
    out = inv["out"]
    if out is None:
        raise UserInputError("--out", None, "give --out FILE.html", "required option missing")
    api.check_output(out, "out", api.REPORT_SUFFIXES)
    if inv["from_"] is not None:
        extra = [name for name in inv.values if name not in WITH_FROM and inv.typed(name)]
        if extra:
            flag = "--" + extra[0].rstrip("_").replace("_", "-")
            raise UserInputError(flag, inv[extra[0]], "leave it out: --from renders a saved "
                                 "result as it is (solve again with --config or the flags to "
                                 "change it)", "not used with --from")
        report = api.report_results(inv["from_"], out, model=inv["model"], chip=inv["chip"],
                                    cluster=inv["cluster"], cases=inv["cases"])
    else:
        with solving(inv, "report") as cache:
            if not inv.from_file():
                require(inv, "model", "chip", "context")
            study = study_of(inv)
            report = api.report_study(study, out, sensitivity=inv["sensitivity"],
                                      cases=inv["cases"], cache=cache)
    console.print(f"report ({report.kind}): {report.path}", soft_wrap=True)

