"""The SQLite result store as the API and the command line name it."""

from __future__ import annotations

from pathlib import Path

from ctxplan.errors import UserInputError
from ctxplan.sweep.store import (
    ResultStore,
    StoreLike,
    default_store_path,
    export_rows,
    store_option,
)
from ctxplan.sweep.store import open_store as _open_store


def open_store(store: StoreLike = True) -> ResultStore | None:
    """The SQLite result store: a path opens (or creates) that file; True the default file
    ($CTXPLAN_STORE, else $XDG_CACHE_HOME/ctxplan/results.sqlite, else
    ~/.cache/ctxplan/results.sqlite; CTXPLAN_STORE=off turns it off); None / False: none."""
    return _open_store(store)


def store_choice(path: str | None = None, no_store: bool = False) -> StoreLike:
    """The command line's ``--store FILE`` / ``--no-store`` as a store for :func:`open_store`
    (neither: the default file)."""
    return store_option(path, no_store)


def store_path(path: str | None = None) -> Path:
    """The store file ``path`` names, else the default one; an error when the store is off."""
    found = Path(path) if path is not None else default_store_path()
    if found is None:
        raise UserInputError("store", None, "name a file with --store FILE",
                             "the store is turned off ($CTXPLAN_STORE)")
    return found.expanduser()


def export_store(path: str | Path, kind: str = "jsonl") -> str:
    """Every result in the store file, oldest first: ``jsonl`` (each result in full) or ``csv``
    (the key columns). A missing file exports nothing."""
    if kind not in ("jsonl", "csv"):
        raise UserInputError("format", kind, "use jsonl or csv")
    rows = []
    if Path(path).exists():
        with ResultStore(path) as st:
            rows = st.rows()
    return export_rows(rows, kind)
