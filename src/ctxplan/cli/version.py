"""``ctxplan version``."""

from __future__ import annotations

from ctxplan import __version__
from ctxplan.cli.app import Command, app


@app.command(cls=Command)
def version() -> None:
    """Print the version."""
    print(__version__)
