"""Layering rules between ctxplan's packages, checked statically with ``ast``.

* ``ctxplan.sim`` imports nothing from ctxplan outside itself (the kernel knows nothing of LLMs);
* ``ctxplan.hardware`` and ``ctxplan.model`` do not import mapping, solve or sweep;
* ``ctxplan.solve`` does not import ``ctxplan.sim`` or ``ctxplan.mapping`` directly: it reaches
  the simulator only through ``ctxplan.evaluate``;
* ``ctxplan.serve`` (the request-level simulation) and ``ctxplan.sensitivity`` reach the
  simulator only through ``ctxplan.evaluate`` and ``ctxplan.solve``: never ``ctxplan.sim`` or
  ``ctxplan.mapping``;
* ``ctxplan.cli`` imports only the API, report, the option declarations and the errors.

Every import statement counts, wherever it is (function bodies, ``if TYPE_CHECKING:`` blocks),
relative imports are resolved, and ``importlib.import_module("ctxplan...")`` / ``__import__``
with a literal name count too. A package that does not exist (yet) is skipped.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# (importing package, forbidden prefixes, allowed prefixes that override a forbidden one)
RULES: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("ctxplan.sim", ("ctxplan",), ("ctxplan.sim",)),
    ("ctxplan.hardware", ("ctxplan.mapping", "ctxplan.solve", "ctxplan.sweep"), ()),
    ("ctxplan.model", ("ctxplan.mapping", "ctxplan.solve", "ctxplan.sweep"), ()),
    ("ctxplan.solve", ("ctxplan.sim", "ctxplan.mapping"), ()),
    ("ctxplan.serve", ("ctxplan.sim", "ctxplan.mapping", "ctxplan.cli", "ctxplan.api"), ()),
    ("ctxplan.sensitivity", ("ctxplan.sim", "ctxplan.mapping", "ctxplan.cli", "ctxplan.api"),
     ()),
    # The command line is a thin layer: the API, the report, the option declarations.
    ("ctxplan.cli", ("ctxplan",), ("ctxplan.cli", "ctxplan.api", "ctxplan.report",
                                   "ctxplan.config.options", "ctxplan.errors",
                                   "ctxplan.__version__")),
]


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def imported_names(source: str, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, absolute dotted name) for everything ``module`` imports.

    ``from a.b import c`` yields ``a.b.c`` (c may be a submodule), so a prefix test on the
    result catches both ``from ctxplan import mapping`` and ``from ctxplan.mapping import x``.
    """
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            for alias in node.names:
                yield node.lineno, base if alias.name == "*" else f"{base}.{alias.name}"
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[0]
            if (
                fname in ("import_module", "__import__")
                and isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
            ):
                yield node.lineno, arg.value


def violations(
    modules: list[tuple[str, bool, str, str]], forbidden: tuple[str, ...], allowed: tuple[str, ...]
) -> list[str]:
    """``modules`` are (dotted name, is_package, source, path shown in messages)."""
    found = []
    for module, is_package, source, shown in modules:
        for line, name in imported_names(source, module, is_package):
            if any(_under(name, f) for f in forbidden) and not any(
                _under(name, a) for a in allowed
            ):
                found.append(f"{shown}:{line}: {module} imports {name}")
    return found


def package_modules(package: str) -> list[tuple[str, bool, str, str]] | None:
    """Every module of ``package`` under src/, or None if the package does not exist."""
    path = SRC.joinpath(*package.split("."))
    if path.is_dir():
        files = sorted(path.rglob("*.py"))
    elif path.with_suffix(".py").is_file():
        files = [path.with_suffix(".py")]
    else:
        return None
    out = []
    for f in files:
        rel = f.relative_to(SRC).with_suffix("")
        is_package = rel.name == "__init__"
        parts = rel.parts[:-1] if is_package else rel.parts
        out.append((".".join(parts), is_package, f.read_text(), str(f.relative_to(SRC.parent))))
    return out


@pytest.mark.parametrize(("package", "forbidden", "allowed"), RULES, ids=[r[0] for r in RULES])
def test_import_rule(package: str, forbidden: tuple[str, ...], allowed: tuple[str, ...]) -> None:
    modules = package_modules(package)
    if modules is None:
        pytest.skip(f"{package} does not exist yet")
    bad = violations(modules, forbidden, allowed)
    assert not bad, "layering violations:\n" + "\n".join(bad)


def test_src_is_where_we_think() -> None:
    assert (SRC / "ctxplan" / "__init__.py").is_file()


# -- the checker itself ---------------------------------------------------------------------------


def _check(source: str, module: str, is_package: bool = False) -> list[str]:
    forbidden, allowed = ("ctxplan",), ("ctxplan.sim",)
    return violations([(module, is_package, source, "x.py")], forbidden, allowed)


@pytest.mark.parametrize(
    "source",
    [
        "import ctxplan.errors",
        "from ctxplan import errors",
        "from ctxplan.errors import SimulationError",
        "from .. import errors",
        "from ..mapping import builder",
        "def f():\n    from ctxplan.model import spec",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ctxplan.mapping import x",
        "import importlib\nimportlib.import_module('ctxplan.mapping')",
        "__import__('ctxplan.solve')",
    ],
)
def test_checker_catches(source: str) -> None:
    assert _check(source, "ctxplan.sim.kernel"), source


@pytest.mark.parametrize(
    "source",
    [
        "import heapq\nfrom dataclasses import dataclass",
        "from ctxplan.sim.kernel import TaskGraph",
        "from . import kernel",
        "from .kernel import TaskGraph",
        "import ctxplan.sim.kernel",
        "import ctxplanner",  # a prefix of the name is not the package
    ],
)
def test_checker_allows(source: str) -> None:
    assert not _check(source, "ctxplan.sim.kernel"), source


def test_checker_resolves_relative_imports_in_a_package_init() -> None:
    # In ctxplan/sim/__init__.py, "from .kernel" is ctxplan.sim.kernel; "from .. import x" is
    # ctxplan.x.
    assert not _check("from .kernel import TaskGraph", "ctxplan.sim", is_package=True)
    assert _check("from .. import errors", "ctxplan.sim", is_package=True)
