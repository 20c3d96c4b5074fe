"""``ctxplan.api`` re-exports every public name of its modules (imported on first use), and the
imports it declares for type checkers are exactly those names."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import ctxplan.api as api

INIT = Path(api.__file__)


def _type_checking_imports() -> dict[str, set[str]]:
    tree = ast.parse(INIT.read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If)
                 and getattr(n.test, "id", "") == "TYPE_CHECKING")
    out: dict[str, set[str]] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module is not None
        out.setdefault(node.module, set()).update(a.name for a in node.names)
    return out


def test_the_exports_are_what_type_checkers_see() -> None:
    assert _type_checking_imports() == {m: set(n) for m, n in api._EXPORTS.items()}


def test_every_export_resolves_and_no_name_is_a_module_too() -> None:
    modules = {m.name for m in pkgutil.iter_modules([str(INIT.parent)])}
    for name in api.__all__:
        assert name not in modules, name   # a submodule would shadow the function
        module = importlib.import_module(api._MODULE_OF[name])
        assert getattr(api, name) is getattr(module, name)
    assert set(api.__all__) <= set(dir(api))


def test_the_api_modules_define_only_what_is_exported() -> None:
    """Every public function or class defined in an api module is reachable as api.<name>."""
    for info in pkgutil.iter_modules([str(INIT.parent)]):
        module = importlib.import_module(f"ctxplan.api.{info.name}")
        tree = ast.parse(Path(module.__file__ or "").read_text())
        defined = {n.name for n in tree.body
                   if isinstance(n, ast.FunctionDef | ast.ClassDef) and not n.name.startswith("_")}
        assert defined <= set(api.__all__), (info.name, defined - set(api.__all__))


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        api.no_such_function  # noqa: B018
    except AttributeError as exc:
        assert "no_such_function" in str(exc)
    else:
        raise AssertionError("api.no_such_function resolved")
