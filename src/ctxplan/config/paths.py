"""Output paths the user names (--out, --plot, --trace, store export): refused before any work
runs when they cannot be written, with one message naming the option."""

from __future__ import annotations

from pathlib import Path

from ctxplan.errors import UserInputError


def check_writable(path: str | Path, field: str, suffixes: tuple[str, ...] = ()) -> Path:
    """``path`` as a Path, if it is a file (with one of ``suffixes``, when given) in an existing
    directory; a UserInputError naming ``field`` otherwise."""
    p = Path(path)
    kinds = " or ".join(suffixes) if suffixes else "file"
    if suffixes and p.suffix.lower() not in suffixes:
        raise UserInputError(field, str(path), f"name a {kinds} file", "unknown format")
    if p.is_dir():
        raise UserInputError(field, str(path), "give a file path, not a directory",
                             "is a directory")
    if not p.parent.is_dir():
        raise UserInputError(field, str(path), f"create the directory {p.parent} first, or "
                             "write elsewhere", "no such directory")
    return p
