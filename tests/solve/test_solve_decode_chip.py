"""A decode pool on a chip and cluster of its own (issue 25 item 3): solve, sweep and report
size each pool on its own chip, the KV handoff crosses the fabric joining the two clusters,
power and cost add up per pool; pareto sizes its decode shapes on the decode chip;
sensitivity names the decode pool's own figures (capacity:
tests/serve/test_capacity_decode_chip.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxplan import api
from ctxplan.errors import UserInputError
from tests.helpers.cli import run_cli
from tests.helpers.inputs import write_yaml

# SGLang's DeepSeek-V4-Pro split, on DeepSeek-V3: prefill on H20-96GB, decode on H20-141GB
ARGS = ("deepseek-v3", "h20-96", "128K")
KW: dict[str, Any] = dict(tpot_max="50ms", ttft_max="30s", kv_tiers="mla-fp8")


@pytest.fixture(scope="module")
def same() -> Any:
    return api.solve(*ARGS, **KW)


@pytest.fixture(scope="module")
def mixed() -> Any:
    return api.solve(*ARGS, decode_chip="h20-141", **KW)


def test_each_pool_is_sized_on_its_own_chip(same: Any, mixed: Any) -> None:
    assert same.best is not None and mixed.best is not None
    # the prefill pool is the same search on the same chip
    p0, p1 = same.best.prefill, mixed.best.prefill
    assert (p0.answer, p0.tp, p0.latency_s) == (p1.answer, p1.tp, p1.latency_s)
    # the decode pool on H20-141: 141 GB per chip hold the weights and KV in fewer chips
    d0, d1 = same.best.decode, mixed.best.decode
    assert (d1.chips or 0) < (d0.chips or 0) and d1.latency_s is not None
    assert d1.latency_s <= 0.050
    wall = {o.tp: o.n_cap for o in d0.tp_options}
    wall_141 = {o.tp: o.n_cap for o in d1.tp_options}
    assert all(wall_141[tp] <= wall[tp] for tp in wall if wall[tp] and wall_141.get(tp))
    # the decode pool's own simulation on its own chip, as eval gives it
    point = api.evaluate("deepseek-v3", "h20-141", "128K", "decode", d1.answer, tp=d1.tp,
                         kv_tier="mla-fp8")
    assert point.latency_s == d1.latency_s
    assert (mixed.total_chips or 0) < (same.total_chips or 0)


def test_the_handoff_crosses_to_the_decode_cluster(mixed: Any) -> None:
    h = mixed.best.handoff
    assert h is not None and h.simulated and h.first_decode_chip == 0
    assert h.bytes_moved == h.decode_kv_bytes > 0
    d = mixed.to_dict()
    assert (d["chip"], d["cluster"]) == ("h20-96", "hgx-h20-ib")
    assert (d["decode_chip"], d["decode_cluster"]) == ("h20-141", "hgx-h20-141-ib")
    assert d["handoff"]["first_decode_chip"] == 0


def test_power_and_cost_add_up_per_pool(mixed: Any) -> None:
    b = mixed.best
    e = b.economics
    assert e is not None
    n_p, n_d = b.prefill.chips or 0, b.decode.chips or 0
    assert e.watts == pytest.approx(n_p * 400 + n_d * 500)      # the presets' TDPs
    priced = api.solve(*ARGS, decode_chip="h20-141", prices=["h20-96=2/h", "h20-141=3/h"],
                       **KW)
    pe = priced.best.economics
    assert pe is not None and pe.cost_per_hour == pytest.approx(2 * n_p + 3 * n_d)
    one_price = api.solve(*ARGS, decode_chip="h20-141", prices=["h20-96=2/h"], **KW)
    assert one_price.best.economics.cost_per_hour is None
    assert any("no price for chip h20-141" in w for w in one_price.warnings)


def test_a_slower_fabric_to_the_decode_cluster_never_hands_off_faster() -> None:
    """H100 prefill, decode on the same chip in a Grand Teton cluster over TCP: the join takes
    the slower outermost level (3 GB/s achieved per GPU), and the handoff, streamed or not,
    takes longer than to the next host over InfiniBand."""
    kw: dict[str, Any] = dict(kv_handoff="after", kv_tiers="kv-bf16")
    ib = api.solve("llama3.1-8b", "h100-sxm", "128K", **kw)
    tcp = api.solve("llama3.1-8b", "h100-sxm", "128K", decode_cluster="grand-teton-tcp", **kw)
    assert ib.best is not None and tcp.best is not None
    assert tcp.to_dict()["decode_cluster"] == "grand-teton-tcp"
    assert tcp.best.handoff is not None and ib.best.handoff is not None
    assert tcp.best.handoff.handoff_s > ib.best.handoff.handoff_s


def test_sensitivity_names_the_decode_pools_own_figures(mixed: Any) -> None:
    """With a decode chip of its own, its figures are decode_chip.* / decode_cluster.*, and
    chip.* stay the prefill chip's: less memory on the H20-141 takes more decode chips; less
    on the H20-96 moves neither pool here (the prefill pool is bound by TTFT)."""
    r = api.sensitivity(*ARGS, decode_chip="h20-141", steps="-25%",
                        figures="decode_chip.memory_capacity,chip.memory_capacity", **KW)
    d = r.to_dict()
    assert (d["chip"], d["decode_chip"]) == ("h20-96", "h20-141")
    rows = {f["figure"]: f for f in d["figures"]}
    assert rows["decode_chip.memory_capacity"]["value"] == 141e9
    assert rows["chip.memory_capacity"]["value"] == 96e9
    moved = rows["decode_chip.memory_capacity"]["moves"][0]["solve"]["total_chips"]
    assert moved > (mixed.total_chips or 0)
    assert rows["chip.memory_capacity"]["moves"][0]["solve"]["total_chips"] == mixed.total_chips
    with pytest.raises(UserInputError):
        api.sensitivity(*ARGS, figures="decode_chip.memory_capacity", **KW)   # no own chip


def test_the_pareto_front_of_decode_shapes_on_their_own_chip() -> None:
    """Every decode shape pareto simulates is the decode chip's own point; the plan's figures
    count the prefill pool on its chip and the decode pool on its own."""
    r = api.pareto(*ARGS, decode_chip="h20-141", **KW)
    d = r.to_dict()
    assert (d["chip"], d["decode_chip"]) == ("h20-96", "h20-141")
    simulated = [p for p in r.points if p.tpot_s is not None]
    assert simulated and d["front"]
    p = simulated[0]
    own = api.evaluate("deepseek-v3", "h20-141", "128K", "decode", p.cp, tp=p.tp,
                       batch=p.batch, kv_tier=p.kv_tier, pp=p.pp)
    assert own.latency_s == p.tpot_s
    row = next(x for x in d["points"] if x["simulated"] and x["plan_chips"])
    watts = 400 * row["prefill_chips"] + 500 * row["chips"]
    assert row["joules_per_token"] == pytest.approx(watts / (row["batch"] / row["tpot_s"]))


def test_a_study_file_and_the_command_line_agree(tmp_path: Path, mixed: Any) -> None:
    study = write_yaml(tmp_path / "s.yaml", {
        "version": 2, "model": "deepseek-v3", "chip": "h20-96", "decode_chip": "h20-141",
        "contexts": ["128K"], "kv_tiers": ["mla-fp8"],
        "sla": {"tpot_max": "50ms", "ttft_max": "30s"}})
    r = run_cli(["solve", "--config", str(study), "--json", "--no-store"])
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["decode_chip"] == "h20-141" and d["total_chips"] == mixed.total_chips
    r = run_cli(["solve", "--model", "deepseek-v3", "--chip", "h20-96", "--decode-chip",
                 "h20-141", "--context", "128K", "--tpot-max", "50ms", "--ttft-max", "30s",
                 "--kv-tiers", "mla-fp8", "--no-store"])
    assert r.code == 0, r.err
    assert "prefill on h20-96 (hgx-h20-ib), decode on h20-141" in " ".join(r.out.split())


def test_cost_and_power_objectives_weigh_each_pools_chip() -> None:
    """With two chips, --objective cost (power) weighs each chip by its price (TDP): the plan
    it picks costs (draws) no more per decode token than the tokens-per-chip plan (the same
    ladder of decode pools, ranked by tokens per unit of cost or energy)."""
    kw = KW
    prices = ["h20-96=1/h", "h20-141=20/h"]
    per_chip = api.solve(*ARGS, decode_chip="h20-141", objective="tokens-per-chip",
                         prices=prices, **kw)
    cost = api.solve(*ARGS, decode_chip="h20-141", objective="cost", prices=prices, **kw)
    power = api.solve(*ARGS, decode_chip="h20-141", objective="power", prices=prices, **kw)
    e0, ec, ep = (r.best.economics for r in (per_chip, cost, power))
    assert ec.cost_per_million_tokens <= e0.cost_per_million_tokens
    assert ep.joules_per_token <= e0.joules_per_token
    with pytest.raises(UserInputError) as err:     # a price for each pool's chip
        api.solve(*ARGS, decode_chip="h20-141", objective="cost", prices=["h20-96=1/h"],
                  **KW)
    assert err.value.field in ("objective", "prices")


def test_set_moves_a_figure_of_the_decode_pools_own_chip(tmp_path: Path, mixed: Any) -> None:
    """--set decode_chip.memory_gb=... turns the preset into its inline definition (renamed
    '-custom'), as --set chip.* does; on a study without a decode chip it starts from the
    shared one, so the decode pool alone gets the moved chip."""
    base = {"version": 2, "model": "deepseek-v3", "chip": "h20-96", "contexts": ["128K"],
            "kv_tiers": ["mla-fp8"], "sla": {"tpot_max": "50ms", "ttft_max": "30s"}}
    own = write_yaml(tmp_path / "own.yaml", {**base, "decode_chip": "h20-141"})
    shared = write_yaml(tmp_path / "shared.yaml", base)
    got = {}
    for name, study in (("own", own), ("shared", shared)):
        r = run_cli(["solve", "--config", str(study), "--set", "decode_chip.memory_gb=110",
                     "--json", "--no-store"])
        assert r.code == 0, r.err
        got[name] = json.loads(r.out)
    assert got["own"]["decode_chip"] == "h20-141-custom"
    assert got["shared"]["decode_chip"] == "h20-96-custom" and got["shared"]["chip"] == "h20-96"
    # 110 GB instead of 141: the decode pool needs more chips than the H20-141's
    assert got["own"]["decode"]["chips"] > mixed.best.decode.chips
