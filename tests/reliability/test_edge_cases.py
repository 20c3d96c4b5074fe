"""Edge cases that must work: uneven chunks, S < Np, Nd = 1, batch > 1, one KV head, and a chip
that cannot hold the weights at any N (a clear infeasible answer, not an error)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ctxplan import api
from ctxplan.config.model_presets import model_from_dict
from ctxplan.model.kv import kv_tiers
from tests.helpers.cli import check_contract, run_cli
from tests.helpers.inputs import TINY_MODEL, point_data, write_yaml

ONE_KV_HEAD = {**TINY_MODEL, "name": "one-kv-head", "num_key_value_heads": 1}


def _eval(tmp: Path, **over: object) -> dict:  # type: ignore[type-arg]
    path = write_yaml(tmp / "p.yaml", {**point_data(), **over})
    r = run_cli(["eval", "--config", str(path), "--json"])
    check_contract(r)
    assert r.code == 0, r.err
    return json.loads(r.out)  # type: ignore[no-any-return]


def _c_kv(model: dict, tier: str) -> int:  # type: ignore[type-arg]
    return kv_tiers(model_from_dict(model, "test"))[tier]


@pytest.mark.parametrize(("s", "np_", "batch"), [(1001, 3, 1), (3000, 7, 2), (4097, 4, 3),
                                                 (3, 4, 1), (5, 8, 2)])
def test_prefill_bytes_exact_with_uneven_chunks(tmp_path: Path, s: int, np_: int,
                                                batch: int) -> None:
    """S not divisible by 2*Np (and S < Np): every ring step's bytes add up exactly."""
    assert s % (2 * np_) != 0
    d = _eval(tmp_path, context=s, phase="prefill", cp=np_, batch=batch)
    c_kv = _c_kv(TINY_MODEL, "kv-bf16")
    analytic = batch * TINY_MODEL["num_hidden_layers"] * (np_ - 1) * s * c_kv
    assert d["comm"]["simulated_bytes"] == d["comm"]["analytic_bytes"] == analytic
    assert d["comm"]["ring_steps_per_layer"] == np_ - 1
    assert d["ttft_s"] > 0 and d["chips"] == np_


@pytest.mark.parametrize(("s", "nd", "batch"), [(1001, 3, 1), (3, 4, 2), (4097, 1, 4)])
def test_decode_kv_shard_exact(tmp_path: Path, s: int, nd: int, batch: int) -> None:
    """Decode KV per chip is the fullest shard: b * ceil(S / Nd) * c_kv * L."""
    d = _eval(tmp_path, context=s, phase="decode", cp=nd, batch=batch)
    c_kv = _c_kv(TINY_MODEL, "kv-bf16")
    assert d["memory"]["kv_bytes"] == \
        batch * math.ceil(s / nd) * c_kv * TINY_MODEL["num_hidden_layers"]
    assert d["tpot_s"] > 0


def test_nd_one_has_no_pass_q_traffic(tmp_path: Path) -> None:
    d = _eval(tmp_path, phase="decode", cp=1)
    assert d["chips"] == 1 and d["tpot_s"] > 0
    assert d["comm"]["pattern"] == "pass-q"
    assert d["comm"]["simulated_bytes"] == d["comm"]["analytic_bytes"] == 0
    two = _eval(tmp_path, phase="decode", cp=2)
    assert two["comm"]["simulated_bytes"] == two["comm"]["analytic_bytes"] > 0


def test_batch_scales_kv_and_not_speed(tmp_path: Path) -> None:
    one = _eval(tmp_path, phase="decode", cp=2, batch=1)
    four = _eval(tmp_path, phase="decode", cp=2, batch=4)
    assert four["memory"]["kv_bytes"] == 4 * one["memory"]["kv_bytes"]
    assert four["tpot_s"] >= one["tpot_s"]
    assert four["comm"]["analytic_bytes"] == 4 * one["comm"]["analytic_bytes"]


@pytest.mark.parametrize(("phase", "cp", "tp"), [("prefill", 3, 1), ("prefill", 2, 2),
                                                 ("decode", 3, 1), ("decode", 2, 4)])
def test_one_kv_head(tmp_path: Path, phase: str, cp: int, tp: int) -> None:
    d = _eval(tmp_path, model=ONE_KV_HEAD, phase=phase, cp=cp, tp=tp, context=3000)
    head_dim = ONE_KV_HEAD["hidden_size"] // ONE_KV_HEAD["num_attention_heads"]
    assert d["c_kv_bytes"] == 2 * 1 * head_dim * 2   # K and V of one head, BF16
    assert d["chips"] == cp * tp and d["comm"]["simulated_bytes"] == d["comm"]["analytic_bytes"]
    if phase == "decode":
        # one KV head cannot be split over TP: every TP chip keeps the full shard
        shard = math.ceil(3000 / cp)
        assert d["memory"]["kv_bytes"] == shard * d["c_kv_bytes"] * ONE_KV_HEAD[
            "num_hidden_layers"]


def test_one_kv_head_solves(tmp_path: Path) -> None:
    study = write_yaml(tmp_path / "s.yaml", {
        "version": 2, "model": ONE_KV_HEAD, "chip": "h100-sxm", "contexts": ["1K", 3000],
        "kv_tiers": "default", "max_chips": 8})
    r = run_cli(["solve", "--config", str(study), "--json"])
    assert r.code == 0, r.err
    points = json.loads(r.out)["points"]
    assert all(p["feasible"] for p in points)


def test_weights_that_fit_no_chip_are_infeasible_not_an_error(tmp_path: Path) -> None:
    """Llama 3.1 70B (~141 GB of BF16 weights, replicated over CP ranks) on a 40 GB chip at
    TP 1: no N within the bound fits, so the answer is 'infeasible', naming the capacity wall
    and the TP degrees that would fit. With TP searched (the default) it is feasible."""
    args = ["solve", "--model", "llama3.1-70b", "--chip", "h100-sxm", "--context", "8K",
            "--max-chips", "16", "--set", "chip.memory_gb=40"]
    r = run_cli([*args, "--prefill-tp", "1", "--decode-tp", "1", "--json"])
    check_contract(r)
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["feasible"] is False and d["total_chips"] is None
    reason = d["infeasible_reason"]
    assert "capacity wall" in reason and "weights alone" in reason and "N = 16" in reason
    assert "TP8 fits from N = 1" in reason and "use --decode-tp 8" in reason
    assert "--prefill-tp auto" in reason
    assert d["sim_calls"] == 0   # the wall is found without simulating
    table = run_cli([*args, "--prefill-tp", "1", "--decode-tp", "1"])
    assert table.code == 0 and "INFEASIBLE" in table.out
    searched = json.loads(run_cli([*args, "--json"]).out)
    assert searched["feasible"] and searched["prefill"]["tp"] >= 4


def test_api_one_kv_head_model_object() -> None:
    m = model_from_dict(ONE_KV_HEAD, "test")
    assert m.num_key_value_heads == 1 and m.attention_kind == "gqa"
    r = api.evaluate(m, "h100-sxm", 1001, "prefill", 3)
    assert r.comm is not None and r.comm.simulated_bytes == r.comm.analytic_bytes
