"""``ctxplan store list|export|clear``: the result store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from ctxplan.cli.app import Group, api, app, console, emit_json
from ctxplan.cli.options import Invocation, command
from ctxplan.config.options import Declared, Opt
from ctxplan.errors import UserInputError
from ctxplan.report.store import store_summary_line, store_table

store_app = typer.Typer(cls=Group, help="The result store: list, export or clear the recorded "
                        "evaluations (SQLite; see --store).", no_args_is_help=True)
app.add_typer(store_app, name="store")


@command(store_app, "list", cli=("store", "as_json"), local=(
    Declared("limit", int, Opt(20, "Rows to show, newest first.", unit="N")),))
def store_list_cmd(inv: Invocation) -> None:
    """How many results the store holds, and the most recent ones."""
    path = api.store_path(inv["store"])
    rows: list[Any] = []
    count, versions = 0, dict[str, int]()
    if path.exists():  # listing never creates a store
        with api.open_store(path) as st:  # type: ignore[union-attr]
            rows = st.rows(limit=max(inv["limit"], 0), newest_first=True)
            count, versions = len(st), st.count_by_version()
    if inv["as_json"]:
        emit_json({"store": str(path), "results": count, "by_sim_version": versions,
                   "recent": [{**r.columns} for r in rows]})
        return
    console.print(store_summary_line(path, count, versions), soft_wrap=True)
    if rows:
        console.print(store_table(rows))


@command(store_app, "export", cli=("store",), local=(
    Declared("out", str | None, Opt(None, "Write to FILE (.jsonl or .csv) instead of stdout.",
                                    unit="FILE")),
    Declared("fmt", str | None, Opt(
        None, "jsonl (one JSON object per result, in full) or csv (the key columns); default: "
        "from --out, else jsonl.", flag="--format", unit="jsonl|csv")),
))
def store_export_cmd(inv: Invocation) -> None:
    """Every stored result, oldest first, as JSON lines or CSV."""
    path = api.store_path(inv["store"])
    out, fmt = inv["out"], inv["fmt"]
    kind = (fmt or ("csv" if out and out.lower().endswith(".csv") else "jsonl")).lower()
    if kind not in ("jsonl", "csv"):
        raise UserInputError("format", fmt, "use jsonl or csv")
    if out is not None:
        api.check_output(out, "out")
    text = api.export_store(path, kind)
    if out is None:
        sys.stdout.write(text)
    else:
        Path(out).write_text(text)


@command(store_app, "clear", cli=("store",), local=(
    Declared("yes", bool, Opt(False, "Really delete.")),
    Declared("stale", bool, Opt(False, "Delete only results of other simulator versions "
                                       "(never reused).")),
))
def store_clear_cmd(inv: Invocation) -> None:
    """Delete the stored results (asks for --yes)."""
    path = api.store_path(inv["store"])
    if not path.exists():
        console.print(f"nothing to clear: no store at {path}", soft_wrap=True)
        return
    with api.open_store(path) as st:  # type: ignore[union-attr]
        if not inv["yes"]:
            raise UserInputError("yes", False, f"add --yes to delete {len(st)} results from "
                                 f"{path}", "clearing the store needs confirmation")
        n = st.clear(stale_only=inv["stale"])
    console.print(f"deleted {n} results from {path}", soft_wrap=True)
