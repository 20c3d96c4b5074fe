"""Context sweeps: the N*(S) curve, the executor seam, CSV / JSON output and the plot."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxplan import api
from ctxplan.config.units import format_tokens
from ctxplan.errors import UserInputError
from ctxplan.solve import EvalCache
from ctxplan.sweep import SerialExecutor, SweepResult
from tests.helpers.cli import run_cli

CONTEXTS = [2**13, 2**17, 2**20]   # 8K, 128K, 1M


@pytest.fixture(scope="module")
def curve() -> SweepResult:
    return api.sweep("deepseek-v3", "sg2262", "8K,128K,1M")


def test_curve_is_non_decreasing_and_every_point_meets_its_sla(curve: SweepResult) -> None:
    assert [p.context_length for p in curve.points] == CONTEXTS
    totals = []
    for p in curve.points:
        assert p.feasible and p.best is not None, p.infeasible_reason
        d = p.best.decode
        assert d.latency_s is not None and d.latency_s <= p.sla.tpot_limit_s(p.batch)
        assert p.best.prefill.latency_s is not None
        totals.append(p.total_chips)
    print("\nN*(S) deepseek-v3 / sg2262: "
          + ", ".join(f"{format_tokens(s)}: {n}" for s, n in zip(CONTEXTS, totals, strict=True)))
    assert totals == sorted(totals)
    assert curve.sim_calls == sum(p.sim_calls for p in curve.points) <= 40 * len(CONTEXTS)


def test_sweep_uses_the_executor_it_is_given_and_keeps_the_order() -> None:
    class Recording:
        def __init__(self) -> None:
            self.items: list[Any] = []

        def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
            self.items = list(items)
            return iter([fn(x) for x in self.items])

    ex = Recording()
    seen: list[int] = []
    r = api.sweep("llama3.1-8b", "h100-sxm", ["32K", 8192, "32K"], executor=ex, max_chips=8,
                  on_point=lambda p: seen.append(p.context_length))
    assert [p.context_length for p in r.points] == [2**15, 2**13, 2**15]
    assert [q.context_length for q in ex.items] == [2**15, 2**13]   # duplicates solved once
    assert seen == [2**15, 2**13]
    assert list(SerialExecutor().map(lambda x: x * 2, [3, 1, 2])) == [6, 2, 4]


def test_a_shared_cache_spans_sweeps() -> None:
    cache = EvalCache()
    first = api.sweep("llama3.1-8b", "h100-sxm", "8K,32K", cache=cache, max_chips=8)
    again = api.sweep("llama3.1-8b", "h100-sxm", "8K,32K", cache=cache, max_chips=8)
    assert first.sim_calls > 0 and again.sim_calls == 0
    assert again.cache_hits == first.sim_calls


def test_csv_json_and_plot_outputs(curve: SweepResult, tmp_path: Path) -> None:
    from ctxplan.report.plot import plot_sweep
    from ctxplan.sweep.output import write_sweep

    rows = list(csv.DictReader(write_sweep(curve, tmp_path / "c.csv").open()))
    assert [int(r["context_length"]) for r in rows] == CONTEXTS
    for row, p in zip(rows, curve.points, strict=True):
        assert int(row["total_chips"]) == p.total_chips
        assert int(row["prefill_chips"]) + int(row["decode_chips"]) == p.total_chips
    d = json.loads(write_sweep(curve, tmp_path / "c.json").read_text())
    assert d["contexts"] == CONTEXTS and len(d["points"]) == 3
    assert d["points"][2]["total_chips"] == curve.points[2].total_chips
    png = plot_sweep(curve, tmp_path / "c.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_the_sweep_carries_the_batch_when_searched(tmp_path: Path) -> None:
    """--batch auto in a sweep: each point's chosen batch in the table, the CSV (with the
    throughput) and the plot; the plot's title says when TTFT is not constrained."""
    from ctxplan.report.plot import plot_sweep, plot_title
    from ctxplan.report.screens import sweep_screen
    from ctxplan.sweep.output import write_sweep

    r = api.sweep("llama3.1-8b", "h100-sxm", "8K,32K", max_chips=8, batch="auto",
                  kv_tiers="kv-bf16")
    assert all(p.best is not None and p.best.decode.batch > 1 for p in r.points)
    rows = list(csv.DictReader(write_sweep(r, tmp_path / "b.csv").open()))
    for row, p in zip(rows, r.points, strict=True):
        assert p.best is not None
        assert int(row["batch"]) == p.best.decode.batch
        assert float(row["tokens_per_s_per_chip"]) == pytest.approx(
            p.best.tokens_per_s_per_chip or 0)
    title = plot_title(r)
    assert "TTFT not constrained" in title and "batch" in title
    assert plot_sweep(r, tmp_path / "b.png").stat().st_size > 10_000
    from rich.console import Console

    console = Console(width=200, record=True)
    for part in sweep_screen(r.to_dict()):
        console.print(part)
    text = " ".join(console.export_text().split())
    assert "batch" in text and "TTFT not constrained" in text
    fixed = api.sweep("llama3.1-8b", "h100-sxm", "8K", max_chips=8, ttft_max="2s")
    assert "TTFT <=" in plot_title(fixed) and "batch" not in plot_title(fixed)


def test_plot_marks_infeasible_points(tmp_path: Path) -> None:
    from ctxplan.report.plot import plot_sweep

    # 1M tokens of Llama-3.1-8B's KV (137 GB in BF16) do not fit one H100: infeasible by the
    # capacity wall, no simulation needed
    r = api.sweep("llama3.1-8b", "h100-sxm", "8K,1M", max_chips=1)
    assert r.points[0].feasible and not r.points[1].feasible
    assert plot_sweep(r, tmp_path / "x.png").stat().st_size > 10_000




def test_cli_sweep(tmp_path: Path) -> None:
    base = ["sweep", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--contexts", "8K,32K",
            "--max-chips", "8"]
    code, out, err = run_cli([*base, "--json", "--out", str(tmp_path / "s.csv"),
                           "--plot", str(tmp_path / "s.png")])
    assert code == 0, err
    d = json.loads(out)
    assert [p["context_length"] for p in d["points"]] == [8192, 32768]
    assert (tmp_path / "s.csv").exists() and (tmp_path / "s.png").exists()
    code, out, _ = run_cli(base)
    assert code == 0 and "N*(S)" in out and "8K" in out and "32K" in out
    code, out, err = run_cli([*base, "--out", str(tmp_path / "s.xlsx")])
    assert code == 2 and err.startswith("error: out = ") and out == ""


def test_several_models_one_curve_each(tmp_path: Path) -> None:
    # issue 15 / 16: `sweep --model a,b` and study files listing models: one curve per model
    kw: dict[str, Any] = dict(max_chips=8)
    both = api.sweep("llama3.1-8b,qwen2.5-7b-1m", "h100-sxm", "8K,32K", **kw)
    assert both.models == ("llama3.1-8b", "qwen2.5-7b-1m")
    for name in both.models:
        alone = api.sweep(name, "h100-sxm", "8K,32K", **kw)
        assert [p.to_dict() for p in both.curve(name)] == [p.to_dict() for p in alone.points]
    d = both.to_dict()
    assert d["models"] == list(both.models) and d["model"] is None
    assert d["contexts"] == [8192, 32768] and len(d["points"]) == 4
    from ctxplan.report.plot import plot_sweep
    from ctxplan.sweep.output import write_sweep

    rows = list(csv.DictReader(write_sweep(both, tmp_path / "m.csv").open()))
    assert [(r["model"], int(r["context_length"])) for r in rows] == [
        (m, s) for m in both.models for s in (8192, 32768)]
    assert plot_sweep(both, tmp_path / "m.png").stat().st_size > 10_000
    study = tmp_path / "s.yaml"
    study.write_text("version: 2\nmodel: [llama3.1-8b, qwen2.5-7b-1m]\nchip: h100-sxm\n"
                     "contexts: [8K, 32K]\nkv_tiers: default\nmax_chips: 8\n")
    loaded = api.load_study(study)
    assert [m.name for m in loaded.models] == list(both.models)
    assert loaded.model.name == "llama3.1-8b"
    from_file = api.solve_study(loaded)
    assert [p.to_dict() for p in from_file.points] == [p.to_dict() for p in both.points]
    # capacity and sensitivity size one model: a list is refused, not read as its first
    for study_of in (api.capacity_study, api.sensitivity_study):
        with pytest.raises(UserInputError, match="name one model"):
            study_of(loaded)
    code, out, err = run_cli(["sweep", "--model", "llama3.1-8b,qwen2.5-7b-1m", "--chip",
                              "h100-sxm", "--contexts", "8K", "--max-chips", "8", "--json",
                              "--no-store", "--backend", "serial"])
    assert code == 0, err
    assert json.loads(out)["models"] == list(both.models)
    code, _, err = run_cli(["sweep", "--model", "llama3.1-8b,nope", "--chip", "h100-sxm",
                            "--contexts", "8K", "--no-store"])
    assert code == 2 and "nope" in err


def test_several_models_carry_batch_tp_and_throughput(tmp_path: Path) -> None:
    # issue 13's columns in a multi-model sweep: the batch searched, TP per pool, tokens/s per
    # chip, and "TTFT not constrained" in the title and the plot's
    from ctxplan.report.plot import plot_sweep, plot_title
    from ctxplan.report.view.sweep import sweep_table

    code, out, err = run_cli(["sweep", "--model", "llama3.1-8b,qwen2.5-7b-1m", "--chip",
                              "h100-sxm", "--contexts", "8K", "--max-chips", "8", "--batch",
                              "auto", "--no-store", "--backend", "serial"])
    assert code == 0, err
    assert "TTFT not constrained" in " ".join(out.split())
    both = api.sweep("llama3.1-8b,qwen2.5-7b-1m", "h100-sxm", "8K", max_chips=8, batch="auto")
    view = sweep_table(both.to_dict()["points"], "t")
    columns = [c.name.replace(" /", "/") for c in view.columns if not c.detail]
    assert columns[:1] == ["model"] and {"Np", "Nd", "batch", "tok/s/chip"} <= set(columns)
    for p in both.points:
        assert p.best is not None and p.batch_searched
        row = next(r for r in both.rows() if r["model"] == p.model)
        assert row["batch"] == p.best.decode.batch > 1
        assert row["prefill_tp"] == p.best.prefill.tp and row["decode_tp"] == p.best.decode.tp
        assert row["tokens_per_s_per_chip"] == p.best.tokens_per_s_per_chip > 0
    title = plot_title(both)
    assert "one curve per model" in title and "TTFT not constrained" in title
    assert "batch" in title
    assert plot_sweep(both, tmp_path / "b.png").stat().st_size > 10_000


def _sweep_json(tmp_path: Path, models: str, chip: str, contexts: str,
                *extra: str) -> dict[str, Any]:
    """``ctxplan sweep --model a,b`` as a user runs it, with its plot; the JSON result."""
    png = tmp_path / "curves.png"
    code, out, err = run_cli(["sweep", "--model", models, "--chip", chip, "--contexts",
                              contexts, *extra, "--plot", str(png), "--json", "--no-store",
                              "--backend", "serial"])
    assert code == 0, err
    assert png.stat().st_size > 10_000
    return dict(json.loads(out))


def _curves(d: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {m: [] for m in d["models"]}
    for p in d["points"]:
        assert p["feasible"], (p["model"], p["context_length"], p["infeasible_reason"])
        out[p["model"]].append(p)
    return out


def test_deepseek_v3_and_v32_on_sg2262_one_curve_each(tmp_path: Path) -> None:
    # issue 15's target: `ctxplan sweep --model deepseek-v3,deepseek-v3.2 --contexts
    # 8K,128K,1M` on SG2262 draws one curve per model, every point simulated in both phases
    d = _sweep_json(tmp_path, "deepseek-v3,deepseek-v3.2", "sg2262", "8K,128K,1M")
    curves = _curves(d)
    assert list(curves) == ["deepseek-v3", "deepseek-v3.2"]
    v3, v32 = curves["deepseek-v3"], curves["deepseek-v3.2"]
    assert len(v3) == len(v32) == 3
    # at 1M the sparse attention makes both phases far cheaper per chip
    assert v32[-1]["prefill"]["ttft_s"] < v3[-1]["prefill"]["ttft_s"] / 4
    assert v32[-1]["decode"]["tpot_s"] < v3[-1]["decode"]["tpot_s"]


def test_a_full_attention_and_a_hybrid_model_side_by_side(tmp_path: Path) -> None:
    # issue 16 item 4: 8K..1M for a full-attention model and a hybrid one in one plot; the
    # hybrid's 36 linear layers keep a state, not S tokens, so its pool barely grows
    d = _sweep_json(tmp_path, "qwen3-235b-a22b,qwen3-next-80b-a3b", "h100-sxm", "8K,1M",
                    "--tpot-max", "50ms")
    curves = _curves(d)
    full, hybrid = curves["qwen3-235b-a22b"], curves["qwen3-next-80b-a3b"]

    def growth(c: list[dict[str, Any]], key: str) -> float:
        return float(c[-1][key] - c[0][key])

    # (with chunked prefill, issue 22, neither pool needs more chips at 1M on H100: the
    # chips never grow more for the hybrid, and its TPOT grows far less)
    assert growth(hybrid, "total_chips") <= growth(full, "total_chips")
    tpot = [[p["decode"]["tpot_s"] for p in c] for c in (full, hybrid)]
    assert tpot[1][1] - tpot[1][0] < (tpot[0][1] - tpot[0][0]) / 4
