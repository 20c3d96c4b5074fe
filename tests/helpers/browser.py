"""Headless Chromium for the report tests: Debian's ``chromium`` package, driven by Playwright.

Playwright drives the system browser given by path (``executable_path``); it never downloads
one (``playwright install`` is not run anywhere). The browser runs with a fresh profile
directory and with its background connections off (this machine's network refuses them).

``python -m tests.helpers.browser REPORT.html OUT.png [WIDTH]`` takes the screenshot the docs
show (docs/report.md).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run")
ENV_VAR = "CTXPLAN_CHROMIUM"   # the browser binary, if not `chromium` on the PATH


def chromium_path() -> str | None:
    given = os.environ.get(ENV_VAR)
    if given:
        return given if Path(given).is_file() else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


def unavailable() -> str | None:
    """Why the browser test cannot run here (None: it can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    if chromium_path() is None:
        return (f"no Chromium: install Debian's package (apt-get install -y chromium) or set "
                f"${ENV_VAR} to its binary")
    return None


TEST_FILE = "test_report_browser.py"


def skip_notice(skipped: list[Any]) -> str | None:
    """The line the end of a test run says when the browser test was skipped (its reason),
    from the run's skipped reports; None when it ran or was not part of the run. A skip that
    only ``-rs`` shows is a test nobody knows did not run."""
    for report in skipped:
        where = str(getattr(report, "nodeid", "") or getattr(report, "fspath", ""))
        if TEST_FILE in where:
            reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else \
                str(report.longrepr)
            why = reason.removeprefix("Skipped: ").removeprefix("report browser test skipped: ")
            return (f"NOTE: the report's browser test did not run ({why}); it runs wherever "
                    "Chromium is installed, and under CI it must")
    return None


@contextmanager
def browser(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A Playwright browser context on a fresh profile directory."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="ctxplan-chromium-") as profile, \
            sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=chromium_path(), headless=True,
            args=[f for f in CHROMIUM_FLAGS if f != "--headless"],
            viewport={"width": width, "height": height})
        try:
            yield context
        finally:
            context.close()


def screenshot(html: Path, out: Path, width: int = 1280, height: int | None = None) -> Path:
    """A PNG of the page at ``width`` pixels (the whole page, or its first ``height``)."""
    with browser(width) as context:
        page = context.new_page()
        page.goto(html.resolve().as_uri())
        if height is None:
            page.screenshot(path=str(out), full_page=True)
        else:
            page.set_viewport_size({"width": width, "height": height})
            page.screenshot(path=str(out))
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) not in (2, 3, 4):
        sys.exit("usage: python -m tests.helpers.browser REPORT.html OUT.png [WIDTH [HEIGHT]]")
    screenshot(Path(args[0]), Path(args[1]), *(int(a) for a in args[2:]))
