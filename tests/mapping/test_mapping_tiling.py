"""Tiling repeated layers builds the same graph as writing every layer out, task for task, and
the compiled kernel runs real graphs exactly as the reference kernel does."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ctxplan import api
from ctxplan.mapping.builder import GraphBuilder
from ctxplan.mapping.decode import emit_decode
from ctxplan.mapping.prefill import emit_prefill
from tests.model.family_specs import DEEPSEEK_V4_FLASH, DEEPSEEK_V4_PRO, LLAMA4_SCOUT

SCOUT = dataclasses.replace(LLAMA4_SCOUT, attention_chunk_size=512).first_layers(9)
# DeepSeek-V4: 3 hash-routed layers first, then CSA / HCA alternating (tiled from layer 3)
V4_PRO = DEEPSEEK_V4_PRO.first_layers(11)
V4_FLASH = DEEPSEEK_V4_FLASH.first_layers(10)

CONFIGS = [
    # model, chip, cluster, context, phase, cp, tp, batch, pass_q, cached, prefill ring
    ("deepseek-v3", "sg2262", None, 5000, "prefill", 4, 1, 1, "broadcast", 0, "pass-kv"),
    ("deepseek-v3", "h200", None, 3001, "decode", 3, 8, 2, "ring", 0, "pass-kv"),  # TP8
    ("deepseek-v3", "sg2262", "hgx-h100-ib", 999, "prefill", 2, 8, 1, "broadcast", 0,
     "pass-kv"),                                                                # hosts
    ("qwen3-235b-a22b", "h100-sxm", None, 2048, "decode", 5, 4, 3, "broadcast", 0, "pass-kv"),
    ("llama3.1-8b", "h100-gt500", "grand-teton-rdma", 4096, "prefill", 3, 8, 1, "broadcast", 0,
     "pass-kv"),
    ("llama3.1-8b", "h100-sxm", None, 7, "prefill", 5, 1, 1, "broadcast", 0, "pass-kv"),
    # every prefill path of the kinds (issue 15 / 16): halo, state chain, DSA ring, pass-Q
    ("gpt-oss-20b", "h100-sxm", None, 9000, "prefill", 3, 2, 1, "broadcast", 0, "pass-kv"),
    ("gpt-oss-20b", "h100-sxm", None, 9000, "prefill", 3, 1, 2, "broadcast", 8000, "pass-q"),
    ("qwen3-next-80b-a3b", "h100-sxm", None, 6000, "prefill", 4, 2, 1, "broadcast", 0,
     "pass-kv"),
    ("qwen3-next-80b-a3b", "h100-sxm", None, 6000, "prefill", 2, 1, 1, "broadcast", 5000,
     "pass-q"),
    ("deepseek-v3.2", "sg2262", None, 5000, "prefill", 3, 1, 1, "broadcast", 1000, "pass-kv"),
    (SCOUT, "h100-sxm", None, 3000, "prefill", 3, 2, 1, "broadcast", 700, "pass-kv"),
    ("deepseek-v3", "sg2262", None, 5000, "prefill", 4, 1, 1, "broadcast", 4000, "pass-q"),
    # Meta's pass-Q ring across hosts (Table 8's layout), with more sequences than ranks, and
    # one rank (no pass-Q, no merge).
    ("llama3.1-8b", "h100-gt500", "grand-teton-rdma", 9000, "decode", 2, 8, 1, "ring", 0,
     "pass-kv"),
    ("llama3.1-8b", "h100-sxm", "hgx-h100-ib", 3000, "decode", 3, 4, 5, "ring", 0, "pass-kv"),
    ("qwen3-235b-a22b", "h100-sxm", None, 2048, "decode", 1, 4, 1, "ring", 0, "pass-kv"),
    # every decode path of the kinds: windows and states on the homes beside pass-Q, DSA's
    # exact top-k (S > k, S <= k, one rank)
    ("gpt-oss-20b", "h100-sxm", None, 9000, "decode", 3, 2, 5, "broadcast", 0, "pass-kv"),
    ("gpt-oss-20b", "h100-sxm", "hgx-h100-ib", 9000, "decode", 4, 4, 2, "ring", 0, "pass-kv"),
    ("qwen3-next-80b-a3b", "h100-sxm", None, 6000, "decode", 3, 2, 2, "broadcast", 0,
     "pass-kv"),
    (SCOUT, "h100-sxm", None, 3000, "decode", 3, 2, 1, "broadcast", 0, "pass-kv"),
    ("deepseek-v3.2", "sg2262", None, 5000, "decode", 3, 1, 4, "broadcast", 0, "pass-kv"),
    ("deepseek-v3.2", "h200", "hgx-h200-ib", 1500, "decode", 2, 8, 1, "ring", 0, "pass-kv"),
    ("deepseek-v3.2", "sg2262", None, 5000, "decode", 1, 1, 2, "broadcast", 0, "pass-kv"),
    # DeepSeek-V4's kinds: both prefill patterns (with a cached prefix), decode both ways
    (V4_PRO, "b200", None, 5000, "prefill", 3, 2, 1, "broadcast", 0, "pass-kv"),
    (V4_FLASH, "b200", None, 5000, "prefill", 3, 1, 2, "broadcast", 1000, "all-gather"),
    (V4_PRO, "b200", None, 9000, "decode", 3, 2, 2, "broadcast", 0, "pass-kv"),
    (V4_FLASH, "b200", "hgx-b200-ib", 9000, "decode", 2, 8, 3, "ring", 0, "pass-kv"),
]


def _name(c: tuple) -> str:
    model = c[0] if isinstance(c[0], str) else c[0].name
    return f"{model}-{c[4]}-S{c[3]}-cp{c[5]}-tp{c[6]}-b{c[7]}-P{c[9]}-{c[10]}"


def _build(case, tile: bool) -> GraphBuilder:
    model, chip, cluster, context, phase, cp, tp, batch, pass_q, cached, ring = case
    cfg = api.eval_config(model, chip, context, phase, cp, cluster=cluster, tp=tp,
                          batch=batch, pass_q=pass_q, cached=cached, prefill_ring=ring)
    lay = cfg.layout()
    b = GraphBuilder(cfg.chip, cfg.cluster, lay.n_chips)
    (emit_prefill if lay.is_prefill else emit_decode)(b, cfg.model, lay, tile=tile)
    return b


@pytest.mark.parametrize("case", CONFIGS, ids=_name)
def test_tiled_graph_equals_written_out_graph(case):
    tiled, written = _build(case, True), _build(case, False)
    g, h = tiled.graph, written.graph
    assert g.n_tasks == h.n_tasks
    for name in ("duration_ns", "tail_ns", "nbytes", "res_ptr", "res_idx"):
        assert np.array_equal(getattr(g, name), getattr(h, name)), name
    for a, b in zip(g.dependencies(), h.dependencies(), strict=True):
        assert np.array_equal(a, b)
    for name in ("kind", "chip_of", "peer", "layer", "step", "flops"):
        assert np.array_equal(np.asarray(getattr(tiled, name)),
                              np.asarray(getattr(written, name))), name
    assert g.resource_names == h.resource_names


@pytest.mark.parametrize("case", CONFIGS, ids=_name)
def test_compiled_kernel_equals_reference_on_real_graphs(case):
    compiled = _build(case, True).run()
    reference = _build(case, True).run(kernel="reference")
    assert compiled == reference   # every task's start and end, busy time, bytes, events
