"""Times, rates and context mixes as users type them (config/units.py)."""

from __future__ import annotations

import pytest

from ctxplan import api
from ctxplan.config.units import parse_seconds
from ctxplan.errors import UserInputError


@pytest.mark.parametrize(("text", "seconds"), [
    ("30min", 1800.0), ("1h", 3600.0), ("1.5h", 5400.0), ("2 min", 120.0), ("90s", 90.0),
    ("20ms", 0.02), ("800us", 8e-4), ("800µs", 8e-4), ("5ns", 5e-9),
])
def test_times_with_their_unit(text: str, seconds: float) -> None:
    assert parse_seconds(text, "ttft_max") == pytest.approx(seconds, rel=1e-15)


@pytest.mark.parametrize("text", ["20", "20m", "1hr", "1 hour", "0min", "-1h", "h"])
def test_times_without_a_known_unit_are_refused(text: str) -> None:
    with pytest.raises(UserInputError) as err:
        parse_seconds(text, "ttft_max")
    assert err.value.field == "ttft_max"


def test_a_ttft_target_in_minutes_reaches_the_sla() -> None:
    req = api.solve_request("llama3.1-8b", "h100-sxm", "8K", ttft_max="30min", tpot_max="1h")
    assert (req.sla.ttft_max_s, req.sla.tpot_max_s) == (1800.0, 3600.0)
