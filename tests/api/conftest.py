"""Small inputs for the API tests: the tiny model and cluster as files, as a user passes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.inputs import TINY_CLUSTER, TINY_MODEL, write_yaml


@pytest.fixture
def tiny(tmp_path: Path) -> dict[str, str]:
    """Paths of the tiny model and cluster, and the chip preset they run on."""
    return {"model": str(write_yaml(tmp_path / "tiny.yaml", TINY_MODEL)),
            "cluster": str(write_yaml(tmp_path / "cluster.yaml", TINY_CLUSTER)),
            "chip": "h100-sxm"}


def flags(inputs: dict[str, str]) -> list[str]:
    return ["--model", inputs["model"], "--chip", inputs["chip"], "--cluster", inputs["cluster"]]


def cli_json(out: str) -> dict[str, Any]:
    """A command's --json output without its wall-clock timings (the only part that varies)."""
    data: dict[str, Any] = json.loads(out)
    data.pop("timings", None)
    return data
