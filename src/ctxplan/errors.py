"""Errors a user can cause, and how they are worded.

A user mistake is reported once, as one line that names the field, the value and the fix
(the CLI prints it and exits with code 2, no traceback). Anything else is a bug and is
allowed to raise normally.
"""

from __future__ import annotations

from collections.abc import Iterable


class CtxplanError(Exception):
    """Base class for every error ctxplan raises on purpose."""


class UserInputError(CtxplanError):
    """Bad input: names the field, the value given and how to fix it."""

    def __init__(self, field: str, value: object, fix: str, problem: str = "invalid value") -> None:
        self.field = field
        self.value = value
        self.fix = fix
        self.problem = problem
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"{field} = {shown}: {problem}. Fix: {fix}")

    def __reduce__(self) -> tuple[type[UserInputError], tuple[str, object, str, str]]:
        # Pickles with its fields (a worker process or Ray task raising it hands it back whole).
        return (type(self), (self.field, self.value, self.fix, self.problem))


def did_you_mean(value: object, choices: Iterable[str]) -> str:
    """"did you mean 'deepseek-v3'? " when ``value`` is close to one of ``choices`` (case,
    '_' for '-' and small typos forgiven), else ""."""
    import difflib

    if not isinstance(value, str) or not value.strip():
        return ""
    names = list(choices)
    key = value.strip().lower().replace("_", "-")
    exact = [n for n in names if n.lower().replace("_", "-") == key]
    close = exact or difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'? " if close and close[0] != value else ""
