"""A simulation that cannot finish reaches the user as one `error:` line naming the cause:
the event limit (with how to raise it), a dependency cycle or a task that can never start
(naming the task)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ctxplan.evaluate.simulate as evaluate_module
from ctxplan import api
from ctxplan.errors import CtxplanError, UserInputError
from ctxplan.mapping.builder import GraphBuilder
from ctxplan.policy import DEFAULT_EVENT_LIMIT
from tests.helpers.cli import check_contract, run_cli
from tests.helpers.inputs import point_data, study_data, write_yaml


def _one_line_error(argv: list[str]) -> str:
    r = run_cli(argv)
    check_contract(r)
    assert r.code == 2, r.out
    return r.err.strip()


def test_event_limit_flag_stops_eval(tmp_path: Path) -> None:
    point = write_yaml(tmp_path / "p.yaml", point_data())
    ok = run_cli(["eval", "--config", str(point), "--json"])
    events = json.loads(ok.out)["events"]
    assert events > 10
    line = _one_line_error(["eval", "--config", str(point), "--event-limit", "10"])
    assert line.startswith("error: event_limit = 10: simulation of decode cp 2")
    assert "stopped after 10 events" in line and "--event-limit" in line
    # a limit at or above what the simulation needs changes nothing
    again = run_cli(["eval", "--config", str(point), "--json", "--event-limit", str(events)])
    assert again.code == 0 and json.loads(again.out)["tpot_s"] == json.loads(ok.out)["tpot_s"]


def test_event_limit_in_files_and_flags(tmp_path: Path) -> None:
    study = write_yaml(tmp_path / "s.yaml", {**study_data(), "event_limit": 5})
    line = _one_line_error(["solve", "--config", str(study)])
    assert "event_limit = 5" in line
    # the flag overrides the file
    assert run_cli(["solve", "--config", str(study), "--event-limit", "1000000"]).code == 0
    line = _one_line_error(["solve", "--model", "llama3.1-8b", "--chip", "h100-sxm",
                            "--context", "1K", "--max-chips", "4", "--event-limit", "3"])
    assert "event_limit = 3" in line
    line = _one_line_error(["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm",
                            "--context", "1K", "--phase", "prefill", "--cp", "2",
                            "--event-limit", "-1"])
    assert line.startswith("error: event_limit = -1")


def test_api_event_limit() -> None:
    cfg = api.eval_config("llama3.1-8b", "h100-sxm", "1K", "decode", 1)
    assert cfg.policy.event_limit == DEFAULT_EVENT_LIMIT
    assert api.eval_config("llama3.1-8b", "h100-sxm", "1K", "decode", 1,
                           event_limit=7).policy.event_limit == 7
    with pytest.raises(UserInputError, match="event_limit"):
        api.evaluate("llama3.1-8b", "h100-sxm", "1K", "decode", 2, event_limit=2)
    with pytest.raises(UserInputError, match="event_limit"):
        api.solve_request("llama3.1-8b", "h100-sxm", "1K", event_limit=0)


def _broken_build(kind: str):  # type: ignore[no-untyped-def]
    real = evaluate_module.build_graph

    def build(cfg, lay=None, n_layers=None, **layouts):  # type: ignore[no-untyped-def]
        b: GraphBuilder = real(cfg, lay, n_layers, **layouts)
        g = b.graph
        last = g.n_tasks - 1
        if kind == "cycle":
            g.add_dep(0, last)          # the first task now waits for the last: a cycle
        else:
            g.add_dep(last, g.n_tasks + 5)   # waits for a task that does not exist
        return b

    return build


@pytest.mark.parametrize(("kind", "words"), [("cycle", "dependency cycle through task"),
                                             ("orphan", "can never start")])
def test_a_broken_graph_is_reported_naming_the_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, words: str
) -> None:
    monkeypatch.setattr(evaluate_module, "build_graph", _broken_build(kind))
    point = write_yaml(tmp_path / "p.yaml", point_data())
    line = _one_line_error(["eval", "--config", str(point)])
    assert words in line and "'" in line and "bug in ctxplan" in line
    with pytest.raises(CtxplanError, match=words):
        api.evaluate_point(point)
