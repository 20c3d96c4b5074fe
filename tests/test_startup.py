"""Commands that simulate nothing load neither numpy nor the compiled simulator (issue 10:
``ctxplan --help`` stays fast). Checked by what is imported, not by timing."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("numpy", "numba", "matplotlib", "jinja2", "ctxplan.sim", "ctxplan.evaluate",
         "ctxplan.mapping", "ctxplan.solve", "ctxplan.sweep", "ctxplan.api")
# What `ctxplan --help` alone also leaves out (issue 24: <= 0.3 s): the schemas' pydantic and
# the presets' YAML. (A command's own --help loads pydantic: typer >= 0.2x converts the
# arguments with it, before any ctxplan code runs.)
LIGHT_HELP = (*HEAVY, "pydantic", "yaml", "sqlite3", "rich.progress")

_PROBE = """
import json, sys
from ctxplan.cli import main
args = json.loads(sys.argv[1])
try:
    sys.argv = ["ctxplan", *args]
    main()
except SystemExit:
    pass
# A module registered lazily (importlib's LazyLoader) is a _LazyModule until first used;
# type() does not trigger its loading, attribute access would.
loaded = [m for m in {heavy!r}
          if m in sys.modules and type(sys.modules[m]).__name__ != "_LazyModule"]
print("LOADED=" + json.dumps(loaded))
"""


def _loaded_after(*args: str, watch: tuple[str, ...] = HEAVY) -> list[str]:
    code = _PROBE.format(heavy=watch)
    out = subprocess.run([sys.executable, "-c", code, json.dumps(list(args))],
                         capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("LOADED="))
    loaded: list[str] = json.loads(line.removeprefix("LOADED="))
    return loaded


def test_help_loads_nothing_heavy() -> None:
    assert _loaded_after("--help") == []
    assert _loaded_after("solve", "--help") == []


def test_top_level_help_loads_neither_pydantic_nor_yaml() -> None:
    assert _loaded_after("--help", watch=LIGHT_HELP) == []


def test_presets_load_nothing_heavy() -> None:
    assert _loaded_after("presets", "--json") == []


def test_a_usage_error_loads_nothing_heavy() -> None:
    assert _loaded_after("eval", "--cp", "not-a-number") == []


def test_a_simulation_does_load_the_simulator() -> None:
    """The probe can see a loaded module (else the tests above would pass vacuously)."""
    assert "numpy" in _loaded_after("eval", "--model", "llama3.1-8b", "--chip", "h100-sxm",
                                    "--context", "1K", "--phase", "decode", "--cp", "1",
                                    "--json", "--no-store")
