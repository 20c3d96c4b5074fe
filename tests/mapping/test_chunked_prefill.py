"""Chunked prefill (mapping/chunking.py): conservation against the one-pass prefill, the CP
bytes in closed form summed over chunks, time never below one pass, and the auto policy."""

from __future__ import annotations

import numpy as np
import pytest

from ctxplan import api
from ctxplan.evaluate import build_graph, evaluate
from ctxplan.mapping import ops
from tests.mapping.mapping_helpers import c_kv_per_chip, model


def _cfg(chunk, *, S=24_000, cp=3, tp=2, cached=0, ring="pass-kv", name="llama3.1-8b",
         chip="h100-sxm", **kw):
    return api.eval_config(name, chip, S, "prefill", cp, tp=tp, cached=cached,
                           prefill_chunk=chunk, prefill_ring=ring, **kw)


def _attention_flops(cfg) -> float:
    b = build_graph(cfg)
    return float(b.flops[b.mask_of([ops.PASS_KV_ATTN])].sum())


@pytest.mark.parametrize("chunk", [4096, 5000, 23_999])
def test_attention_flops_of_a_chunked_prefill_equal_one_pass(chunk):
    """Chunk k's queries against the keys of chunks 1..k cover the causal triangle once."""
    assert _attention_flops(_cfg(chunk)) == _attention_flops(_cfg("off"))


@pytest.mark.parametrize("chunk,cached", [(4096, 0), (7000, 3000)])
def test_cp_bytes_of_a_chunked_prefill_equal_the_closed_form_summed_over_chunks(chunk, cached):
    """Pass-KV: each chunk's ring moves (Np - 1) x its KV tokens (the earlier chunks' and its
    own) x c_kv per chip, per layer and TP ring."""
    S, cp, tp = 24_000, 3, 2
    cfg = _cfg(chunk, S=S, cp=cp, tp=tp, cached=cached)
    got, _ = evaluate(cfg)
    m = model("llama3.1-8b")
    c_kv = c_kv_per_chip(m, cfg.kv()[1], tp)
    expected, done = 0, cached
    while done < S:
        c = min(chunk, S - done)
        expected += m.num_hidden_layers * (cp - 1) * (done + c) * c_kv * tp
        done += c
    assert got.comm.simulated_bytes == got.comm.analytic_bytes == expected
    assert got.prefill_chunk.chunks == -(-(S - cached) // chunk)


@pytest.mark.parametrize("kw", [
    dict(),                                                        # GQA, TP2
    dict(name="deepseek-v3", chip="sg2262", cp=8, tp=1, S=20_000),  # MLA + MoE EP
    dict(name="qwen3-235b-a22b", S=12_000, cp=2, tp=4, cluster="hgx-h100-ib"),  # MoE, hosts
    dict(cached=9000, ring="pass-q"),                              # pass-Q chunks
])
def test_a_chunked_ttft_is_never_below_one_pass_on_the_same_layout(kw):
    one, _ = evaluate(_cfg("off", **kw))
    for chunk in (2048, 6000):
        chunked, _ = evaluate(_cfg(chunk, **kw))
        assert chunked.latency_s >= one.latency_s


def test_one_chunk_of_the_whole_prompt_is_the_one_pass_graph_task_for_task():
    whole, off = build_graph(_cfg(24_000)), build_graph(_cfg("off"))
    g, h = whole.graph, off.graph
    assert g.n_tasks == h.n_tasks
    for name in ("duration_ns", "tail_ns", "nbytes", "res_ptr", "res_idx"):
        assert np.array_equal(getattr(g, name), getattr(h, name)), name
    assert whole.run() == off.run()


def test_chunks_run_one_after_another():
    """No task of chunk k + 1 starts before every task of chunk k has ended."""
    b = build_graph(_cfg(8000))
    res = b.run()
    barriers = np.flatnonzero(b.mask_of(["chunk_barrier"]))
    assert len(barriers) == 2
    for t in barriers:
        assert res.end_ns[:t].max() <= res.start_ns[t + 1:].min()


def test_auto_chunks_only_what_does_not_fit_in_one_pass():
    small, _ = evaluate(_cfg("auto"))
    assert small.prefill_chunk.chunks == 1 and small.memory.fits
    assert "fits" in small.prefill_chunk.why


def test_the_headline_1m_prefill_fits_by_its_simulated_peak_only_in_chunks():
    """Issue 22's targets: DeepSeek-V3 on 8 SG2262 at 1M, MLA FP8. In one pass the dispatch
    and combine buffers of 131,072 tokens per rank make the transient peak >= 20 GB and the
    chip over its 128 GB; auto chunks it and the transient peak is under 8 GB."""
    kw = dict(name="deepseek-v3", chip="sg2262", S=2**20, cp=8, tp=1, kv_tier="mla-fp8")
    one, _ = evaluate(_cfg("off", **kw))
    assert one.memory.transient_peak_bytes >= 20e9 and not one.memory.fits
    assert one.latency_s is not None    # over by its peak: simulated, its latency kept
    auto, _ = evaluate(_cfg("auto", **kw))
    assert auto.memory.fits and auto.memory.transient_peak_bytes < 8e9
    assert auto.prefill_chunk.chunks > 1 and auto.prefill_chunk.tokens == 16384
    assert auto.latency_s >= one.latency_s


def test_the_periodic_shortcut_leaves_a_chunked_prefill_to_the_full_simulation():
    """A chunked prefill's layers repeat per chunk, so the opt-in shortcut (which reads one
    period from the layer numbers) is not taken: the same figures as without it."""
    full, _ = evaluate(_cfg(8000, name="deepseek-v3", chip="sg2262", cp=8, tp=1, S=20_000))
    short, _ = evaluate(_cfg(8000, name="deepseek-v3", chip="sg2262", cp=8, tp=1, S=20_000,
                             periodic_shortcut=True))
    assert short.latency_s == full.latency_s and short.layers_simulated == 61
    assert short.memory == full.memory
