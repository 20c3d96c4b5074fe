"""The human listing of the result store (`ctxplan store list`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from ctxplan.config.units import format_seconds, format_tokens


def store_summary_line(path: Path, count: int, by_version: dict[str, int]) -> str:
    by = ", ".join(f"sim version {v}: {n}" for v, n in by_version.items())
    return f"{count} results in {path}" + (f" ({by})" if by else "")


def store_table(rows: Sequence[Any]) -> Table:
    """The stored rows (``ResultStore.rows``), newest first as given."""
    t = Table(title=f"{len(rows)} most recent")
    for col in ("written", "model", "chip", "phase", "S", "layout", "KV tier", "latency", "key"):
        t.add_column(col, no_wrap=True)
    for r in rows:
        c = r.columns
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c["created_at"]))
        lat = format_seconds(c["latency_s"]) if c["simulated"] else "not simulated"
        t.add_row(when, c["model"], c["chip"], c["phase"], format_tokens(c["context_length"]),
                  f"cp {c['cp']} x tp {c['tp']}, b {c['batch']}", c["kv_tier"], lat,
                  c["key"][:12])
    return t
