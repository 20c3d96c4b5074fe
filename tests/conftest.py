"""Suite-wide test settings.

The CLI records every evaluation in a persistent result store by default
(~/.cache/ctxplan/results.sqlite). Tests must neither read a developer's store nor leave
results behind, and a second identical run inside a test must simulate again, so the store is
off for every test unless the test names one (``--store FILE``, ``store=``, or its own
``CTXPLAN_STORE``): tests/sweep/test_store.py and test_resume.py do.
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_default_result_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLAN_STORE", "off")
