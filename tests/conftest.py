"""Suite-wide test settings.

The CLI records every evaluation in a persistent result store by default
(~/.cache/ctxplan/results.sqlite). Tests must neither read a developer's store nor leave
results behind, and a second identical run inside a test must simulate again, so the store is
off for every test unless the test names one (``--store FILE``, ``store=``, or its own
``CTXPLAN_STORE``): tests/sweep/test_store.py and test_resume.py do.

A skipped browser test (no Chromium or no Playwright here) is said at the end of the run, not
only under ``-rs``.

Hypothesis: under CI (CI set in the environment, as .ci/run's runner does) examples are
derandomized, so a submission's result does not depend on the seed; locally each run explores
new examples, which is how the property tests keep finding things.
"""

from __future__ import annotations

import os
from importlib.util import find_spec

import pytest

# What the suite imports, by module name (pyproject.toml's dependencies and dev extra; ray is
# optional and its tests skip without it). A clone without them gets one line saying how to
# install them, not a traceback per test module.
NEEDED = ("numpy", "numba", "pydantic", "yaml", "typer", "rich", "matplotlib", "jinja2",
          "hypothesis", "simpy", "pytest_benchmark", "xdist")


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """Without pytest-xdist or pytest-benchmark, accept the options pyproject's addopts give
    them (--numprocesses, --maxprocesses, --dist: long forms, as a conftest may not add -n;
    --benchmark-skip), so that the run reaches the one-line "install the dev extra" message
    below rather than stopping at "unrecognized arguments"; with ``-p no:xdist`` the suite
    then runs in one process."""
    if not pluginmanager.has_plugin("xdist"):
        parser.addoption("--numprocesses", dest="numprocesses", default=None)
        parser.addoption("--maxprocesses", dest="maxprocesses", default=None)
        parser.addoption("--dist", dest="dist", default="no")
    if not pluginmanager.has_plugin("benchmark"):   # pytest-benchmark's --benchmark-skip
        parser.addoption("--benchmark-skip", action="store_true", dest="benchmark_skip")


def pytest_configure(config: pytest.Config) -> None:
    missing = [name for name in NEEDED if find_spec(name) is None]
    if missing:
        raise pytest.UsageError(
            f"the test suite needs {', '.join(missing)}, not installed in this Python: run "
            "`pip install -e '.[dev,ray]'` in the virtual environment first (README)")
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
    if os.environ.get("CI"):
        settings.load_profile("ci")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say at the end of the run, in any verbosity, when the browser test was skipped."""
    from tests.helpers.browser import skip_notice

    notice = skip_notice(terminalreporter.stats.get("skipped", []))
    if notice is not None:
        terminalreporter.write_line(notice, yellow=True, bold=True)


@pytest.fixture(autouse=True)
def _no_default_result_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLAN_STORE", "off")
