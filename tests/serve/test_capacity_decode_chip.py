"""Capacity with the decode instances on a chip and cluster of their own (issue 25 item 3):
each instance shape is simulated on its own chip, the handoff crosses to the decode cluster,
and power adds up per pool."""

from __future__ import annotations

from typing import Any

import pytest

from ctxplan import api

KW: dict[str, Any] = dict(context_mix="128K", rates="0.05/s,0.1/s", tpot_max="50ms",
                          ttft_max="60s", kv_tiers="mla-fp8", requests=300)


@pytest.fixture(scope="module")
def mixed() -> Any:
    return api.capacity("deepseek-v3", "h20-96", decode_chip="h20-141", **KW)


def test_decode_instances_are_the_decode_chips(mixed: Any) -> None:
    d = mixed.to_dict()
    assert (d["chip"], d["decode_chip"]) == ("h20-96", "h20-141")
    assert d["decode_cluster"] == "hgx-h20-141-ib" and d["feasible"]
    # every decode step the search simulated is the decode chip's own
    shape = mixed.decode_shape
    b, n, t = mixed.decode_steps[0]
    own = api.evaluate("deepseek-v3", "h20-141", n, "decode", shape.cp, tp=shape.tp, batch=b,
                       kv_tier="mla-fp8")
    assert own.latency_s == t
    # the prefill service includes the handoff to the decode cluster, all of it hidden here
    assert mixed.kv_handoff == "streamed"


def test_power_adds_up_per_pool(mixed: Any) -> None:
    for p, row in zip(mixed.points, mixed.to_dict()["points"], strict=True):
        n_d = p.decode_instances * p.decode_chips_per_instance
        n_p = p.total_chips - n_d
        assert row["watts"] == pytest.approx(400 * n_p + 500 * n_d)
        assert row["decode_tdp_w"] == 500 and row["tdp_w"] == 400
