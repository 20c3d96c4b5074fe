"""The version rule of study and point files (docs/study-files.md, "Migrating").

``version`` is required. Version 1 added fields that have no default (``cp`` and ``kv_tier`` in
a point, ``kv_tiers`` in a study): a file without them was written for the earlier format and is
refused with a message that says what to add, never given a silent default.
"""

from __future__ import annotations

from typing import Any

from ctxplan.errors import UserInputError

STUDY_VERSION = 1
DOCS = "docs/study-files.md"

# The fields version 1 added, and what to write for each.
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


def check_version(kind: str, data: dict[str, Any], where: str) -> None:
    """Refuse a file of another version, or one missing a field version 1 added."""
    missing = [f for f in NEW_FIELDS[kind] if f not in data]
    version = data.get("version")
    if "version" not in data:
        fix = f"add 'version: {STUDY_VERSION}'"
        if missing:
            fix += " and the fields version 1 added: " + "; ".join(
                NEW_FIELDS[kind][f] for f in missing)
        raise UserInputError(f"{where}: version", None, f"{fix} (see {DOCS}, 'Migrating')",
                             "required field missing (a file from before version 1?)")
    if isinstance(version, bool) or not isinstance(version, int) or version != STUDY_VERSION:
        newer = isinstance(version, int) and not isinstance(version, bool) \
            and version > STUDY_VERSION
        fix = (f"this ctxplan reads version {STUDY_VERSION}; upgrade ctxplan or write the file "
               f"for version {STUDY_VERSION}" if newer else f"write 'version: {STUDY_VERSION}'")
        raise UserInputError(f"{where}: version", version, fix, "unsupported version")
    if missing:
        field = missing[0]
        raise UserInputError(
            f"{where}: {field}", None,
            f"add {NEW_FIELDS[kind][field]}; there is no default for it (see {DOCS}, "
            "'Migrating')", "required since version 1 (CP and KV tiers)")
