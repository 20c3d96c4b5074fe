"""The KV handoff: bytes moved == the decode pool's KV by the model's own accounting (exactly),
placement, timing (streamed vs after), and the same graph whether layers are tiled or not."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ctxplan import api
from ctxplan.config.checks import tp_problem
from ctxplan.config.hardware_presets import cluster_from_dict
from ctxplan.config.model_presets import load_model
from ctxplan.errors import UserInputError
from ctxplan.evaluate import EvalConfig, build_graph, evaluate
from ctxplan.mapping.builder import GraphBuilder
from ctxplan.mapping.handoff import (
    KV_HANDOFF,
    decode_pool_kv_bytes,
    decode_start,
    emit_handoff,
    handoff_plan,
)
from ctxplan.mapping.layout import Layout, make_layout
from ctxplan.mapping.memory import kv_bytes_by_rank
from ctxplan.mapping.prefill import emit_prefill
from ctxplan.model.kv import default_kv_tiers, resolve_kv_tier
from ctxplan.model.precision import Precision
from tests.helpers.inputs import TINY_CLUSTER as TINY_CLUSTER_DATA

V4_FLASH = load_model("deepseek-v4-flash").first_layers(4)   # window x 2, CSA, HCA
V4_PRO = load_model("deepseek-v4-pro").first_layers(3)       # HCA x 2, CSA

# model, chip, cluster, context, Np, tp_p, Nd, tp_d, batch, tier
SIMULATED = [
    ("deepseek-v3", "sg2262", None, 2**20, 8, 1, 7, 1, 1, "mla-fp8"),      # MoE, MLA, 1M
    ("deepseek-v3", "sg2262", None, 100_003, 4, 2, 3, 4, 2, None),         # MLA under TP
    ("llama3.1-70b", "h100-sxm", None, 40_000, 3, 4, 2, 8, 3, None),       # GQA 4 -> 8, hosts
    ("llama3.1-8b", "h100-sxm", None, 9_999, 9, 1, 4, 2, 1, "kv-fp8"),     # across hosts
    ("qwen3-235b-a22b", "h100-sxm", None, 7_777, 2, 8, 3, 2, 2, None),     # GQA 8 -> 2, MoE
    ("llama3.1-8b", "h100-sxm", None, 7, 5, 1, 3, 1, 1, None),             # S < 2 Np
    # the attention kinds (issues 15 / 16), each where decode keeps it
    ("gpt-oss-20b", "b200", None, 100_003, 4, 1, 3, 2, 5, None),           # window -> homes
    ("gpt-oss-20b", "b200", None, 100, 3, 2, 2, 1, 1, None),               # S < w: as full
    ("qwen3-next-80b-a3b", "b200", None, 65_537, 3, 2, 2, 4, 3, None),     # linear, TP 2 -> 4
    ("deepseek-v3.2", "sg2262", None, 131_072, 8, 1, 7, 1, 1, None),       # DSA, index keys
    ("deepseek-v3.2", "sg2262", None, 9_000, 4, 2, 2, 4, 3, None),         # DSA under TP
    # a cached prefix: its KV moves too, from where the prefill that computed it left it
    ("llama3.1-8b", "h100-sxm", None, 50_000, 3, 1, 2, 2, 2, None, 40_000),
    ("gpt-oss-20b", "b200", None, 20_000, 3, 1, 2, 1, 3, None, 19_950),     # window spans P
    ("qwen3-next-80b-a3b", "b200", None, 30_001, 2, 2, 3, 2, 4, None, 29_000),
    # DeepSeek-V4 (issue 27): the entries sharded, the windows and compressor states home
    (V4_FLASH, "b200", None, 100_003, 4, 1, 3, 2, 5, None),
    (V4_PRO, "b200", None, 50_001, 3, 2, 2, 4, 3, "v4-fp4-index"),        # TP 2 -> 4
    (V4_PRO, "b200", None, 100, 3, 1, 2, 1, 1, None),                      # S < w, < 128
    (V4_FLASH, "b200", None, 30_000, 3, 1, 2, 1, 2, None, 25_003),         # a cached prefix
]


def _cfg(case, mode: str = "streamed") -> EvalConfig:
    model, chip, cluster, s, np_, tp_p, nd, tp_d, batch, tier, *cached = case
    return api.eval_config(model, chip, s, "prefill", np_, cluster=cluster, tp=tp_p,
                           batch=batch, kv_tier=tier, cached=cached[0] if cached else 0,
                           handoff_to=nd, handoff_tp=tp_d, kv_handoff=mode)


def _case_id(c) -> str:
    cached = f"-P{c[10]}" if len(c) > 10 else ""
    name = c[0] if isinstance(c[0], str) else c[0].name
    return f"{name}-S{c[3]}{cached}-{c[4]}x{c[5]}-to-{c[6]}x{c[7]}-b{c[8]}"


@pytest.mark.parametrize("case", SIMULATED, ids=_case_id)
def test_simulated_bytes_equal_the_decode_pools_kv_exactly(case) -> None:
    cfg = _cfg(case)
    result, _ = evaluate(cfg)
    h = result.handoff
    assert h is not None and result.simulated
    lay_d = cfg.handoff_layout()
    assert lay_d is not None
    stored = sum(kv_bytes_by_rank(cfg.model, lay_d)) * lay_d.tp
    assert h.bytes_moved == h.decode_kv_bytes == stored
    # Every decode chip receives exactly what it stores; nothing lands on a prefill chip or
    # on the chips between the pools (the rest of the prefill's last host).
    b = build_graph(cfg)
    moving = b.mask_of([KV_HANDOFF])
    n_p = cfg.cp * cfg.tp
    first = h.first_decode_chip
    assert first == -(-n_p // cfg.cluster.host_size) * cfg.cluster.host_size
    assert b.peer[moving].min() >= first
    received = np.bincount(b.peer[moving] - first, weights=b.graph.nbytes[moving],
                           minlength=lay_d.n_chips)
    per_rank = kv_bytes_by_rank(cfg.model, lay_d)
    assert received.tolist() == [float(per_rank[c // lay_d.tp]) for c in range(lay_d.n_chips)]
    assert set(b.chip_of[moving].tolist()) <= set(range(n_p))


def _senders_by_kind(cfg: EvalConfig) -> dict[str, set[int]]:
    b = build_graph(cfg)
    moving = np.flatnonzero(b.mask_of([KV_HANDOFF]))
    out: dict[str, set[int]] = {}
    for t in moving:
        kind = cfg.model.layer_type(int(b.layer[t]))
        out.setdefault(kind, set()).add(int(b.chip_of[t]) // cfg.tp)
    return out


def test_each_kind_leaves_from_where_the_prefill_holds_it() -> None:
    """gpt-oss at S = 100,003 on Np = 4: the last 128 tokens sit in chunk 7, on rank 0, so its
    window layers send from rank 0 only (to each sequence's home); full layers from every rank.
    Qwen3-Next: the state chain ends on rank 0 (chunk 2 Np - 1), which sends every state."""
    gpt = _senders_by_kind(_cfg(SIMULATED[6]))
    assert gpt == {"sliding_attention": {0}, "full_attention": {0, 1, 2, 3}}
    nxt = _senders_by_kind(_cfg(SIMULATED[8]))
    assert nxt["linear_attention"] == {0} and nxt["full_attention"] == {0, 1, 2}


def test_a_linear_state_leaves_once_the_chain_has_ended() -> None:
    """Streamed: a linear layer's state leaves its holder after the holder's last chain op of
    that layer (the final state), not after its projection."""
    cfg = _cfg(SIMULATED[8])
    b = build_graph(cfg)
    res = b.run()
    moving = b.mask_of([KV_HANDOFF])
    layer, chip = b.layer.astype(int), b.chip_of.astype(int)
    chain = b.mask_of(["gdn_state", "gdn_chunk"])
    end: dict[tuple[int, int], int] = {}
    for t in np.flatnonzero(chain):
        key = (int(layer[t]), int(chip[t]))
        end[key] = max(end.get(key, 0), int(res.end_ns[t]))
    linear = [t for t in np.flatnonzero(moving)
              if cfg.model.layer_type(int(layer[t])) == "linear_attention"]
    assert linear
    for t in linear:
        assert res.start_ns[t] >= end[(int(layer[t]), int(chip[t]))]


def test_full_attention_moves_b_s_ckv_l_per_decode_tp_chip() -> None:
    """The spec's KV formula, written out here: b x S x c_kv x L bytes per copy (TP 1)."""
    case = ("llama3.1-8b", "h100-sxm", None, 12_345, 3, 1, 2, 1, 2, "kv-bf16")
    result, _ = evaluate(_cfg(case))
    m = load_model("llama3.1-8b")
    _, c_kv = resolve_kv_tier(m, "kv-bf16")
    assert result.handoff is not None
    assert result.handoff.bytes_moved == 2 * 12_345 * c_kv * m.num_hidden_layers


def _plan_layouts(name: str, s: int, np_: int, tp_p: int, nd: int, tp_d: int,
                  batch: int) -> list[Layout] | None:
    """The prefill and decode layouts of a case, or None where a TP does not split the
    model's heads (such a case is not one: it is left out, not skipped)."""
    m = load_model(name)
    _, c_kv = resolve_kv_tier(m, default_kv_tiers(m)[0])
    if tp_problem(m, tp_p) or tp_problem(m, tp_d):
        return None
    return [make_layout(m, phase=ph, cp=cp, tp=tp, batch=batch, context_length=s,
                        c_kv_bytes=c_kv, precision=Precision())
            for ph, cp, tp in (("prefill", np_, tp_p), ("decode", nd, tp_d))]


PLAN_CASES = [(name, *shape)
              for name in ("gpt-oss-120b", "qwen3-next-80b-a3b", "deepseek-v3.2", "kimi-k2",
                           "qwen2.5-7b-1m")
              for shape in ((300_001, 5, 1, 3, 2, 3), (2**20, 8, 2, 11, 1, 1),
                            (513, 2, 4, 4, 8, 5))
              if _plan_layouts(name, *shape) is not None]


@pytest.mark.parametrize(("name", "s", "np_", "tp_p", "nd", "tp_d", "batch"), PLAN_CASES)
def test_the_plan_moves_every_kind_exactly(name, s, np_, tp_p, nd, tp_d, batch) -> None:
    """Sliding-window (gpt-oss), linear attention (Qwen3-Next), DSA (V3.2): the plan's bytes
    equal the decode pool's KV and state, exactly, on layouts too large to simulate here (the
    simulated graphs: test_simulated_bytes_equal_the_decode_pools_kv_exactly)."""
    m = load_model(name)
    lays = _plan_layouts(name, s, np_, tp_p, nd, tp_d, batch)
    assert lays is not None
    plan = handoff_plan(m, *lays)
    assert plan.total_bytes == decode_pool_kv_bytes(m, lays[1])
    assert plan.total_bytes == sum(kv_bytes_by_rank(m, lays[1])) * tp_d


def test_the_plan_cases_cover_every_model() -> None:
    # a TP that does not split a model's heads leaves that case out; never a whole model
    assert {c[0] for c in PLAN_CASES} == {"gpt-oss-120b", "qwen3-next-80b-a3b", "deepseek-v3.2",
                                         "kimi-k2", "qwen2.5-7b-1m"}
    assert len(PLAN_CASES) >= 13


def test_after_waits_for_the_whole_prefill_and_streamed_for_each_layer() -> None:
    case = SIMULATED[2]
    for mode in ("after", "streamed"):
        b = build_graph(_cfg(case, mode))
        res = b.run()
        moving = b.mask_of([KV_HANDOFF])
        prefill = ~b.mask_of([KV_HANDOFF, KV_HANDOFF + ".op", KV_HANDOFF + "_wait"])
        start = res.start_ns
        if mode == "after":
            assert start[moving].min() >= res.end_ns[prefill].max()
        else:
            # A layer's KV leaves a chip once that chip projected it (and not before).
            qkv = b.mask_of(["qkv_proj"])
            layer, chip = b.layer.astype(int), b.chip_of.astype(int)
            ready = {(int(layer[t]), int(chip[t])): int(res.end_ns[t])
                     for t in np.flatnonzero(qkv)}
            for t in np.flatnonzero(moving):
                assert start[t] >= ready[(int(layer[t]), int(chip[t]))]
            assert start[moving].min() < res.end_ns[prefill].max()


def test_streamed_hides_more_than_after_and_links_apart_leave_prefill_alone() -> None:
    """DeepSeek-V3 at 1M: the prefill pool fills a board, the decode pool sits on the next, so
    the handoff shares no link with the ring or the all-to-all: the prefill ends exactly when
    it does alone; streamed, nothing of the handoff is left after it."""
    case = SIMULATED[0]
    plain, _ = evaluate(replace(_cfg(case), handoff_to=None))
    streamed, _ = evaluate(_cfg(case, "streamed"))
    after, _ = evaluate(_cfg(case, "after"))
    assert streamed.handoff is not None and after.handoff is not None
    assert streamed.handoff.prefill_s == after.handoff.prefill_s == plain.latency_s
    assert streamed.handoff.handoff_s == 0.0 < after.handoff.handoff_s
    assert after.latency_s == pytest.approx(after.handoff.prefill_s + after.handoff.handoff_s)
    assert plain.key != streamed.key != after.key


def test_each_layers_handoff_is_one_operation_paying_its_fixed_cost() -> None:
    """Issue 12 stage 2's operations: per layer, every chip sending or receiving pays the
    level's point-to-point cost once (a task holding no resource), and each transfer waits for
    both ends' costs; under "after" the unhidden handoff grows by exactly the cost's change."""
    import json

    from ctxplan.config.hardware_presets import cluster_from_dict
    from tests.helpers.inputs import TINY_CLUSTER

    def cluster(op_us: float):  # type: ignore[no-untyped-def]
        data = json.loads(json.dumps(TINY_CLUSTER))
        for level in data["levels"]:
            level["op_overhead_us"] = op_us
        return cluster_from_dict(data, "tests", name=f"tiny-op-{op_us}")

    def cfg(op_us: float) -> EvalConfig:
        return api.eval_config("llama3.1-8b", "h100-sxm", 8192, "prefill", 3,
                               cluster=cluster(op_us), handoff_to=2, kv_handoff="after")

    b = build_graph(cfg(10.0))
    moving = np.flatnonzero(b.mask_of([KV_HANDOFF]))
    costs = b.mask_of([KV_HANDOFF + ".op"])
    g = b.graph
    assert not (np.diff(g.res_ptr)[costs]).any()          # they hold no resource
    assert set(g.duration_ns[costs].tolist()) == {10_000}
    deps = g.deps
    for t in moving:
        ends = {int(b.chip_of[d]) for d in deps[t] if costs[d]}
        assert ends == {int(b.chip_of[t]), int(b.peer[t])}
    for j in range(cfg(10.0).model.num_hidden_layers):
        in_layer = b.layer[moving] == j
        talking = (set(b.chip_of[moving][in_layer].tolist())
                   | set(b.peer[moving][in_layer].tolist()))
        assert int((costs & (b.layer == j)).sum()) == len(talking)
    cheap, _ = evaluate(cfg(10.0))
    dear, _ = evaluate(cfg(50.0))
    assert cheap.handoff is not None and dear.handoff is not None
    assert round((dear.handoff.handoff_s - cheap.handoff.handoff_s) * 1e9) == 40_000
    assert dear.handoff.bytes_moved == cheap.handoff.bytes_moved


# Small enough for the reference kernel: every kind's handoff path, and a cached prefix.
TILED = [
    SIMULATED[4],                                                           # GQA, MoE
    ("gpt-oss-20b", "b200", None, 3_001, 3, 1, 2, 2, 3, None),             # window -> homes
    ("qwen3-next-80b-a3b", "b200", None, 4_001, 3, 2, 2, 1, 3, None, 3_000),  # states, P
    ("deepseek-v3.2", "sg2262", None, 5_000, 3, 1, 2, 1, 1, None, 1_000),  # DSA, P
    (load_model("deepseek-v4-pro").first_layers(6), "b200", None, 5_000, 3, 1, 2, 1, 1,
     None, 1_000),                                                          # V4, P
]


def _handoff_graph(cfg: EvalConfig, tile: bool, mode: str) -> GraphBuilder:
    lay, lay_d = cfg.layout(), cfg.handoff_layout()
    assert lay_d is not None
    b = GraphBuilder(cfg.chip, cfg.cluster, decode_start(cfg.cluster, lay) + lay_d.n_chips)
    emit_prefill(b, cfg.model, lay, tile=tile)
    emit_handoff(b, cfg.model, replace(lay, policy=replace(lay.policy, kv_handoff=mode)),
                 lay_d)
    return b


@pytest.mark.parametrize("mode", ["streamed", "after"])
@pytest.mark.parametrize("case", TILED, ids=_case_id)
def test_tiled_layers_give_the_same_handoff_graph(case, mode) -> None:
    cfg = _cfg(case, mode)
    tiled, written = _handoff_graph(cfg, True, mode), _handoff_graph(cfg, False, mode)
    g, h = tiled.graph, written.graph
    for name in ("duration_ns", "tail_ns", "nbytes", "res_ptr", "res_idx"):
        assert np.array_equal(getattr(g, name), getattr(h, name)), name
    for a, c in zip(g.dependencies(), h.dependencies(), strict=True):
        assert np.array_equal(a, c)
    for name in ("kind", "chip_of", "peer", "layer", "step"):
        assert np.array_equal(np.asarray(getattr(tiled, name)),
                              np.asarray(getattr(written, name))), name
    # the compiled kernel runs the handoff exactly as the reference kernel does
    assert tiled.run() == written.run(kernel="reference")


def test_without_a_handoff_keys_are_unchanged() -> None:
    """A configuration without a handoff hashes as before the handoff existed (the store's
    results stay valid): the handoff fields are not in its key."""
    cfg = api.eval_config("llama3.1-8b", "h100-sxm", "8K", "decode", 2)
    assert cfg.with_policy(kv_handoff="after").key() == cfg.key()
    assert replace(cfg, phase="prefill", handoff_to=1).key() != replace(cfg, phase="prefill"
                                                                        ).key()


@pytest.mark.parametrize(("kw", "field"), [
    ({"phase": "decode", "handoff_to": 2}, "handoff_to"),
    ({"handoff_to": 1020}, "handoff_to"),            # the two pools exceed the cluster
    ({"handoff_to": 2, "kv_handoff": "off"}, "kv_handoff"),
    ({"handoff_to": 2, "handoff_tp": 3}, "tp"),       # 3 does not divide 32 heads
])
def test_bad_handoffs_are_input_errors(kw, field) -> None:
    phase = kw.pop("phase", "prefill")
    with pytest.raises(UserInputError) as err:
        api.eval_config("llama3.1-8b", "h100-sxm", "8K", phase, 8, **kw)
    assert err.value.field == field


def test_eval_cli_reports_the_handoff() -> None:
    import json

    from tests.helpers.cli import run_cli

    code, out, err = run_cli(["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm",
                              "--context", "8K", "--phase", "prefill", "--cp", "2",
                              "--handoff-to", "3", "--kv-handoff", "after", "--json",
                              "--no-store"])
    assert code == 0, err
    h = json.loads(out)["handoff"]
    # the decode pool on the next 8-GPU host, the prefill's two GPUs alone on theirs
    assert h["mode"] == "after" and h["decode_cp"] == 3 and h["first_decode_chip"] == 8
    assert h["bytes_moved"] == h["decode_kv_bytes"] > 0 and h["handoff_s"] > 0


def test_a_point_file_with_a_handoff(tmp_path) -> None:
    from tests.helpers.inputs import point_data, write_yaml

    data = point_data() | {"phase": "prefill", "handoff_to": 3, "handoff_tp": 1,
                           "kv_handoff": "after"}
    result = api.evaluate_point(write_yaml(tmp_path / "p.yaml", data))
    assert result.handoff is not None and result.handoff.decode_cp == 3
    assert result.handoff.mode == "after"
    assert result.handoff.bytes_moved == result.handoff.decode_kv_bytes


def _handoff_levels(cfg: EvalConfig) -> tuple[dict[int, int], int]:
    """Bytes of the handoff's transfers by the cluster level each crosses, and the decode
    pool's first chip."""
    b = build_graph(cfg)
    moving = np.flatnonzero(b.mask_of([KV_HANDOFF]))
    src, dst = b.chip_of[moving].astype(np.int64), b.peer[moving].astype(np.int64)
    levels = b.topology.levels_of(src, dst)
    out: dict[int, int] = {}
    for level, n in zip(levels.tolist(), b.graph.nbytes[moving].tolist(), strict=True):
        out[level] = out.get(level, 0) + int(n)
    result, _ = evaluate(cfg)
    assert result.handoff is not None
    return out, result.handoff.first_decode_chip


@pytest.mark.parametrize(("model", "chip", "np_", "tp_p", "nd", "tp_d"), [
    ("llama3.1-8b", "h100-sxm", 2, 1, 3, 1),        # both pools fit one 8-GPU host
    ("gpt-oss-20b", "b200", 2, 1, 2, 2),            # MoE, windows to their homes, TP 2
])
def test_pools_sit_on_hosts_of_their_own_unless_colocated(model, chip, np_, tp_p, nd,
                                                          tp_d) -> None:
    """Issue 25 item 4: by default the decode pool starts on the next host, so every byte of
    the handoff crosses the fabric above the host (as between separate prefill and decode
    machines); --colocate-pools packs it right after the prefill pool, where these small pools
    share one host and the handoff stays inside it. The same bytes move either way."""
    kw = dict(tp=tp_p, handoff_to=nd, handoff_tp=tp_d, kv_handoff="after")
    apart = api.eval_config(model, chip, "16K", "prefill", np_, **kw)
    packed = api.eval_config(model, chip, "16K", "prefill", np_, colocate_pools=True, **kw)
    by_level, first = _handoff_levels(apart)
    host = apart.cluster.host_size
    assert first == host
    above = [i for i, lv in enumerate(apart.cluster.levels) if lv.chips_per_group > host]
    assert set(by_level) <= set(above)
    by_level_packed, first_packed = _handoff_levels(packed)
    assert first_packed == np_ * tp_p and set(by_level_packed) == {0}
    assert sum(by_level.values()) == sum(by_level_packed.values()) \
        == decode_pool_kv_bytes(apart.model, apart.handoff_layout())
    # the fabric is slower than the host's links: apart, the handoff's unhidden part grows
    r_apart, _ = evaluate(apart)
    r_packed, _ = evaluate(packed)
    assert r_apart.handoff is not None and r_packed.handoff is not None
    assert r_apart.handoff.handoff_s > r_packed.handoff.handoff_s
    assert r_apart.key != r_packed.key


def test_a_replicated_latent_is_pulled_by_every_decode_tp_chip() -> None:
    """The copy rule where decode TP replicates MLA's latent: each TP chip of a decode rank
    pulls its own whole copy over the fabric (as NIXL-based engines pull per rank), not one
    copy fanned out inside the decode host; so the fabric carries tp_d copies."""
    cfg = api.eval_config("deepseek-v3", "sg2262", "16K", "prefill", 2, handoff_to=1,
                          handoff_tp=4, kv_handoff="after")
    b = build_graph(cfg)
    moving = np.flatnonzero(b.mask_of([KV_HANDOFF]))
    dst = b.peer[moving].astype(np.int64)
    first = decode_start(cfg.cluster, cfg.layout())
    per_chip = np.bincount(dst - first, weights=b.graph.nbytes[moving], minlength=4)
    one_copy = sum(kv_bytes_by_rank(cfg.model, cfg.handoff_layout()))
    assert per_chip.tolist() == [float(one_copy)] * 4
    assert (b.topology.levels_of(b.chip_of[moving].astype(np.int64), dst) > 0).all()


def test_a_cluster_names_its_host() -> None:
    from ctxplan.config.hardware_presets import load_cluster

    assert [load_cluster(n).host_size for n in
            ("hgx-h100-ib", "sg2262-c2c", "gb200-nvl72", "grand-teton-tcp")] == [8, 8, 4, 8]
    c = load_cluster("gb200-nvl72")
    assert (c.decode_start(5, False), c.decode_start(8, False), c.decode_start(5, True)) == \
        (8, 8, 5)


# Issue 25 item 3: the decode pool on another chip and cluster, the KV over the fabric joining
# the two clusters.
TWO_CLUSTERS = [
    ("deepseek-v3", "h20-96", "h20-141", 131_072, 2, 8, 1, 8),    # MoE, MLA replicated x 8
    ("llama3.1-70b", "h100-sxm", "h200", 40_000, 3, 4, 2, 8),     # GQA 4 -> 8
]


def _two(case, **kw) -> EvalConfig:  # type: ignore[no-untyped-def]
    model, chip, decode_chip, s, np_, tp_p, nd, tp_d = case
    return api.eval_config(model, chip, s, "prefill", np_, tp=tp_p, handoff_to=nd,
                           handoff_tp=tp_d, handoff_chip=decode_chip, kv_handoff="after", **kw)


@pytest.mark.parametrize("case", TWO_CLUSTERS, ids=lambda c: f"{c[0]}-{c[1]}-to-{c[2]}")
def test_a_pool_on_another_cluster_receives_exactly_what_it_keeps(case) -> None:
    cfg = _two(case)
    assert cfg.handoff_chip is not None and cfg.handoff_cluster is not None
    result, _ = evaluate(cfg)
    h = result.handoff
    assert h is not None and result.simulated
    assert (h.decode_chip, h.decode_cluster) == (cfg.handoff_chip.name,
                                                 cfg.handoff_cluster.name)
    assert h.first_decode_chip == 0          # the decode cluster's own chips from its first
    lay_d = cfg.handoff_layout()
    assert lay_d is not None
    assert h.bytes_moved == h.decode_kv_bytes == decode_pool_kv_bytes(cfg.model, lay_d)
    b = build_graph(cfg)
    moving = np.flatnonzero(b.mask_of([KV_HANDOFF]))
    src, dst = b.chip_of[moving].astype(np.int64), b.peer[moving].astype(np.int64)
    start = cfg.cluster.max_chips            # the joined rank order: the prefill's cluster first
    received = np.bincount(dst - start, weights=b.graph.nbytes[moving], minlength=lay_d.n_chips)
    per_rank = kv_bytes_by_rank(cfg.model, lay_d)
    assert received.tolist() == [float(per_rank[c // lay_d.tp]) for c in range(lay_d.n_chips)]
    assert set(src.tolist()) <= set(range(cfg.cp * cfg.tp))
    # every byte crosses the join, on the ports of the prefill cluster's outermost level
    top = len(b.topology.cluster.levels) - 1
    assert (b.topology.levels_of(src, dst) == top).all()
    assert b.topology.cluster.levels[top].port_level == len(cfg.cluster.levels) - 1


def test_a_join_with_the_same_fabric_moves_the_kv_as_the_next_host_does() -> None:
    """H20-96 prefill filling two hosts, decode on H20-141: the join's default is the slower
    outermost level, here InfiniBand on both sides with the same figures, reached through the
    same NIC ports, so the handoff takes what it takes to the next host of the prefill's own
    cluster, to the nanosecond."""
    case = TWO_CLUSTERS[0]
    apart, _ = evaluate(_two(case))
    same = _two(case)
    one, _ = evaluate(replace(same, handoff_chip=None, handoff_cluster=None))
    assert apart.handoff is not None and one.handoff is not None
    assert one.handoff.decode_cluster == same.cluster.name
    assert apart.handoff.handoff_s == one.handoff.handoff_s > 0
    assert apart.latency_s == one.latency_s and apart.key != one.key


def test_more_bandwidth_between_the_clusters_is_never_slower() -> None:
    case = TWO_CLUSTERS[0]
    handoff = []
    for gbps in (12.5, 25.0, 50.0, 100.0, 400.0):
        got, _ = evaluate(_two(case, handoff_link_gbps=gbps))
        assert got.handoff is not None and got.handoff.bytes_moved > 0
        handoff.append(got.latency_s)
    assert handoff == sorted(handoff, reverse=True) and handoff[0] > handoff[-1]


@pytest.mark.parametrize(("kw", "field"), [
    ({"handoff_to": 1, "handoff_link_gbps": 50.0}, "handoff_link_gbps"),   # one cluster
    ({"handoff_chip": "h200"}, "handoff_chip"),                            # no --handoff-to
    ({"handoff_to": 2, "handoff_tp": 4, "handoff_cluster": cluster_from_dict(
        {**TINY_CLUSTER_DATA, "levels": [TINY_CLUSTER_DATA["levels"][0]]}, "tests",
        name="one-board")}, "handoff_to"),                                 # 8 chips > 4
    ({"handoff_to": 1, "handoff_link_gbps": -1.0, "handoff_chip": "h200"}, "handoff_link_gbps"),
])
def test_bad_two_cluster_handoffs_are_input_errors(kw, field) -> None:
    with pytest.raises(UserInputError) as err:
        api.eval_config("llama3.1-8b", "h100-sxm", "8K", "prefill", 2, **kw)
    assert err.value.field == field


def test_the_same_chip_and_cluster_given_again_change_no_key() -> None:
    plain = api.eval_config("llama3.1-8b", "h100-sxm", "8K", "prefill", 2, handoff_to=2)
    again = api.eval_config("llama3.1-8b", "h100-sxm", "8K", "prefill", 2, handoff_to=2,
                            handoff_chip="h100-sxm", handoff_cluster="hgx-h100-ib")
    assert again == plain and again.key() == plain.key()


def test_eval_cli_hands_off_to_another_chip() -> None:
    import json

    from tests.helpers.cli import run_cli

    code, out, err = run_cli(["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm",
                              "--context", "8K", "--phase", "prefill", "--cp", "2",
                              "--handoff-to", "2", "--handoff-chip", "h200",
                              "--handoff-link-gbps", "25", "--json", "--no-store"])
    assert code == 0, err
    h = json.loads(out)["handoff"]
    assert (h["decode_chip"], h["decode_cluster"], h["first_decode_chip"]) == \
        ("h200", "hgx-h200-ib", 0)
    assert h["bytes_moved"] == h["decode_kv_bytes"] > 0
    code, out, err = run_cli(["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm",
                              "--context", "8K", "--phase", "prefill", "--cp", "2",
                              "--handoff-to", "2", "--handoff-link-gbps", "25"])
    assert code == 2 and "handoff_link_gbps" in err and "Traceback" not in err


def test_a_point_file_hands_off_to_a_pool_on_its_own_chip_and_cluster(tmp_path) -> None:
    """Point files take the decode pool's chip and cluster as presets, paths (relative to the
    file) or inline definitions, as they take the prefill's."""
    import yaml

    from ctxplan.config.model_presets import PRESET_DIR
    from tests.helpers.inputs import point_data, write_yaml

    presets = PRESET_DIR.parent
    chip_file = tmp_path / "decode-chip.yaml"
    chip_file.write_text((presets / "chips" / "h200.yaml").read_text()
                         .replace("name: h200\n", "name: my-decode-chip\n"))
    cluster = yaml.safe_load((presets / "clusters" / "hgx-h200-ib.yaml").read_text())
    cluster["name"] = "my-decode-cluster"
    data = point_data() | {"phase": "prefill", "handoff_to": 2, "kv_handoff": "after",
                           "handoff_chip": "decode-chip.yaml", "handoff_cluster": cluster}
    result = api.evaluate_point(write_yaml(tmp_path / "p.yaml", data))
    h = result.handoff
    assert h is not None and h.decode_cluster == "my-decode-cluster"
    assert h.decode_chip == "my-decode-chip" and h.bytes_moved == h.decode_kv_bytes > 0
