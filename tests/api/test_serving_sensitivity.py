"""``api.capacity`` (api/serving.py) and ``api.sensitivity`` (api/sensitivities.py): their
requests, their errors, and the same answers as ``ctxplan capacity`` and ``ctxplan
sensitivity``."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxplan import api
from ctxplan.errors import UserInputError
from tests.api.conftest import cli_json, flags
from tests.helpers.cli import run_cli

SERVING = {"rates": "1/s,4/s", "context_mix": "1K:0.5,3000:0.5", "requests": 40,
           "output_tokens": 20, "max_chips": 8}


def test_capacity_request_checks_the_traffic(tiny: dict[str, str]) -> None:
    req = api.capacity_request(tiny["model"], tiny["chip"], cluster=tiny["cluster"], **SERVING)
    assert req.rates_per_s == (1.0, 4.0) and req.solve.context_length == 3000
    assert req.solve.batch == "auto"
    with pytest.raises(UserInputError, match="capacity does not take a fixed batch"):
        api.capacity_request(tiny["model"], tiny["chip"], batch=2, **SERVING)
    with pytest.raises(UserInputError, match="capacity does not take a fixed batch"):
        api.check_capacity_batch(4)
    api.check_capacity_batch("auto")
    with pytest.raises(UserInputError, match=r"^rates = None"):
        api.capacity_request(tiny["model"], tiny["chip"], context_mix="1K")


def test_capacity_answers_as_the_command_line_does(tiny: dict[str, str],
                                                   tmp_path: Path) -> None:
    run = run_cli(["capacity", *flags(tiny), "--rates", "1/s,4/s", "--contexts",
                   "1K:0.5,3000:0.5", "--requests", "40", "--output-tokens", "20",
                   "--max-chips", "8", "--json", "--no-store"])
    assert run.code == 0, run.err
    result = api.capacity(tiny["model"], tiny["chip"], cluster=tiny["cluster"], **SERVING)
    assert result.to_dict() == cli_json(run.out)
    api.write_capacity_plot(result, tmp_path / "c.svg")
    assert (tmp_path / "c.svg").stat().st_size > 0


def test_sensitivity_answers_as_the_command_line_does(tiny: dict[str, str],
                                                      tmp_path: Path) -> None:
    run = run_cli(["sensitivity", *flags(tiny), "--context", "3000", "--max-chips", "8",
                   "--figures", "chip.memory_bandwidth", "--steps", "-10%,+10%", "--json",
                   "--no-store"])
    assert run.code == 0, run.err
    study = api.sensitivity(tiny["model"], tiny["chip"], 3000, cluster=tiny["cluster"],
                            max_chips=8, figures="chip.memory_bandwidth", steps="-10%,+10%")
    assert study.to_dict() == cli_json(run.out)
    assert [r.figure for r in study.rows] == ["chip.memory_bandwidth"]
    api.write_tornado(study, tmp_path / "t.svg")
    assert (tmp_path / "t.svg").stat().st_size > 0
    with pytest.raises(UserInputError) as info:
        api.sensitivity(tiny["model"], tiny["chip"], 3000, figures="chip.nothing")
    assert info.value.field == "figures"
