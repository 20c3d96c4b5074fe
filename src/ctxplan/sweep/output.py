"""Writing a sweep to disk: CSV (one row per context) or JSON (every solve in full)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from ctxplan.config.paths import check_writable
from ctxplan.sweep.contexts import SweepResult

FORMATS = (".csv", ".json")


def check_out_path(path: str | Path) -> Path:
    return check_writable(path, "out", FORMATS)


def write_sweep(result: SweepResult, path: str | Path) -> Path:
    p = check_out_path(path)
    suffix = p.suffix.lower()
    if suffix == ".json":
        p.write_text(json.dumps(result.to_dict(), indent=2, allow_nan=False) + "\n")
        return p
    rows = result.rows()
    with p.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["context_length"])
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return p
