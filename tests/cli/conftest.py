"""Inputs for the command-line tests: the tiny model and cluster as files a user would pass
(every simulation takes milliseconds), and the flags naming them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.inputs import TINY_CLUSTER, TINY_MODEL, study_data, write_yaml


@pytest.fixture(scope="session")
def tiny_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("tiny")
    return {"model": write_yaml(d / "tiny.yaml", TINY_MODEL),
            "cluster": write_yaml(d / "cluster.yaml", TINY_CLUSTER),
            "study": write_yaml(d / "study.yaml", study_data())}


@pytest.fixture(scope="session")
def tiny(tiny_files: dict[str, Path]) -> list[str]:
    """--model, --chip and --cluster of the tiny model on h100-sxm's figures."""
    return ["--model", str(tiny_files["model"]), "--chip", "h100-sxm", "--cluster",
            str(tiny_files["cluster"])]


@pytest.fixture(scope="session")
def search(tiny: list[str]) -> list[str]:
    """The tiny model's flags with a small, fixed search (fast: a handful of points)."""
    return [*tiny, "--max-chips", "8", "--prefill-tp", "1", "--decode-tp", "1", "--no-store"]
