"""Kernel-level validation rows (issue 26): the published tables in validation/kernels, run
through the simulator's own kernel and collective code, reported apart by role."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from ctxplan import api
from ctxplan.errors import UserInputError
from ctxplan.validate_kernels import (
    KERNELS,
    MEDIAN_TARGET,
    ROLES,
    default_kernels_dir,
    load_kernel_rows,
    run_kernel_rows,
    summary,
)
from tests.helpers.cli import run_cli


@pytest.fixture(scope="module")
def rows():  # type: ignore[no-untyped-def]
    return load_kernel_rows()


def test_every_table_carries_its_source_trust_and_role(rows) -> None:  # type: ignore[no-untyped-def]
    tables = sorted(default_kernels_dir().glob("*.yaml"))
    assert len(tables) == len({r.table for r in rows}) >= 20
    for path in tables:
        data = yaml.safe_load(path.read_text())
        assert data["source"].strip() and data["trust_reason"].strip()
        assert data["trust"] in (1.0, 0.5, 0.25) and data["role"] in ROLES
    for r in rows:
        assert r.kernel in KERNELS and r.measured_s > 0 and r.source


def test_fit_and_prediction_tables_are_on_different_chips(rows) -> None:  # type: ignore[no-untyped-def]
    """Fitted on H800 / H100 tables, predicting the others' GPUs: no prediction row runs on a
    chip a calibration table was fitted on."""
    fit = {r.chip.name for r in rows if r.role == "calibration"}
    predicted = {r.chip.name for r in rows if r.role == "prediction"}
    assert fit <= {"h800", "h100-sxm", "h100-pcie"}
    assert not fit & predicted
    assert {"h20-96", "b200"} <= predicted


def test_every_row_simulates_to_a_finite_time_and_summarises(rows) -> None:  # type: ignore[no-untyped-def]
    results = run_kernel_rows(rows)
    assert all(math.isfinite(r.simulated_s) and r.simulated_s > 0 for r in results)
    s = summary(results)
    for role in ROLES:
        errs = sorted(abs(r.error) for r in results if r.row.role == role)
        assert s[role]["rows"] == len(errs)
        assert s[role]["worst_abs_error"] == pytest.approx(errs[-1])
        assert s[role]["within_target"] == (s[role]["median_abs_error"] <= MEDIAN_TARGET)


def test_a_table_without_a_valid_role_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(
        {"source": "x", "trust": 0.5, "role": "guess", "chip": "h100-sxm", "kernel": "gemm",
         "rows": [{"m": 1, "n": 1, "k": 1, "us": 1}]}))
    with pytest.raises(UserInputError, match="role"):
        load_kernel_rows(tmp_path)


def test_validate_reports_kernel_rows_apart_and_in_json() -> None:
    code, out, _ = run_cli(["validate", "--json"])
    assert code == 0
    data = json.loads(out)
    assert data["kernels"] and {k["role"] for k in data["kernels"]} == set(ROLES)
    assert set(data["summary"]["kernels"]) == set(ROLES)
    code, out, _ = run_cli(["validate"])
    assert code == 0
    assert "kernel rows, calibration tables" in out and "kernel rows, prediction tables" in out
    assert "median |error|" in out


def test_kernel_rows_can_be_skipped_and_do_not_run_for_named_cases() -> None:
    assert api.validate(kernels=False).kernels == []
    name = api.validate(kernels=False).results[0].case.name
    assert api.validate(names=[name]).kernels == []
