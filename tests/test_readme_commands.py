"""The README's test command is the one CI runs, and it works from a fresh clone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_test_line() -> str:
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    lines = [line for b in blocks for line in b.splitlines() if line.rstrip().endswith("pytest")]
    assert len(lines) == 1, f"expected one test command in the README, found {lines}"
    return lines[0]


def test_ci_runs_the_readme_test_line_verbatim() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _readme_test_line() in ci
    assert not any("python -m pytest" in line for line in ci)


def test_tests_are_a_package_so_a_bare_pytest_imports_the_helpers() -> None:
    # A bare `pytest` puts the repository root on sys.path only through the rootdir of a
    # package; every test directory therefore needs an __init__.py.
    missing = [str(d.relative_to(ROOT)) for d in (ROOT / "tests").rglob("*")
               if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py"))
               and not (d / "__init__.py").is_file()]
    assert not missing and (ROOT / "tests" / "__init__.py").is_file(), missing
