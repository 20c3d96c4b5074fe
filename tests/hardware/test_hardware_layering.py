"""The hardware layer imports nothing from ctxplan but itself and ctxplan.errors."""

from __future__ import annotations

import ast
from pathlib import Path

import ctxplan.hardware

ALLOWED = ("ctxplan.hardware", "ctxplan.errors")


def _ctxplan_imports(path: Path) -> list[str]:
    modules = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.append(node.module)
    return [m for m in modules if m == "ctxplan" or m.startswith("ctxplan.")]


def test_hardware_imports_only_itself_and_errors() -> None:
    package = Path(ctxplan.hardware.__file__).parent
    sources = sorted(package.glob("*.py"))
    assert sources
    for source in sources:
        for module in _ctxplan_imports(source):
            assert module.startswith(ALLOWED), f"{source.name} imports {module}"
