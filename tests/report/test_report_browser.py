"""The report in a real browser: headless Chromium (Debian's package) through Playwright.

For a solve (with sensitivity), a sweep and a capacity report: the page loads with no console
error and no request beyond the file itself; every chart drew (non-white pixels in its box);
the tables hold the result's numbers; hovering a mark shows its value. Where the browser cannot
be had the test skips and says why, except under CI (CI=true), where that is a failure: .ci/run
installs Debian's chromium.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxplan.config.units import format_duration, format_short, format_tokens
from tests.helpers import browser
from tests.report.reports import capacity_report, solve_report, sweep_report

WHY_NOT = browser.unavailable()
if WHY_NOT is not None:
    if os.environ.get("CI"):
        pytest.fail(f"the report's browser test cannot run under CI: {WHY_NOT}",
                    pytrace=False)
    pytest.skip(f"report browser test skipped: {WHY_NOT}", allow_module_level=True)


@pytest.fixture(scope="module")
def context() -> Iterator[Any]:
    with browser.browser() as ctx:
        yield ctx


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("reports")
    return {"solve": solve_report(d, sensitivity=True), "sweep": sweep_report(d),
            "capacity": capacity_report(d)}


def _open(context: Any, path: Path) -> tuple[Any, list[str]]:
    """The page at ``path`` with every section open, and what went wrong while loading it."""
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    page.on("request", lambda r: None if r.url == path.resolve().as_uri()
            else problems.append(f"request: {r.url}"))
    page.goto(path.resolve().as_uri())
    page.wait_for_load_state("load")
    page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
    return page, problems


def _inked_fraction(png: bytes) -> float:
    """The fraction of pixels that are not (near) white."""
    from PIL import Image

    histogram = Image.open(io.BytesIO(png)).convert("L").histogram()
    return sum(histogram[:235]) / max(sum(histogram), 1)


def _cells(page: Any, table_id: str) -> list[dict[str, str]]:
    """The rows of a table, each as {header: cell}."""
    head = page.eval_on_selector_all(f"#{table_id} thead th", "e => e.map(x => x.innerText)")
    rows = page.eval_on_selector_all(
        f"#{table_id} tbody tr",
        "rows => rows.map(r => Array.from(r.cells, c => c.innerText.trim()))")
    return [dict(zip(head, r, strict=True)) for r in rows]


@pytest.mark.parametrize("kind, charts", [
    ("solve", ["chart-nstar-2K", "chart-search-2K", "chart-tornado"]),
    ("sweep", ["chart-nstar-sweep", "chart-search-1K", "chart-search-4K", "chart-search-16K"]),
    ("capacity", ["chart-capacity", "chart-search-shapes"]),
])
def test_page_loads_clean_and_every_chart_draws(context: Any, reports: dict[str, Any],
                                                 kind: str, charts: list[str]) -> None:
    page, problems = _open(context, reports[kind].path)
    try:
        assert problems == []
        found = page.eval_on_selector_all("svg.chart", "els => els.map(e => e.id)")
        assert sorted(found) == sorted(charts)
        for chart_id in charts:
            box = page.locator(f"#{chart_id}")
            assert box.bounding_box()["width"] > 200, chart_id
            inked = _inked_fraction(box.screenshot())
            assert inked > 0.02, f"{chart_id}: {inked:.3%} of its pixels drawn"
    finally:
        page.close()


def test_solve_tables_hold_the_numbers(context: Any, reports: dict[str, Any]) -> None:
    report = reports["solve"]
    d = report.data
    page, problems = _open(context, report.path)
    try:
        assert problems == []
        facts = dict(zip(page.eval_on_selector_all("#answer-2K dt", "e => e.map(x => x.innerText)"),
                         page.eval_on_selector_all("#answer-2K dd", "e => e.map(x => x.innerText)"),
                         strict=True))
        assert facts["N*"].startswith(f"{d['total_chips']} chips = ")
        assert facts["KV tier"].startswith(d["kv_tier"])
        assert format_duration(d["decode"]["tpot_s"]) in facts["decode pool"]
        assert format_duration(d["prefill"]["ttft_s"]) in facts["prefill pool"]
        tiers = _cells(page, "tiers-2K")
        assert [r["KV tier"].removesuffix(" *") for r in tiers] == [t["kv_tier"]
                                                                    for t in d["tiers"]]
        for row, tier in zip(tiers, d["tiers"], strict=True):
            assert row["chips"] == str(tier["total_chips"])
        path = _cells(page, "path-2K")
        assert len(path) == len(d["candidates"])
        for row, c in zip(path, d["candidates"], strict=True):
            lat = c.get("ttft_s") if c["phase"] == "prefill" else c.get("tpot_s")
            assert [row[k] for k in ("phase", "KV tier", "N", "TP")] == [
                c["phase"], c["kv_tier"], str(c["n"]), str(c["tp"])]
            assert row["latency"] == format_short(lat)
        sens = _cells(page, "sensitivity-table")
        assert [r["figure"] for r in sens] == [f["figure"]
                                               for f in report.sensitivity["figures"]]
    finally:
        page.close()


def test_sweep_and_capacity_tables_hold_the_numbers(context: Any,
                                                    reports: dict[str, Any]) -> None:
    sweep = reports["sweep"].data
    page, _ = _open(context, reports["sweep"].path)
    rows = _cells(page, "nstar-table-sweep")
    page.close()
    assert [(r["S"], r["N*"]) for r in rows] == [
        (format_tokens(p["context_length"]), str(p["total_chips"])) for p in sweep["points"]]
    cap = reports["capacity"].data
    page, _ = _open(context, reports["capacity"].path)
    rows = _cells(page, "capacity-table")
    page.close()
    assert [(r["xPyD"], r["chips"]) for r in rows] == [(p["layout"], str(p["total_chips"]))
                                            for p in cap["points"]]


def test_hovering_a_mark_shows_its_value(context: Any, reports: dict[str, Any]) -> None:
    page, problems = _open(context, reports["sweep"].path)
    try:
        mark = page.locator("#chart-nstar-sweep [data-tip]").first
        mark.hover()
        tip = page.locator("#tip")
        assert tip.is_visible()
        assert tip.inner_text() == mark.get_attribute("data-tip")
        assert "N* =" in tip.inner_text()
        page.mouse.move(0, 0)
        assert not tip.is_visible()
        assert problems == []
    finally:
        page.close()


def test_print_opens_every_section(context: Any, reports: dict[str, Any]) -> None:
    page = context.new_page()
    try:
        page.goto(reports["sweep"].path.resolve().as_uri())
        assert page.evaluate("Array.from(document.querySelectorAll('details')).some(d => !d.open)")
        page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
        assert page.evaluate("Array.from(document.querySelectorAll('details')).every(d => d.open)")
        page.emulate_media(media="print")
        assert not page.locator("nav").is_visible()
    finally:
        page.close()
