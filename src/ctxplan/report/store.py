"""The human listing of the result store (`ctxplan store list`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from ctxplan.config.units import format_short, format_tokens
from ctxplan.report.layout import Phrases, add_name_column, compact_table


def store_summary_line(path: Path, count: int, by_version: dict[str, int]) -> Phrases:
    """'21 results in PATH (sim version 4: 21)', wrapped around the path, never inside it."""
    by = ", ".join(f"sim version {v}: {n}" for v, n in by_version.items())
    return Phrases([f"{count} results in {path}"] + ([f"({by})"] if by else []))


def store_table(rows: Sequence[Any]) -> Table:
    """The stored rows (``ResultStore.rows``), newest first as given."""
    t = compact_table(title=f"{len(rows)} most recent (keys and every field: ctxplan store "
                      "export)")
    t.add_column("written", no_wrap=True)
    for col, key in (("model", "model"), ("chip", "chip")):
        add_name_column(t, col, [r.columns[key] for r in rows])
    t.add_column("phase", no_wrap=True)
    t.add_column("S", justify="right", no_wrap=True)
    t.add_column("cp x tp, b", justify="right")
    add_name_column(t, "KV tier", [r.columns["kv_tier"] for r in rows])
    t.add_column("latency", justify="right")
    for r in rows:
        c = r.columns
        when = time.strftime("%m-%d %H:%M", time.localtime(c["created_at"]))
        lat = format_short(c["latency_s"]) if c["simulated"] else "not simulated"
        t.add_row(when, c["model"], c["chip"], c["phase"], format_tokens(c["context_length"]),
                  f"{c['cp']} x {c['tp']}, {c['batch']}", c["kv_tier"], lat)
    return t


def store_use_line(cache: Any) -> Phrases | None:
    """Where this run's results are stored and whether hits came from earlier runs (None when
    the run used no store): the store is shared by every run of the user, so a first run can
    report cache hits it never simulated."""
    store = getattr(cache, "store", None)
    path = getattr(store, "path", None)
    if path is None:
        return None
    earlier = getattr(cache, "earlier_hits", 0)
    reused = (f"{earlier} results from earlier runs reused;" if earlier
              else "no result from an earlier run reused;")
    return Phrases(["result store:", str(path), f"({reused}", "--no-store to run without it)"],
                   style="dim")
