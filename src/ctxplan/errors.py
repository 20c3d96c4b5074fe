"""Errors a user can cause, and how they are worded.

A user mistake is reported once, as one line that names the field, the value and the fix
(the CLI prints it and exits with code 2, no traceback). Anything else is a bug and is
allowed to raise normally.
"""

from __future__ import annotations


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
