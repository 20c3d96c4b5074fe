"""The command line: a thin layer over :mod:`ctxplan.api`, one module per command.

Every command prints a table by default and JSON with ``--json``. A user mistake prints one line
(``error: <field> = <value>: <problem>. Fix: <fix>``) on stderr and exits with code 2. Options are
declared once (:mod:`ctxplan.config.options`, and :mod:`ctxplan.cli.options` for those of the
command line alone); the commands import the API and report, nothing deeper.
"""

from ctxplan.cli import (  # noqa: F401
    capacity,
    eval,
    pareto,
    presets,
    report,
    schema,
    sensitivity,
    solve,
    store,
    sweep,
    validate,
    version,
)
from ctxplan.cli.app import app
from ctxplan.cli.main import main

__all__ = ["app", "main"]
