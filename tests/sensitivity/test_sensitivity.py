"""Sensitivity: moving one figure or SLA at a time; signs where physics fixes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxplan import api
from ctxplan.config.units import parse_steps
from ctxplan.errors import UserInputError
from ctxplan.sensitivity import SensitivityStudy
from ctxplan.solve import EvalCache
from tests.helpers.cli import run_cli

FIGURES = "chip.memory_bandwidth,chip.memory_capacity,chip.peak.bf16,sla.tpot_max"


@pytest.fixture(scope="module", params=[("deepseek-v3", "sg2262", "128K"),
                                        ("llama3.1-8b", "h100-sxm", "128K")])
def study(request: pytest.FixtureRequest) -> SensitivityStudy:
    model, chip, context = request.param
    return api.sensitivity(model, chip, context, figures=FIGURES)


def _row(s: SensitivityStudy, figure: str):  # type: ignore[no-untyped-def]
    return next(r for r in s.rows if r.figure == figure)


def test_more_memory_bandwidth_never_raises_tpot_or_chips(study: SensitivityStudy) -> None:
    base = study.base
    for m in _row(study, "chip.memory_bandwidth").moves:
        assert m.outcome is not None and m.outcome.total_chips is not None
        if m.factor > 1:
            assert m.base_plan_tpot_s is not None and base.tpot_s is not None
            assert m.base_plan_tpot_s <= base.tpot_s
            assert m.outcome.total_chips <= (base.total_chips or 0)
        else:
            assert m.base_plan_tpot_s is not None and m.base_plan_tpot_s >= (base.tpot_s or 0)
            assert m.outcome.total_chips >= (base.total_chips or 0)
    # A strictly memory-bound decode moves with the bandwidth, and in order of the steps.
    tpots = [m.base_plan_tpot_s for m in _row(study, "chip.memory_bandwidth").moves]
    assert tpots == sorted(tpots, reverse=True) and tpots[0] > tpots[-1]   # type: ignore[type-var]


def test_more_memory_never_raises_chips_nor_a_latency(
        study: SensitivityStudy) -> None:
    base = study.base
    moves = _row(study, "chip.memory_capacity").moves
    chips = [m.outcome.total_chips for m in moves if m.outcome is not None]
    assert chips == sorted(chips, reverse=True)   # type: ignore[type-var]
    for m in moves:
        assert m.outcome is not None
        if m.factor > 1:
            assert (m.outcome.total_chips or 0) <= (base.total_chips or 0)
        if m.base_plan_tpot_s is not None:   # the base plan still fits: same TPOT; its
            # prefill may enter in fewer chunks with more memory (prefill_chunk auto, issue
            # 22), which only makes it faster, and in more with less
            assert m.base_plan_tpot_s == base.tpot_s
            assert m.base_plan_ttft_s is not None and base.ttft_s is not None
            if m.factor > 1:
                assert m.base_plan_ttft_s <= base.ttft_s
            else:
                assert m.base_plan_ttft_s >= base.ttft_s


def test_a_looser_tpot_target_never_needs_more_chips(study: SensitivityStudy) -> None:
    moves = _row(study, "sla.tpot_max").moves
    chips = [m.outcome.total_chips for m in moves if m.outcome is not None]
    assert chips == sorted(chips, reverse=True)   # type: ignore[type-var]
    for m in moves:   # an SLA moves no latency of a plan
        assert (m.base_plan_ttft_s, m.base_plan_tpot_s) == (study.base.ttft_s,
                                                           study.base.tpot_s)


def test_more_peak_compute_never_slows_prefill(study: SensitivityStudy) -> None:
    base = study.base.ttft_s
    assert base is not None
    for m in _row(study, "chip.peak.bf16").moves:
        assert m.base_plan_ttft_s is not None
        if m.factor > 1:
            assert m.base_plan_ttft_s <= base
        else:
            assert m.base_plan_ttft_s >= base


def test_operation_costs_move_the_decode_step() -> None:
    """The fixed cost of a communication operation (issue 12 stage 2) is on a decode step's
    critical path (the pass-Q broadcast, the All2All of partial outputs, the MoE all-to-all):
    moving the board level's collective cost moves the base plan's TPOT, in the order of the
    steps, and the point-to-point figure (which the collectives default to on sg2262) too."""
    s = api.sensitivity("deepseek-v3", "sg2262", "128K",
                        figures="cluster.board.op_overhead,cluster.board.collective_overhead")
    assert s.base.decode_cp is not None and s.base.decode_cp * (s.base.decode_tp or 1) > 1
    for row in s.rows:
        tpots = [m.base_plan_tpot_s for m in row.moves]
        assert None not in tpots and tpots == sorted(tpots), row.figure  # type: ignore[type-var]
        assert tpots[0] < (s.base.tpot_s or 0) < tpots[-1], row.figure  # type: ignore[operator]
    from ctxplan.report.sensitivity import format_figure

    assert {format_figure(r.figure, r.value) for r in s.rows} == {"5.00 us"}


def test_rows_are_sorted_by_effect_and_the_json_says_so(study: SensitivityStudy) -> None:
    effects = [r.effect(study.base) for r in study.rows]
    assert effects == sorted(effects, reverse=True)
    d = study.to_dict()
    assert d["steps"] == [-0.25, -0.1, 0.1, 0.25]
    assert [f["figure"] for f in d["figures"]] == [r.figure for r in study.rows]
    move = d["figures"][0]["moves"][0]
    assert set(move) == {"step", "factor", "value", "solve", "base_plan", "reason"}
    assert set(move["solve"]) >= {"feasible", "total_chips", "kv_tier", "prefill", "decode"}


def test_the_result_store_makes_a_repeat_free(tmp_path: Path) -> None:
    cache = EvalCache()
    first = api.sensitivity("llama3.1-8b", "h100-sxm", "8K", cache=cache,
                            figures="chip.memory_bandwidth,cluster.host.bandwidth")
    assert first.sim_calls > 0
    again = api.sensitivity("llama3.1-8b", "h100-sxm", "8K", cache=cache,
                            figures="chip.memory_bandwidth,cluster.host.bandwidth")
    assert again.sim_calls == 0 and again.cache_hits > 0
    assert again.to_dict()["figures"] == first.to_dict()["figures"]


def test_default_figures_cover_the_issue_list() -> None:
    from ctxplan.config.hardware_presets import load_chip, load_cluster
    from ctxplan.sensitivity import default_figures

    names = default_figures(load_chip("sg2262"), load_cluster("sg2262-c2c"), has_ttft=True)
    assert {"chip.memory_bandwidth", "chip.memory_capacity", "chip.peak.bf16",
            "chip.peak.fp8", "chip.peak.int8", "sla.tpot_max", "sla.ttft_max"} <= set(names)
    for level in ("board", "cluster", "pod"):
        assert {f"cluster.{level}.bandwidth", f"cluster.{level}.op_overhead",
                f"cluster.{level}.collective_overhead"} <= set(names)


def test_steps_parse_and_refuse_nonsense() -> None:
    assert parse_steps("-25%,-10%,+10%,+25%") == (0.75, 0.9, 1.1, 1.25)
    assert parse_steps([0.1, "-5%"]) == (0.95, 1.1)
    for bad in ("10", "0%", "-100%", "x%", ""):
        with pytest.raises(UserInputError):
            parse_steps(bad)


def test_unknown_figure_and_ttft_without_a_target_are_input_errors() -> None:
    with pytest.raises(UserInputError, match="no such figure"):
        api.sensitivity("llama3.1-8b", "h100-sxm", "8K", figures="chip.hbm")
    with pytest.raises(UserInputError, match="--ttft-max"):
        api.sensitivity("llama3.1-8b", "h100-sxm", "8K", figures="sla.ttft_max")


def test_cli_table_json_plot_and_solve_flag(tmp_path: Path) -> None:
    plot = tmp_path / "tornado.png"
    args = ["--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "8K", "--figures",
            "chip.memory_bandwidth,chip.peak.bf16", "--steps=-10%,+10%", "--no-store"]
    code, out, err = run_cli(["sensitivity", *args, "--plot", str(plot)])
    assert code == 0, err
    assert "chip.memory_bandwidth" in out and plot.stat().st_size > 0
    code, out, err = run_cli(["solve", *args, "--sensitivity", "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["total_chips"] == d["sensitivity"]["base"]["total_chips"]
    assert len(d["sensitivity"]["figures"]) == 2
    code, _, err = run_cli(["sensitivity", *args[:6], "--steps", "10", "--no-store"])
    assert code == 2 and "steps" in err and len(err.strip().splitlines()) == 1


def test_a_study_file_with_a_sensitivity_section(tmp_path: Path) -> None:
    from tests.helpers.inputs import study_data, write_yaml

    data = study_data() | {"contexts": ["3000"], "sensitivity": {
        "steps": ["-10%", "+10%"], "figures": ["chip.memory_bandwidth"]}}
    path = write_yaml(tmp_path / "s.yaml", data)
    result = api.sensitivity_study(path)
    assert result.factors == (0.9, 1.1) and [r.figure for r in result.rows] == [
        "chip.memory_bandwidth"]
    bad = write_yaml(tmp_path / "bad.yaml", data | {"sensitivity": {"steps": "10"}})
    code, _, err = run_cli(["sensitivity", "--config", str(bad), "--no-store"])
    assert code == 2 and "sensitivity" in err, err
