"""A lower bound on TTFT that needs no simulation: the compute every prefill must do, at peak.

Used by the TTFT search (docs/solver.md, "The TTFT search") to skip Np that cannot meet the
target and to place its first probe; never reported as a latency.

Why it is a bound the simulated TTFT can never beat:

* the simulator times every compute op as ``max(flops / (peak * e), bytes / (bw * e_mem))``
  plus an overhead, with each efficiency ``e`` in (0, 1] (``hardware/chip.py``, checked when a
  chip is built), so an op takes at least ``flops / peak`` of its dtype;
* each chip has one compute resource (``mapping/builder.py``), so the busiest chip is busy for
  at least the pool's compute time divided by its chips, and TTFT >= that busy time;
* the FLOPs counted here are a subset of what the prefill graph computes for every new token
  (the S - P after a cached prefix P): the attention core of each softmax layer over the pairs
  its kind attends
  (``model.kinds.attended_pairs``: causal for full attention, capped for sliding / chunked /
  DSA layers; a CP ring computes exactly these pairs, split over ranks) at the attention dtype,
  and each layer's FFN (the dense SwiGLU, or top-k routed experts plus the shared ones) at the
  peak its weights' matmuls run at (``Precision.matmul_dtype``: FP8 weights at the FP8
  peak). Projections, routers, norms, linear-attention layers, the LM head and all
  communication are left out, which only loosens the bound.

``tests/solve/test_solve_roofline.py`` checks simulated >= bound on dense, MoE, MLA, TP and
cross-host configurations.
"""

from __future__ import annotations

from ctxplan.evaluate import EvalConfig
from ctxplan.model.attention import attention_pair_flops
from ctxplan.model.kinds import attended_pairs
from ctxplan.model.linear import dense_ffn_linears, expert_linears, shared_expert_linears
from ctxplan.model.spec import SOFTMAX_LAYER_TYPES


def prefill_work_s(cfg: EvalConfig) -> float:
    """Seconds of compute at peak that one prefill of ``cfg``'s batch needs in all (one chip)."""
    m = cfg.model
    lay = cfg.layout()
    peaks = cfg.chip.peak_flops_per_s
    precision = lay.precision.on_chip(tuple(peaks))
    ffn_dtype = precision.matmul_dtype(precision.ffn_weights)   # the peak FFN matmuls run at
    # The new tokens only: a cached prefix's KV is read, never recomputed (its FFN is not run,
    # and its queries attend nothing).
    T, P, b = lay.new_tokens, lay.cached, cfg.batch
    pair_flops = attention_pair_flops(m, lay.mla_mode or "standard")
    dense_ffn = sum(x.flops(1) for x in dense_ffn_linears(m))
    moe_ffn = 0.0
    if m.moe is not None:
        moe_ffn = (m.moe.num_experts_per_tok * sum(x.flops(1) for x in expert_linears(m))
                   + sum(x.flops(1) for x in shared_expert_linears(m)))
    attention_flops = 0.0
    ffn_flops = 0.0
    for layer in range(m.num_hidden_layers):
        kind = m.layer_type(layer)
        if kind in SOFTMAX_LAYER_TYPES:   # a linear layer attends no (query, key) pairs
            attention_flops += attended_pairs(m, kind, T, P) * pair_flops
        ffn_flops += T * (moe_ffn if m.is_moe_layer(layer) else dense_ffn)
    return b * (attention_flops / peaks[precision.attention]
                + ffn_flops / peaks[ffn_dtype])


def ttft_lower_bound_s(cfg: EvalConfig) -> float:
    """TTFT can never be below this: the prefill's compute at peak, spread evenly over every
    chip of the pool (PP * Np * tp: a pipeline's stages share the layers, each chip still one
    compute resource)."""
    return prefill_work_s(cfg) / (cfg.pp * cfg.cp * cfg.tp)
