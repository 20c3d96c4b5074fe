"""What every API function takes (api/inputs.py): models, chips and clusters by preset, path or
object; lists of models and contexts; output paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxplan import api
from ctxplan.errors import UserInputError
from ctxplan.model.precision import Precision


def test_presets_paths_and_objects_resolve_alike(tiny: dict[str, str]) -> None:
    m = api.resolve_model(tiny["model"])
    assert api.resolve_model(m) is m and m.name == "tiny"
    chip = api.resolve_chip("h100-sxm")
    assert api.resolve_chip(chip) is chip
    assert api.resolve_cluster(None, chip).name == chip.default_cluster
    cluster = api.resolve_cluster(tiny["cluster"], chip)
    assert cluster.name == "tiny-cluster" and api.resolve_cluster(cluster, chip) is cluster
    with pytest.raises(UserInputError):
        api.resolve_chip("h100-sxn")


def test_lists_of_models_and_contexts(tiny: dict[str, str]) -> None:
    assert api.model_items("llama3.1-8b, deepseek-v3") == ["llama3.1-8b", "deepseek-v3"]
    assert api.model_items(tiny["model"]) == [tiny["model"]]
    assert [m.name for m in api.resolve_models(["llama3.1-8b", "llama3.1-8b"])] == \
        ["llama3.1-8b"]
    for bad in (",", []):
        with pytest.raises(UserInputError, match=r"^model"):
            api.model_items(bad)
    assert api.context_lengths("8K,1M") == [8192, 2**20]
    assert api.context_lengths([3000, "1K"]) == [3000, 1024]
    with pytest.raises(UserInputError, match=r"^contexts"):
        api.context_lengths([])


def test_precision_for_the_per_part_dtypes(tiny: dict[str, str]) -> None:
    m = api.resolve_model(tiny["model"])
    assert api.precision_for(m) is None
    assert api.precision_for(m, ffn_weights="fp8") == Precision(attention_weights="bf16",
                                                                ffn_weights="fp8")


def test_an_output_path_that_cannot_be_written_is_refused(tmp_path: Path) -> None:
    assert api.check_output(tmp_path / "r.html", "out", (".html",)) == tmp_path / "r.html"
    with pytest.raises(UserInputError, match=r"^out"):
        api.check_output(tmp_path / "r.txt", "out", (".html",))
    with pytest.raises(UserInputError, match=r"^out"):
        api.check_output(tmp_path / "no" / "such" / "dir" / "r.html", "out", (".html",))
