"""The Ray executor on a local Ray instance started by the test (2 CPUs): the same sweep as
serial, byte for byte, with the workers writing the shared result store. Skipped when the
`ray` extra is not installed (.ci/run installs it, so CI runs it)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxplan import api
from ctxplan.cli import main
from ctxplan.errors import UserInputError
from ctxplan.sweep import RayExecutor, ResultStore

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray

SWEEP: dict[str, Any] = dict(max_chips=8)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level=logging.ERROR)
    try:
        yield
    finally:
        ray.shutdown()


def test_ray_sweep_equals_serial(local_ray: None, tmp_path: Path) -> None:
    serial = api.sweep("llama3.1-8b", "h100-sxm", "8K,32K", store=tmp_path / "s.sqlite",
                       **SWEEP)
    executor = RayExecutor()
    assert executor.shares_filesystem()   # one local node: workers open the store themselves
    on_ray = api.sweep("llama3.1-8b", "h100-sxm", "8K,32K", store=tmp_path / "r.sqlite",
                       executor=executor, **SWEEP)
    assert json.dumps(on_ray.to_dict()) == json.dumps(serial.to_dict())
    assert on_ray.sim_calls > 0
    assert sorted(ResultStore(tmp_path / "r.sqlite")) == sorted(ResultStore(tmp_path / "s.sqlite"))
    again = api.sweep("llama3.1-8b", "h100-sxm", "8K,32K", store=tmp_path / "r.sqlite",
                      backend="ray", **SWEEP)
    assert again.sim_calls == 0 and again.cache_hits == serial.sim_calls


def test_ray_through_the_cli_and_a_user_error_from_a_task(
    local_ray: None, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["sweep", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--contexts", "8K,32K",
            "--max-chips", "8", "--json", "--no-store"]
    main([*argv, "--backend", "serial"])
    serial = capsys.readouterr().out
    main([*argv, "--backend", "ray"])
    assert capsys.readouterr().out == serial
    with pytest.raises(UserInputError) as info:   # the cause, not a RayTaskError traceback
        api.sweep("llama3.1-8b", "h100-sxm", "8K,32K", event_limit=10, backend="ray", **SWEEP)
    assert info.value.field == "event_limit"
