"""The simulator against published measurements (``ctxplan validate``, docs/validation.md)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxplan.config.hardware_presets import load_chip
from ctxplan.errors import UserInputError
from ctxplan.hardware.chip import Chip
from ctxplan.validate import (
    SensitivityResult,
    ValidationReport,
    load_cases,
    run_validation,
)
from ctxplan.validate import sensitivity as _sensitivity
from ctxplan.validate_kernels import load_kernel_rows


def validate(
    cases: str | Path | None = None,
    *,
    names: Sequence[str] | None = None,
    kernels: str | Path | bool | None = None,
) -> ValidationReport:
    """Simulate every validation case (``validation/*.yaml`` by default, or the directory
    ``cases``; only ``names`` if given) against its published measurement, and the kernel-level
    rows (``validation/kernels/``; ``kernels``: a directory, False to skip; by default they run
    with the default cases and no ``names``).

    Returns per case the measured and simulated latency and the signed relative error, and the
    median and worst absolute error (``report.summary()``); per kernel row the same, with the
    medians of its role (``report.kernels``, ``summary()["kernels"]``). See docs/validation.md.
    """
    if kernels is None:
        kernels = cases is None and names is None
    rows = [] if kernels is False else load_kernel_rows(None if kernels is True else kernels)
    return run_validation(load_cases(cases, names), kernel_rows=rows)


def validation_sensitivity(report: ValidationReport, figures: Sequence[str] | None = None,
                           factor: float = 1.1) -> list[SensitivityResult]:
    """How much each case of a validation ``report`` moves when each hardware figure of its
    chip and cluster (or only ``figures``) is scaled by ``factor``, one at a time."""
    return _sensitivity([r.case for r in report.results], figures, factor)


def validation_for_chip(chip: Chip | str, cases: str | Path | None = None) -> dict[str, Any]:
    """``ctxplan validate`` for one chip: the published rows measured on it (``cases``: the
    validation directory; default the source tree's), simulated now, with the summary by role.
    A chip that differs from the preset the rows name has no rows."""
    name = chip if isinstance(chip, str) else chip.name
    try:
        found = load_cases(cases)
    except UserInputError as exc:
        if cases is not None:
            raise
        return {"chip": name, "error": f"No validation cases were found ({exc.problem}): run "
                "from the ctxplan source tree to include the validation rows."}
    mine = [c for c in found if c.chip == name]
    if mine and not isinstance(chip, str) and load_chip(name) != chip:
        mine = []   # the rows were measured on the preset, not on these figures
    d = (run_validation(mine) if mine else ValidationReport([])).to_dict()
    return {"chip": name, "total_cases": len(found), "cases": d["cases"],
            "by_role": d["summary"]["by_role"]}
