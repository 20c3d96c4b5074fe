"""The version rule of study and point files (docs/study-files.md, "Migrating").

``version`` is required, and each kind of file has its own current version:

* a **point** file is at version 1. Version 1 added fields that have no default (``cp`` and
  ``kv_tier``): a file without them was written for the earlier format and is refused with a
  message that says what to add, never given a silent default.
* a **study** file is at version 2 (issue 13). Version 2 changed what two things mean, so a
  version-1 study is refused with the changes it needs, never read with the new meaning:
  a time without a unit (``tpot_max: 0.02`` was seconds; version 2 refuses a bare number) and a
  missing ``prefill_tp`` / ``decode_tp`` (version 1 meant 1 chip per rank; version 2 searches
  TP when they are left out). Version 1 had added ``kv_tiers`` (no default) as well.
"""

from __future__ import annotations

from typing import Any

from ctxplan.errors import UserInputError

VERSIONS: dict[str, int] = {"study": 2, "point": 1}
STUDY_VERSION = VERSIONS["study"]
POINT_VERSION = VERSIONS["point"]
DOCS = "docs/study-files.md"

# The fields without a default, by kind, and what to write for each.
NEW_FIELDS: dict[str, dict[str, str]] = {
    "study": {
        "kv_tiers": "'kv_tiers: [<tier>, ...]' (the KV tiers to compare, e.g. [mla-bf16, "
                    "mla-fp8]; 'kv_tiers: default' compares the model's default tiers)",
    },
    "point": {
        "cp": "'cp: <N>' (the CP degree: Np prefill ring ranks or Nd decode KV shards; "
              "'cp: 1' is what a file without CP meant)",
        "kv_tier": "'kv_tier: <tier>' (e.g. mla-bf16 or kv-bf16, bytes per token per layer, "
                   "or 'kv_tier: default' for the model's first tier)",
    },
}

# Version 2 of a study: the times (each with the unit a bare number most likely meant) and the
# TP fields whose default changed from 1 to auto.
STUDY_V2_TIMES = {"tpot_max": "ms", "ttft_max": "s"}
STUDY_V2_TP = ("prefill_tp", "decode_tp")


def check_version(kind: str, data: dict[str, Any], where: str) -> None:
    """Refuse a file of another version, or one missing a field without a default."""
    current = VERSIONS[kind]
    missing = [f for f in NEW_FIELDS[kind] if f not in data]
    version = data.get("version")
    if "version" not in data:
        fix = f"add 'version: {current}'"
        if missing:
            fix += " and the fields without a default: " + "; ".join(
                NEW_FIELDS[kind][f] for f in missing)
        raise UserInputError(f"{where}: version", None, f"{fix} (see {DOCS}, 'Migrating')",
                             "required field missing (a file from before version 1?)")
    whole = isinstance(version, int) and not isinstance(version, bool)
    if kind == "study" and whole and version == 1:
        raise UserInputError(f"{where}: version", 1, migrate_study_v1(data),
                             "a version-1 study file")
    if not isinstance(version, int) or isinstance(version, bool) or version != current:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > current
        fix = (f"this ctxplan reads {kind} files of version {current}; upgrade ctxplan or "
               f"write the file for version {current}" if newer
               else f"write 'version: {current}'")
        raise UserInputError(f"{where}: version", version, fix, "unsupported version")
    if missing:
        field = missing[0]
        raise UserInputError(
            f"{where}: {field}", None,
            f"add {NEW_FIELDS[kind][field]}; there is no default for it (see {DOCS}, "
            "'Migrating')", "required since version 1 (CP and KV tiers)")


def migrate_study_v1(data: dict[str, Any]) -> str:
    """What a version-1 study must change to be read as version 2, for this file."""
    steps = [f"write 'version: {STUDY_VERSION}'"]
    sla = data.get("sla")
    for name, unit in STUDY_V2_TIMES.items():
        value = sla.get(name) if isinstance(sla, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            # Version 1 read a bare number as seconds: say what that was, with its unit.
            steps.append(f"give sla.{name} its unit (version 1 read {value} as seconds: "
                         f"write {_seconds_text(float(value), unit)} to keep that meaning)")
    for name in STUDY_V2_TP:
        if name not in data:
            steps.append(f"add '{name}: 1' to keep what version 1 meant (or '{name}: auto' "
                         "to search TP)")
    for name in NEW_FIELDS["study"]:
        if name not in data:
            steps.append(f"add {NEW_FIELDS['study'][name]}")
    return "; ".join(steps) + f" (see {DOCS}, 'Migrating')"


def _seconds_text(seconds: float, unit: str) -> str:
    """A time in seconds written with ``unit`` (or a smaller unit when it is not whole)."""
    for u, scale in ((unit, {"s": 1.0, "ms": 1e3}[unit]), ("ms", 1e3), ("us", 1e6)):
        value = seconds * scale
        if abs(value - round(value)) < 1e-9 * max(1.0, abs(value)):
            return f"{round(value)}{u}"
    return f"{seconds!r}s"
