"""Prefill on a cached prefix through evaluate, the API, the CLI and study files:
``--cached P``, ``--cached-fraction F``, ``--prefill-ring pass-kv|pass-q|auto`` (issue 15)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from ctxplan import api
from ctxplan.errors import UserInputError
from ctxplan.model.kinds import linear_state_bytes
from ctxplan.solve.cache import CacheCounts, EvalCache
from tests.helpers.cli import run_cli

BASE = ["--model", "llama3.1-8b", "--chip", "h100-sxm"]


def _eval(**kw: object) -> api.EvalResult:
    args = dict(cluster=None, tp=1)
    args.update(kw)
    return api.evaluate("llama3.1-8b", "h100-sxm", "16K", "prefill", 4, **args)  # type: ignore[arg-type]


def test_auto_keeps_the_faster_ring_and_reports_both_and_the_heuristic() -> None:
    kv = _eval(cached=15_000)
    q = _eval(cached=15_000, prefill_ring="pass-q")
    auto = _eval(cached=15_000, prefill_ring="auto")
    assert kv.ring is not None and q.ring is not None and auto.ring is not None
    assert (kv.ring.asked, kv.ring.used, q.ring.used) == ("pass-kv", "pass-kv", "pass-q")
    assert kv.comm is not None and q.comm is not None
    assert (kv.comm.pattern, q.comm.pattern) == ("pass-kv", "pass-q")
    faster = min((kv, q), key=lambda r: r.latency_s or 0.0)
    assert auto.ring.used == faster.ring.used and auto.latency_s == faster.latency_s
    assert (auto.ring.ttft_pass_kv_s, auto.ring.ttft_pass_q_s) == (kv.latency_s, q.latency_s)
    # Meta's heuristic: pass-Q when T / (T + P) <= 2 N_KV / N_H = 2 * 8 / 32
    T = 16 * 1024 - 15_000
    assert auto.ring.miss_rate == T / (16 * 1024) and auto.ring.threshold == 0.5
    assert auto.ring.heuristic == "pass-q"
    assert auto.key not in (kv.key, q.key) and auto.cached == 15_000
    # auto simulated both rings, and says so: a solver counts two simulations for it
    assert (kv.simulations, q.simulations, auto.simulations) == (1, 1, 2)
    cache = EvalCache()
    cache.evaluate(api.eval_config("llama3.1-8b", "h100-sxm", "16K", "prefill", 4,
                                   cached=15_000, prefill_ring="auto"))
    assert cache.counts() == CacheCounts(sim_calls=2, cache_hits=0)


def test_without_a_full_attention_layer_auto_simulates_once() -> None:
    r = api.evaluate("deepseek-v3.2", "sg2262", "8K", "prefill", 8, cached=4096,
                     prefill_ring="auto")
    assert r.simulated and r.ring is not None and r.ring.used == "pass-kv"
    assert r.ring.ttft_pass_kv_s == r.ring.ttft_pass_q_s == r.latency_s
    assert r.simulations == 1


def test_a_cached_prefix_makes_the_prefill_cheaper_and_its_memory_counts_the_prefix() -> None:
    whole = _eval()
    warm = _eval(cached=12 * 1024)
    assert warm.latency_s is not None and whole.latency_s is not None
    assert warm.latency_s < whole.latency_s
    # the prefix's KV is held as the new tokens' is: the KV per chip is the same
    assert warm.memory.kv_bytes == whole.memory.kv_bytes
    assert warm.memory.activation_bytes < whole.memory.activation_bytes


def test_linear_layers_keep_a_state_not_the_prefix() -> None:
    m = api.resolve_model("qwen3-next-80b-a3b")
    r = api.evaluate(m, "h100-sxm", "32K", "prefill", 2, tp=2, cached=30_000)
    assert r.simulated and linear_state_bytes(m) > 0


@pytest.mark.parametrize(("kw", "field"), [
    (dict(cached="16K"), "cached"), (dict(cached=-1), "cached"),
    (dict(prefill_ring="both"), "prefill_ring")])
def test_bad_values_name_their_field(kw: dict[str, object], field: str) -> None:
    with pytest.raises(UserInputError, match=rf"^{field} = "):
        _eval(**kw)
    with pytest.raises(UserInputError, match=r"^cached = "):
        api.evaluate("llama3.1-8b", "h100-sxm", "16K", "decode", 1, cached=1000)


def test_cli_eval_cached_and_auto() -> None:
    code, out, err = run_cli(["eval", *BASE, "--context", "16K", "--phase", "prefill",
                              "--cp", "2", "--cached", "15K", "--prefill-ring", "auto",
                              "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["cached"] == 15 * 1024 and d["ring"]["asked"] == "auto"
    assert d["ring"]["used"] in ("pass-kv", "pass-q") and d["comm"]["pattern"] == d["ring"]["used"]
    code, out, err = run_cli(["eval", *BASE, "--context", "16K", "--phase", "prefill",
                              "--cp", "2", "--cached", "15K", "--prefill-ring", "auto"])
    assert code == 0 and "pass-q" in out and "heuristic" in out
    code, _, err = run_cli(["eval", *BASE, "--context", "16K", "--phase", "decode", "--cp",
                            "2", "--cached", "1K"])
    assert code == 2 and err.startswith("error: cached = 1024") and "Traceback" not in err


def test_solve_sizes_the_prefill_for_the_hit_rate() -> None:
    # The handoff off: its pair check may step either pool, and this compares the pools alone
    # (the pair check's own use of the hit rate: test_the_pair_check_prefills_as_sized).
    kw: dict[str, Any] = dict(max_chips=8, ttft_max="0.5s", kv_handoff="off")
    cold = api.solve("llama3.1-8b", "h100-sxm", "32K", **kw)
    warm = api.solve("llama3.1-8b", "h100-sxm", "32K", cached_fraction=0.9,
                     prefill_ring="auto", **kw)
    assert cold.best is not None and warm.best is not None
    assert warm.best.prefill.latency_s is not None and cold.best.prefill.latency_s is not None
    assert warm.best.prefill.chips <= cold.best.prefill.chips  # type: ignore[operator]
    # decode is unchanged: tier by tier (a cheaper prefill may make another tier the best)
    decode = [{t.kv_tier: (t.decode.answer, t.decode.latency_s) for t in r.tiers}
              for r in (cold, warm)]
    assert decode[0] == decode[1]
    with pytest.raises(UserInputError, match=r"^cached_fraction = 1"):
        api.solve("llama3.1-8b", "h100-sxm", "32K", cached_fraction=1.0)
    code, _, err = run_cli(["solve", *BASE, "--context", "32K", "--cached-fraction", "1.5"])
    assert code == 2 and "cached_fraction" in err


def test_the_pair_check_prefills_as_sized() -> None:
    # The handoff's pair check simulates the prefill its pool was sized for: the cached prefix
    # and the ring asked for (issue 14 x issue 15)
    kw: dict[str, Any] = dict(max_chips=8, ttft_max="0.5s", cached_fraction=0.9,
                              prefill_ring="auto")
    warm = api.solve("llama3.1-8b", "h100-sxm", "32K", **kw)
    assert warm.best is not None and warm.best.handoff is not None
    b, h = warm.best, warm.best.handoff
    pairs = [c for c in warm.candidates if c.step == "handoff"]
    assert pairs and all(c.handoff_to is not None for c in pairs)
    req = api.solve_request("llama3.1-8b", "h100-sxm", "32K", **kw)
    cfg = req.pair_config(b.kv_tier, b.prefill.answer or 0, b.prefill.tp,
                          b.decode.answer or 0, b.decode.tp)
    assert cfg.cached == math.floor(0.9 * 32768) and cfg.policy.prefill_ring == "auto"
    pair = api.evaluate("llama3.1-8b", "h100-sxm", "32K", "prefill", cfg.cp, tp=cfg.tp,
                        kv_tier=b.kv_tier, cached=cfg.cached, prefill_ring="auto",
                        handoff_to=cfg.handoff_to, handoff_tp=cfg.handoff_tp)
    assert pair.latency_s == b.prefill.latency_s == h.ttft_s
    assert pair.ring is not None and b.prefill.ring == pair.ring.used
    # the whole context's KV moves (the cached prefix's too): what the decode pool keeps
    assert pair.handoff is not None
    assert pair.handoff.bytes_moved == pair.handoff.decode_kv_bytes == h.bytes_moved


def test_study_and_point_files_take_the_options(tmp_path: Path) -> None:
    point = tmp_path / "p.yaml"
    point.write_text("version: 1\nmodel: llama3.1-8b\nchip: h100-sxm\ncontext: 16K\n"
                     "phase: prefill\ncp: 2\nkv_tier: default\ncached: 12K\n"
                     "prefill_ring: pass-q\n")
    r = api.evaluate_point(point)
    assert r.cached == 12 * 1024 and r.ring is not None and r.ring.used == "pass-q"
    study = tmp_path / "s.yaml"
    study.write_text("version: 2\nmodel: llama3.1-8b\nchip: h100-sxm\ncontexts: [16K]\n"
                     "kv_tiers: default\nmax_chips: 4\ncached_fraction: 0.75\n"
                     "prefill_ring: auto\n")
    s = api.load_study(study)
    assert s.cached_fraction == 0.75 and s.prefill_ring == "auto"
    out = api.solve_study(s)
    prefill = [c for c in out.points[0].tiers[0].prefill.candidates if c.simulated]
    assert prefill
    bad = tmp_path / "bad.yaml"
    bad.write_text(study.read_text().replace("0.75", "1.0"))
    with pytest.raises(UserInputError, match="cached_fraction"):
        api.load_study(bad)
