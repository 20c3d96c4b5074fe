"""Layering rules between ctxplan's packages, checked statically with ``ast``.

* ``ctxplan.sim`` imports nothing from ctxplan outside itself (the kernel knows nothing of LLMs);
* ``ctxplan.hardware`` and ``ctxplan.model`` do not import mapping, solve or sweep;
* ``ctxplan.solve`` does not import ``ctxplan.sim`` or ``ctxplan.mapping`` directly: it reaches
  the simulator only through ``ctxplan.evaluate``;
* ``ctxplan.serve`` (the request-level simulation) and ``ctxplan.sensitivity`` reach the
  simulator only through ``ctxplan.evaluate`` and ``ctxplan.solve``: never ``ctxplan.sim`` or
  ``ctxplan.mapping``;
* ``ctxplan.cli`` imports only the API, report, the option declarations and the errors;
* ``ctxplan.evaluate`` reaches the mapping through its one entry module,
  ``ctxplan.mapping.entry``; and ``solve``, ``serve`` and ``sensitivity`` never name a mapping
  or simulator symbol even through ``evaluate`` (no re-exports for their use);
* no package imports itself in a circle (no cycle among the modules of one package);
* no module outside the model layer, the edge (config) and the registry of attention kinds
  (``ctxplan.mapping.kinds``) names an attention kind: the rest dispatches through the registry.

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
    # The evaluation reaches the mapping through one door.
    ("ctxplan.evaluate", ("ctxplan.mapping",), ("ctxplan.mapping.entry",)),
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


# -- no cycles inside a package ---------------------------------------------------------------


def all_modules() -> dict[str, tuple[bool, str]]:
    """Every module under src/ctxplan: dotted name -> (is_package, source)."""
    out = {}
    for name, is_package, source, _ in package_modules("ctxplan") or []:
        out[name] = (is_package, source)
    return out


def import_graph(modules: dict[str, tuple[bool, str]]) -> dict[str, set[str]]:
    """module -> the modules it imports (every import statement, wherever it is: a name
    imported from a module counts as that module; a package's ``__init__`` is the package)."""

    def module_of(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for m, (is_package, source) in modules.items():
        for _, name in imported_names(source, m, is_package):
            target = module_of(name)
            if target and target != m:
                graph[m].add(target)
    return graph


def package_of(module: str) -> str:
    """The package a module belongs to for the cycle rule: ctxplan.<first part>."""
    return ".".join(module.split(".")[:2])


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles inside each package: strongly connected components (Tarjan) of more
    than one module, among the modules of one package."""
    found: list[list[str]] = []
    for package in sorted({package_of(m) for m in graph}):
        nodes = sorted(m for m in graph if package_of(m) == package)
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()

        def visit(v: str, nodes: list[str] = nodes, index: dict[str, int] = index,
                  low: dict[str, int] = low, stack: list[str] = stack,
                  on_stack: set[str] = on_stack) -> None:
            index[v] = low[v] = len(index)
            stack.append(v)
            on_stack.add(v)
            for w in sorted(graph[v]):
                if package_of(w) != package_of(v):
                    continue
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

        for v in nodes:
            if v not in index:
                visit(v)
    return found


def test_no_import_cycle_inside_any_package() -> None:
    circles = cycles(import_graph(all_modules()))
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_cycle_check_finds_a_circle_through_a_function_level_import() -> None:
    modules = {
        "ctxplan.x": (True, ""),
        "ctxplan.x.a": (False, "from ctxplan.x.b import f"),
        "ctxplan.x.b": (False, "def f():\n    from ctxplan.x import a"),
        "ctxplan.x.c": (False, "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                               "    from ctxplan.x.a import g"),
        "ctxplan.y": (False, "from ctxplan.x.c import g"),
    }
    assert cycles(import_graph(modules)) == [["ctxplan.x.a", "ctxplan.x.b"]]
    del modules["ctxplan.x.b"]
    assert cycles(import_graph(modules)) == []


# -- attention kinds dispatch only through the registry ----------------------------------------

# Where attention kinds may be named: the model layer (it defines them), the edge (model files
# and HF configs name the kinds of their layers), the registry with its kind modules, and the
# report (short labels for people: a kind it has none for shows its own name).
KIND_NAMERS = ("ctxplan.model", "ctxplan.config", "ctxplan.mapping.kinds", "ctxplan.report")


def kind_names() -> tuple[set[str], set[str]]:
    """(the constants naming a kind in ctxplan.model.spec, their values)."""
    from ctxplan.model import spec

    constants = {n for n in dir(spec) if n.endswith("_ATTENTION")} | {"LAYER_TYPES"}
    return constants, set(spec.LAYER_TYPES)


def kind_mentions(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, what) for every kind a module names: an imported kind constant, an attribute of
    that name, or a string equal to a kind."""
    constants, values = kind_names()
    found = [(line, name) for line, name in imported_names(source, module, is_package)
             if name.rpartition(".")[2] in constants]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in constants:
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value in values:
            found.append((node.lineno, repr(node.value)))
    return found


def test_attention_kinds_are_named_only_by_the_model_the_edge_and_the_registry() -> None:
    bad = []
    for module, is_package, source, shown in package_modules("ctxplan") or []:
        if any(_under(module, p) for p in KIND_NAMERS):
            continue
        bad += [f"{shown}:{line}: {module} names {what}"
                for line, what in kind_mentions(source, module, is_package)]
    assert not bad, "kinds named outside the registry:\n" + "\n".join(bad)


def test_the_kind_check_sees_constants_attributes_and_strings() -> None:
    for source in ("from ctxplan.model.spec import LINEAR_ATTENTION",
                   "from ctxplan.model import spec\nx = spec.FULL_ATTENTION",
                   "if kind == 'sliding_attention': pass"):
        assert kind_mentions(source, "ctxplan.mapping.prefill", False), source
    assert not kind_mentions("from ctxplan.mapping import kinds", "ctxplan.mapping.prefill",
                             False)


# -- no mapping or simulator names re-exported through evaluate --------------------------------

THROUGH_EVALUATE = ("ctxplan.solve", "ctxplan.serve", "ctxplan.sensitivity", "ctxplan.sweep")


def origin(modules: dict[str, tuple[bool, str]], module: str, name: str) -> str:
    """The module that defines ``name`` as ``module`` exposes it: follows ``from X import name``
    (under any alias) back to where it is defined; a submodule is its own origin."""
    seen = set()
    while (module, name) not in seen:
        seen.add((module, name))
        if f"{module}.{name}" in modules:
            return f"{module}.{name}"
        if module not in modules:
            return module
        is_package, source = modules[module]
        package = module if is_package else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - (node.level - 1)])
                    base = f"{base}.{node.module}" if node.module else base
                hit = next((a for a in node.names if (a.asname or a.name) == name), None)
                if hit is not None:
                    module, name = base, hit.name
                    break
        else:
            return module
    return module


def test_solve_and_above_name_no_mapping_or_simulator_symbol_through_evaluate() -> None:
    modules = all_modules()
    bad = []
    for package in THROUGH_EVALUATE:
        for module, is_package, source, shown in package_modules(package) or []:
            for line, name in imported_names(source, module, is_package):
                if not _under(name, "ctxplan.evaluate"):
                    continue
                where, _, symbol = name.rpartition(".")
                found = origin(modules, where, symbol)
                if _under(found, "ctxplan.mapping") or _under(found, "ctxplan.sim"):
                    bad.append(f"{shown}:{line}: {module} takes {symbol} from {where}, "
                               f"defined in {found}")
    assert not bad, "mapping / simulator names reached through evaluate:\n" + "\n".join(bad)


def test_origin_follows_re_exports() -> None:
    modules = {
        "ctxplan.evaluate": (True, "from ctxplan.evaluate.config import X\n"),
        "ctxplan.evaluate.config": (False, "from ctxplan.mapping.layout import Y as X\n"),
        "ctxplan.mapping.layout": (False, "Y = 1\n"),
    }
    assert origin(modules, "ctxplan.evaluate", "X") == "ctxplan.mapping.layout"
    assert origin(modules, "ctxplan.evaluate", "config") == "ctxplan.evaluate.config"
    assert origin(modules, "ctxplan.mapping.layout", "Y") == "ctxplan.mapping.layout"
