"""`ctxplan validate`: the cases as data, the calibration targets, the report and the CLI.

The calibration rows (Meta arXiv:2411.01783, in validation/*.yaml with their sources) must each be
within 10% (prefill TTFT) or 15% (decode TTIT) with the presets as shipped: that is the "done
when" of issue 5, checked here by simulation, not by stored numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ctxplan import api
from ctxplan.errors import UserInputError
from ctxplan.validate import (
    Case,
    ValidationReport,
    case_config,
    default_cases_dir,
    load_case,
    load_cases,
    run_case,
    run_validation,
)
from tests.helpers.cli import run_cli

# The rows of calibration.md: (phase, hosts, context, measured seconds); Table 8's totals are
# the attention part of one decode layer.
CALIBRATION_ROWS = {
    ("prefill", 1, 8192, 1.740), ("prefill", 1, 32768, 7.658), ("prefill", 1, 131072, 42.010),
    ("prefill", 2, 8192, 0.999), ("prefill", 2, 32768, 4.015), ("prefill", 2, 131072, 21.042),
    ("decode", 1, 8192, 0.04451), ("decode", 1, 32768, 0.04464), ("decode", 1, 131072, 0.04626),
    ("decode", 1, 131072, 38.9e-6), ("decode", 2, 131072, 157.7e-6),
}
# Targets of the issues: TTFT 10%, TTIT 15%, Table 8's total 10%, its SendRecv and All2All 20%.
TARGET = {"prefill": 0.10, "decode": 0.15, "attention_per_layer": 0.10}
PART_TARGET = {"sendrecv": 0.20, "all2all": 0.20}
TABLE8_PARTS = {"attention_op": 22.0e-6, "ring_loop": 43.2e-6, "sendrecv": 32.3e-6,
                "all2all": 81.1e-6}


def _target(c: Case) -> float:
    return TARGET[c.phase if c.quantity == "latency" else c.quantity]

GOOD_CASE = {
    "source": "arXiv:2411.01783 Table 6 (test copy)",
    "role": "prediction",
    "model": "llama3.1-405b",
    "chip": "h100-gt500",
    "cluster": "grand-teton-rdma",
    "phase": "decode",
    "context": "8K",
    "layout": {"cp": 1, "tp": 8},
    "batch": 1,
    "precision": {"attention_weights": "bf16", "ffn_weights": "fp8", "attention": "bf16"},
    "measured_s": 0.04451,
    "tolerance": 0.15,
}


def _write(tmp: Path, name: str, data: dict[str, object]) -> Path:
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data))
    return p




@pytest.fixture(scope="module")
def report() -> ValidationReport:
    return run_validation(load_cases())


# ----------------------------------------------------------------------------- cases as data


def test_the_shipped_cases_are_the_calibration_rows_with_their_sources() -> None:
    cases = [c for c in load_cases() if c.role == "calibration"]
    got = {(c.phase, c.cp, c.context_length, c.measured_s) for c in cases}
    assert got == CALIBRATION_ROWS
    for c in cases:
        assert "arXiv:2411.01783" in c.source
        assert (c.model, c.chip, c.cluster, c.tp, c.batch) == (
            "llama3.1-405b", "h100-gt500", "grand-teton-rdma", 8, 1)
        assert (c.precision.attention_weights, c.precision.ffn_weights,
                c.precision.attention) == ("bf16", "fp8", "bf16")
        # The targets of the issue live in the files; they must not be loosened there.
        assert c.tolerance <= _target(c)
        if c.phase == "prefill":
            assert "Table 6" in c.source
        if c.phase == "decode":
            assert c.pass_q == "ring"     # Meta's algorithm, as the rows were measured
        if c.quantity == "attention_per_layer":
            assert "Table 8" in c.source
            if c.cp > 1:
                assert {name: measured for name, measured, _ in c.parts} == TABLE8_PARTS
                for name, _, tol in c.parts:
                    assert tol == PART_TARGET.get(name)   # reported parts have no target


def test_default_directory_is_the_source_trees_validation() -> None:
    d = default_cases_dir()
    assert d.name == "validation"
    assert (d / "fit.py").is_file()


@pytest.mark.parametrize(("edit", "field"), [
    ({"unknown_key": 1}, "unknown_key"),
    ({"phase": "training"}, "phase"),
    ({"layout": {"cp": 1, "tp": 8, "pp": 2}}, "layout.pp"),
    ({"layout": {"cp": 0, "tp": 8}}, "layout.cp"),
    ({"measured_s": -1.0}, "measured_s"),
    ({"measured_s": float("nan")}, "measured_s"),
    ({"tolerance": 1.5}, "tolerance"),
    ({"context": "eight"}, "context"),
    ({"precision": {"attention_weights": "bf16", "ffn_weights": "fp7", "attention": "bf16"}},
     "precision.ffn_weights"),
    ({"role": "tuned"}, "role"),
    ({"pass_q": "star"}, "pass_q"),
    ({"quantity": "energy"}, "quantity"),
    ({"quantity": "attention_per_layer", "breakdown": {"merge": {"measured_s": 1e-6}}},
     "breakdown.merge"),
    ({"quantity": "attention_per_layer",
      "breakdown": {"sendrecv": {"measured_s": 1e-6, "tolerance": 0}}},
     "breakdown.sendrecv.tolerance"),
    ({"breakdown": {"sendrecv": {"measured_s": 1e-6}}}, "attention_per_layer"),
    ({"phase": "prefill", "pass_q": "ring"}, "pass_q"),
])
def test_a_bad_case_file_is_one_error_naming_the_field(
        tmp_path: Path, edit: dict[str, object], field: str) -> None:
    path = _write(tmp_path, "bad", {**GOOD_CASE, **edit})
    with pytest.raises(UserInputError) as info:
        load_case(path)
    assert field in str(info.value)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("missing", ["source", "measured_s", "layout", "precision", "role"])
def test_a_case_without_a_required_field_is_rejected(tmp_path: Path, missing: str) -> None:
    data = {k: v for k, v in GOOD_CASE.items() if k != missing}
    with pytest.raises(UserInputError, match=missing):
        load_case(_write(tmp_path, "bad", data))


def test_case_names_must_be_unique_and_selectable(tmp_path: Path) -> None:
    _write(tmp_path, "a", {**GOOD_CASE, "name": "same"})
    _write(tmp_path, "b", {**GOOD_CASE, "name": "same"})
    with pytest.raises(UserInputError, match="unique"):
        load_cases(tmp_path)
    (tmp_path / "b.yaml").unlink()
    _write(tmp_path, "c", GOOD_CASE)
    assert [c.name for c in load_cases(tmp_path, ["c"])] == ["c"]
    with pytest.raises(UserInputError, match="unknown case"):
        load_cases(tmp_path, ["nope"])


def test_an_empty_directory_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="no cases"):
        load_cases(tmp_path)


# ------------------------------------------------------------------------ calibration targets


def test_every_calibration_row_is_within_its_target(report: ValidationReport) -> None:
    rows = [r for r in report.results if r.case.role == "calibration"]
    assert len(rows) == len(CALIBRATION_ROWS)
    misses = [(r.case.name, r.error) for r in rows
              if r.error is None or abs(r.error) > _target(r.case)]
    misses += [(r.case.name, p.name, p.error) for r in rows for p in r.parts
               if p.name in PART_TARGET and (p.error is None
                                             or abs(p.error) > PART_TARGET[p.name])]
    assert not misses, misses
    assert all(r.within for r in rows)


def test_one_chip_preset_serves_every_case() -> None:
    # No per-case fudge: every case resolves to the very same chip and cluster objects.
    chips = {case_config(c).chip for c in load_cases()}
    assert len(chips) == 1


# ---------------------------------------------------------------------------------- the report


def test_errors_are_signed_relative_and_summarised(tmp_path: Path) -> None:
    base = load_case(_write(tmp_path, "probe", GOOD_CASE))
    sim = run_case(base).simulated_s
    assert sim is not None and sim > 0
    # Measured 25% above and 10% below the simulation: errors -0.2 and +1/9.
    _write(tmp_path, "probe", {**GOOD_CASE, "name": "slow", "measured_s": sim * 1.25})
    _write(tmp_path, "fast", {**GOOD_CASE, "name": "fast", "measured_s": sim * 0.9})
    rep = run_validation(load_cases(tmp_path))
    by = {r.case.name: r for r in rep.results}
    assert by["slow"].error == pytest.approx(-0.2)
    assert by["fast"].error == pytest.approx(1 / 9)
    assert not by["slow"].within and by["fast"].within
    s = rep.summary()
    assert s["worst_case"] == "slow"
    assert s["worst_abs_error"] == pytest.approx(0.2)
    assert s["median_abs_error"] == pytest.approx((0.2 + 1 / 9) / 2)
    assert s["within_tolerance"] == 1
    assert not rep.all_within


def test_a_breakdown_case_holds_its_parts_to_their_targets(tmp_path: Path) -> None:
    """Table 8's case: the total is the critical path of one decode layer's attention part; a
    part with a target that misses it makes the case miss, a part without one is reported."""
    shipped = yaml.safe_load((default_cases_dir() / "meta-cp-405b-attn-cp2xtp8-128k.yaml")
                             .read_text())
    (r,) = run_validation(load_cases(_write(tmp_path, "t8", shipped).parent)).results
    got = {p.name: p for p in r.parts}
    assert list(got) == ["attention_op", "ring_loop", "sendrecv", "all2all"]
    assert r.within and got["ring_loop"].tolerance is None and got["ring_loop"].within
    # The parts are sums of op kinds of the same critical path as the total.
    assert got["ring_loop"].simulated_s == pytest.approx(
        (got["attention_op"].simulated_s or 0) + (got["sendrecv"].simulated_s or 0))
    assert (got["ring_loop"].simulated_s or 0) + (got["all2all"].simulated_s or 0) \
        < (r.simulated_s or 0)
    off = {**shipped, "breakdown": {**shipped["breakdown"],
                                    "all2all": {"measured_s": 40e-6, "tolerance": 0.2}}}
    _write(tmp_path, "t8", off)
    code, out, _ = run_cli(["validate", "--cases", str(tmp_path), "--json", "--check"])
    assert code == 1
    (case,) = json.loads(out)["cases"]
    assert abs(case["error"]) <= case["tolerance"] and not case["within_tolerance"]
    parts = {p["part"]: p for p in case["breakdown"]}
    assert not parts["all2all"]["within_tolerance"] and parts["sendrecv"]["within_tolerance"]
    code, out, _ = run_cli(["validate", "--cases", str(tmp_path)])
    assert code == 0 and "ATTN/layer" in out and "all2all" in out and "reported" in out


def test_a_case_that_does_not_fit_is_reported_not_simulated(tmp_path: Path) -> None:
    # 405B weights on one 96 GB GPU cannot fit.
    _write(tmp_path, "nofit", {**GOOD_CASE, "layout": {"cp": 1, "tp": 1}})
    rep = run_validation(load_cases(tmp_path))
    (r,) = rep.results
    assert r.simulated_s is None and r.error is None and not r.within
    assert "does not fit" in r.reason
    assert rep.median_abs_error is None


def test_api_validate_runs_a_directory(tmp_path: Path) -> None:
    _write(tmp_path, "one", GOOD_CASE)
    rep = api.validate(tmp_path)
    assert [r.case.name for r in rep.results] == ["one"]
    assert rep.results[0].simulated_s is not None


# ------------------------------------------------------------------------------------- the CLI


def test_cli_json_has_measured_simulated_and_error() -> None:
    code, out, _ = run_cli(["validate", "--json"])
    assert code == 0
    data = json.loads(out)
    assert len(data["cases"]) == len(load_cases())
    for c in data["cases"]:
        assert {"name", "source", "measured", "simulated", "error"} <= set(c)
        assert c["error"] == pytest.approx((c["simulated"] - c["measured"]) / c["measured"])
    errs = sorted(abs(c["error"]) for c in data["cases"])
    assert data["summary"]["worst_abs_error"] == pytest.approx(errs[-1])
    n = len(errs)
    median = errs[n // 2] if n % 2 else (errs[n // 2 - 1] + errs[n // 2]) / 2
    assert data["summary"]["median_abs_error"] == pytest.approx(median)


def test_cli_table_lists_every_case_and_the_summary() -> None:
    code, out, _ = run_cli(["validate"])
    assert code == 0
    for c in load_cases():
        assert c.name in out
    assert "median |error|" in out and "worst |error|" in out
    assert "arXiv:2411.01783" in out


def test_cli_check_fails_when_a_case_is_off(tmp_path: Path) -> None:
    _write(tmp_path, "off", {**GOOD_CASE, "measured_s": 1.0})   # 1 s per token: far off
    code, out, _ = run_cli(["validate", "--cases", str(tmp_path), "--check"])
    assert code == 1
    assert "off" in out and " !" in out
    code, _, _ = run_cli(["validate", "--cases", str(tmp_path)])
    assert code == 0


def test_cli_bad_case_file_exits_2_with_one_line(tmp_path: Path) -> None:
    _write(tmp_path, "bad", {**GOOD_CASE, "extra": 1})
    code, _, err = run_cli(["validate", "--cases", str(tmp_path)])
    assert code == 2
    assert err.count("\n") == 1 and "extra" in err


# ------------------------------------------------------------------ roles and sensitivity


def test_calibration_and_prediction_rows_are_reported_apart(
        tmp_path: Path) -> None:
    _write(tmp_path, "fitted", {**GOOD_CASE, "role": "calibration"})
    _write(tmp_path, "unseen", {**GOOD_CASE, "role": "prediction", "measured_s": 0.03})
    rep = run_validation(load_cases(tmp_path))
    assert [r.case.name for r in rep.of_role("calibration")] == ["fitted"]
    assert [r.case.name for r in rep.of_role("prediction")] == ["unseen"]
    by_role = rep.summary()["by_role"]
    assert by_role["calibration"]["cases"] == by_role["prediction"]["cases"] == 1
    assert by_role["prediction"]["worst_case"] == "unseen"
    assert by_role["prediction"]["worst_abs_error"] == pytest.approx(
        abs(rep.of_role("prediction")[0].error or 0))
    code, out, _ = run_cli(["validate", "--cases", str(tmp_path)])
    assert code == 0
    calibration_at, prediction_at = out.index("calibration rows"), out.index("prediction rows")
    assert calibration_at < out.index("fitted") < prediction_at < out.index("unseen")
    code, out, _ = run_cli(["validate", "--cases", str(tmp_path), "--json"])
    data = json.loads(out)
    assert set(data["summary"]["by_role"]) == {"calibration", "prediction"}
    assert {c["name"]: c["role"] for c in data["cases"]} == {"fitted": "calibration",
                                                             "unseen": "prediction"}


def test_a_directory_without_prediction_rows_says_so(
        tmp_path: Path) -> None:
    _write(tmp_path, "fitted", {**GOOD_CASE, "role": "calibration"})
    code, out, _ = run_cli(["validate", "--cases", str(tmp_path)])
    assert code == 0 and "prediction rows" in out and "none" in out


def test_sensitivity_moves_only_the_rows_a_figure_touches(tmp_path: Path) -> None:
    from ctxplan.validate import sensitivity

    (case,) = [load_case(_write(tmp_path, "probe", GOOD_CASE))]   # TP8 decode on one host
    moves = {m.figure: m for m in sensitivity(
        [case], ["chip.memory_bandwidth", "cluster.scale-out.latency", "chip.op_overhead"], 1.1)}
    assert moves["chip.memory_bandwidth"].change is not None
    assert moves["chip.memory_bandwidth"].change < -0.02      # decode streams HBM
    assert moves["cluster.scale-out.latency"].change == 0.0   # one host never crosses it
    assert (moves["chip.op_overhead"].change or 0) > 0
    base = run_case(case).simulated_s
    assert all(m.base_s == base and m.factor == 1.1 for m in moves.values())
    with pytest.raises(UserInputError, match="figure"):
        sensitivity([case], ["chip.warp_drive"])
    with pytest.raises(UserInputError, match="factor"):
        sensitivity([case], factor=1.0)


def test_cli_sensitivity_json_lists_every_figure_of_the_case(
) -> None:
    name = "meta-cp-405b-ttit-cp1xtp8-8k"
    code, out, _ = run_cli(["validate", "--case", name, "--sensitivity", "--json"])
    assert code == 0
    data = json.loads(out)
    (case,) = load_cases(names=[name])
    from ctxplan.validate import case_figures

    assert [m["figure"] for m in data["sensitivity"]] == list(case_figures(case))
    assert all(m["case"] == name and m["factor"] == 1.1 for m in data["sensitivity"])
    code, out, _ = run_cli(["validate", "--case", name, "--sensitivity", "--figure",
                            "chip.memory_bandwidth", "--factor", "0.9"])
    assert code == 0 and "chip.memory_bandwidth" in out and "x 0.9" in out
