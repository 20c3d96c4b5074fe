"""Helpers shared by the test packages: ``from tests.helpers.cli import run_cli`` and
``from tests.helpers.inputs import TINY_MODEL``.

tests/ is a package (every directory has an ``__init__.py``), so pytest puts the repository root
on ``sys.path`` and every test module imports helpers by their absolute name, under a bare
``pytest`` as under ``python -m pytest``. Helpers that serve one test package only (the sim
oracle and graphs, the mapping and hardware builders, the model strategies) live beside the
tests that use them and are imported the same way (``from tests.sim.graphs import chain``).
"""
