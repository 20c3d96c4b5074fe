"""Tiling repeated layers builds the same graph as writing every layer out, task for task, and
the compiled kernel runs real graphs exactly as the reference kernel does."""

from __future__ import annotations

import numpy as np
import pytest

from ctxplan import api
from ctxplan.mapping.builder import GraphBuilder
from ctxplan.mapping.decode import emit_decode
from ctxplan.mapping.prefill import emit_prefill

CONFIGS = [
    # model, chip, cluster, context, phase, cp, tp, batch, pass_q
    ("deepseek-v3", "sg2262", None, 5000, "prefill", 4, 1, 1, "broadcast"),      # MoE, MLA
    ("deepseek-v3", "h200", None, 3001, "decode", 3, 8, 2, "ring"),              # MoE + TP8
    ("deepseek-v3", "sg2262", "hgx-h100-ib", 999, "prefill", 2, 8, 1, "broadcast"),  # hosts
    ("qwen3-235b-a22b", "h100-sxm", None, 2048, "decode", 5, 4, 3, "broadcast"),
    ("llama3.1-8b", "h100-gt500", "grand-teton-rdma", 4096, "prefill", 3, 8, 1, "broadcast"),
    ("llama3.1-8b", "h100-sxm", None, 7, "prefill", 5, 1, 1, "broadcast"),      # S < 2 Np
    # Meta's pass-Q ring across hosts (Table 8's layout), with more sequences than ranks, and
    # one rank (no pass-Q, no merge).
    ("llama3.1-8b", "h100-gt500", "grand-teton-rdma", 9000, "decode", 2, 8, 1, "ring"),
    ("llama3.1-8b", "h100-sxm", "hgx-h100-ib", 3000, "decode", 3, 4, 5, "ring"),
    ("qwen3-235b-a22b", "h100-sxm", None, 2048, "decode", 1, 4, 1, "ring"),
]


def _build(case, tile: bool) -> GraphBuilder:
    model, chip, cluster, context, phase, cp, tp, batch, pass_q = case
    cfg = api.eval_config(model, chip, context, phase, cp, cluster=cluster, tp=tp,
                          batch=batch, pass_q=pass_q)
    lay = cfg.layout()
    b = GraphBuilder(cfg.chip, cfg.cluster, lay.n_chips)
    (emit_prefill if lay.is_prefill else emit_decode)(b, cfg.model, lay, tile=tile)
    return b


@pytest.mark.parametrize("case", CONFIGS, ids=lambda c: f"{c[0]}-{c[4]}-cp{c[5]}-tp{c[6]}")
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


@pytest.mark.parametrize("case", CONFIGS, ids=lambda c: f"{c[0]}-{c[4]}-cp{c[5]}-tp{c[6]}")
def test_compiled_kernel_equals_reference_on_real_graphs(case):
    compiled = _build(case, True).run()
    reference = _build(case, True).run(kernel="reference")
    assert compiled == reference   # every task's start and end, busy time, bytes, events
