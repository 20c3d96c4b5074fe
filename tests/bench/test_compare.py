"""bench/compare.py's pure parts: its arguments, the CPU model, the summaries and the table
(issue 24, item 6). The benchmark itself is run by hand (docs/benchmarks.md, "Comparing two
commits"): it takes minutes and its figures are the machine's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "compare.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_compare", _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


compare = _load()


def test_defaults_every_case_best_of_three() -> None:
    opts = compare.parse_args(["7edcc5b"])
    assert opts.rev == "7edcc5b"
    assert [c.key for c in opts.cases] == [c.key for c in compare.CASES]
    assert opts.repeat == 3 and opts.rev_dir is None and not opts.json


def test_cases_chosen_in_the_order_given_once_each() -> None:
    opts = compare.parse_args(["main", "--cases", "solve-1m,help,solve-1m", "--repeat", "5",
                               "--rev-dir", "/tmp/x"])
    assert [c.key for c in opts.cases] == ["solve-1m", "help"]
    assert opts.repeat == 5 and opts.rev_dir == Path("/tmp/x")


@pytest.mark.parametrize("argv", [["r", "--cases", "nope"], ["r", "--cases", ","],
                                  ["r", "--repeat", "0"], ["r", "--repeat", "two"], []])
def test_bad_arguments_exit_2_naming_the_problem(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        compare.parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err
    if "--cases" in argv:
        assert "help" in err and "solve-1m" in err   # the keys one may use


def test_every_case_runs_the_cli_with_json_and_no_store_except_help() -> None:
    for case in compare.CASES:
        if case.key == "help":
            assert case.args == ("--help",)
        else:
            assert "--json" in case.args and "--no-store" in case.args and case.answer


def test_cpu_model_from_cpuinfo() -> None:
    x86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n"
    assert compare.cpu_model(x86) == "AMD EPYC 7B13"
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n"
    assert compare.cpu_model(arm) == "0xd0c"   # 'processor : 0' is a number, not a model
    assert compare.cpu_model("") == "unknown"


def test_summaries_and_ratio() -> None:
    runs = compare.Runs(seconds=[2.0, 1.0, 4.0], rss_mb=[100.0, 300.0, 200.0],
                        answers=["15", "15", "15"])
    assert runs.best() == 1.0 and runs.median() == 2.0 and runs.peak_mb() == 300.0
    assert runs.answer() == "15"
    assert compare.Runs(answers=["15", "16", "15"]).answer() == "15 | 16"
    empty = compare.Runs()
    assert empty.best() is None and empty.median() is None and empty.answer() == "-"
    assert compare.ratio(4.0, 2.0) == 2.0        # REV twice as slow: this is 2x faster
    assert compare.ratio(None, 2.0) is None and compare.ratio(1.0, None) is None


def test_answer_of_reads_the_case_field() -> None:
    solve = next(c for c in compare.CASES if c.key == "solve-1m")
    assert compare.answer_of(solve, '{"total_chips": 15, "feasible": true}') == "15"
    ev = next(c for c in compare.CASES if c.key == "eval-1m-128")
    assert compare.answer_of(ev, '{"ttft_s": 68.11123456}') == "68.1112"
    assert compare.answer_of(ev, "not json") == ""
    cap = next(c for c in compare.CASES if c.key == "capacity")
    assert compare.answer_of(cap, '{"points": [{"total_chips": 18}, {"total_chips": null}]}') \
        == "18,None"
    assert compare.answer_of(next(c for c in compare.CASES if c.key == "help"), "x") == ""


def test_ratio_table_gives_both_absolute_times_beside_the_ratios() -> None:
    help_, solve = (next(c for c in compare.CASES if c.key == k) for k in ("help", "solve-1m"))
    rows = [
        (help_, compare.Runs([0.2, 0.25], [30.0, 31.0], ["", ""]),
         compare.Runs([0.5, 0.6], [40.0, 40.0], ["", ""])),
        (solve, compare.Runs([1.0, 3.0, 2.0], [170.0] * 3, ["15"] * 3),
         compare.Runs([8.0], [180.0], ["16"])),
    ]
    text = compare.ratio_table(rows, "this", "REV")
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["case", "this", "best"]
    assert set(lines[1]) == {"-"}
    help_row = next(line for line in lines if line.startswith("ctxplan --help"))
    assert help_row.split()[2:] == ["0.200", "0.225", "31", "0.500", "0.550", "40", "2.50x",
                                    "2.44x", "-"]
    solve_row = next(line for line in lines if line.startswith("solve 1M"))
    assert "1.000" in solve_row and "8.000" in solve_row and "8.00x" in solve_row
    assert "4.00x" in solve_row                           # medians 2.0 and 8.0
    assert solve_row.endswith("15 / 16")                  # different answers, both shown
    assert "above 1: this checkout is faster" in text


def test_ratio_table_says_which_side_failed() -> None:
    case = compare.CASES[1]
    text = compare.ratio_table([(case, compare.Runs([1.0], [1.0], ["1"]),
                                 compare.Runs(error="exit 2: error: no such option"))],
                               "this", "REV")
    row = next(line for line in text.splitlines() if line.startswith(case.title))
    assert "x" not in row.removeprefix(case.title)       # no ratio without REV's times
    assert f"{case.title}: REV failed: exit 2: error: no such option" in text


def test_an_unknown_rev_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        compare.main(["no-such-rev-anywhere"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: REV = 'no-such-rev-anywhere'")
    assert "Fix:" in err[0]
