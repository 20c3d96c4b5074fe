"""The console entry point: user mistakes exit 2 with one line on stderr, never a traceback."""

from __future__ import annotations

import importlib
import itertools
import sys

from ctxplan.cli.app import app
from ctxplan.errors import CtxplanError


def _click_exceptions(name: str) -> tuple[type[BaseException], ...]:
    """The click exception class ``name`` from typer's vendored click and from click itself
    (typer >= 0.16 vendors click; which one raises depends on the installed typer)."""
    found: list[type[BaseException]] = []
    for module in ("typer._click.exceptions", "click.exceptions"):
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        if cls not in found:
            found.append(cls)
    return tuple(found)


_NO_ARGS = _click_exceptions("NoArgsIsHelpError")
_USAGE = _click_exceptions("UsageError")
_CLICK = _click_exceptions("ClickException")
_EXIT = _click_exceptions("Exit")
_ABORT = _click_exceptions("Abort")


def _one_line(message: object) -> str:
    """The message on one line, whatever text the user typed into it (every kind of line
    break, as str.splitlines sees them, shown as \\n)."""
    return "\\n".join(str(message).strip().splitlines())


def _flag_given_a_value(ctx: object, argv: list[str]) -> tuple[str, str] | None:
    """(flag, word) when the usage error is a word typed after an on/off flag, as in
    ``--json true``: the help shows such flags without a value, so say that."""
    command = getattr(ctx, "command", None)
    flags = {name for p in getattr(command, "params", ())
             if getattr(p, "is_flag", False) for name in getattr(p, "opts", ())}
    for flag, word in itertools.pairwise(argv):
        if flag in flags and not word.startswith("-"):
            return flag, word
    return None


def _fail(message: object) -> None:
    print(f"error: {_one_line(message)}", file=sys.stderr)
    sys.exit(2)


def main(argv: list[str] | None = None) -> None:
    """Run ``ctxplan argv`` (default: the process's arguments)."""
    try:
        app(args=argv, prog_name="ctxplan", standalone_mode=False)
    except CtxplanError as exc:  # UserInputError included
        _fail(exc)
    except _NO_ARGS as exc:
        ctx = getattr(exc, "ctx", None)
        print(ctx.get_help() if ctx is not None else "usage: ctxplan COMMAND --help")
        sys.exit(0)
    except _USAGE as exc:
        msg = " ".join(exc.format_message().strip().splitlines())  # type: ignore[attr-defined]
        ctx = getattr(exc, "ctx", None)
        flag = _flag_given_a_value(ctx, sys.argv[1:] if argv is None else argv)
        if flag is not None:
            _fail(f"{flag[0]} = {flag[1]!r}: a flag takes no value. Fix: write {flag[0]} alone "
                  f"(leave it out for the default)")
        _fail(msg + (f" (see `{ctx.command_path} --help`)" if ctx is not None else ""))
    except _CLICK as exc:
        _fail(exc.format_message())  # type: ignore[attr-defined]
    except _EXIT as exc:
        sys.exit(getattr(exc, "exit_code", 0))
    except _ABORT:
        print("aborted", file=sys.stderr)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as exc:  # a file the user named cannot be read or written
        where = f" {exc.filename}" if exc.filename else ""
        _fail(f"cannot use{where}: {exc.strerror or exc}. Fix: check the path and its "
              "permissions")
