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

from ctxplan.evaluate import EvalConfig, chunk_schedules
from ctxplan.model.attention import attention_pair_flops
from ctxplan.model.kinds import attended_pairs
from ctxplan.model.linear import dense_ffn_linears, expert_linears, shared_expert_linears
from ctxplan.model.spec import SOFTMAX_LAYER_TYPES, ModelSpec


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
    dense_ffn, moe_ffn = _ffn_flops_per_token(m)
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
    compute resource); with pipeline stages, the larger :func:`pipeline_bound_s`."""
    flat = prefill_work_s(cfg) / (cfg.pp * cfg.cp * cfg.tp)
    return max(flat, pipeline_bound_s(cfg)) if cfg.pp > 1 else flat


def pipeline_bound_s(cfg: EvalConfig) -> float:
    """The pipelined prefill's bound: for every chunk schedule the prefill may run
    (``evaluate.chunk_schedules``), the least of

        max over stages j of  sum_k t(j, k) + sum_{s > j} t(s, K)

    where t(s, k) is stage s's compute for chunk k at peak over its Np * tp chips and K the
    last chunk. Why the simulation can never beat it (mapping/prefill.py, ``_emit_pipeline``):
    a stage starts chunk k only once it has finished chunk k - 1 (every compute task of a
    chunk on a stage leads to the chunk's output there), so stage j's busiest chip, with at
    least the stage's average work, has done all of it by the time chunk K leaves stage j;
    every task of chunk K on stage s > j waits for chunk K's activations from stage s - 1,
    and the busiest chip of stage s does at least t(s, K) of it before chunk K leaves. Later
    chunks attend to more context, so with equal chunks the last one's passage through the
    stages after j is what the pipeline cannot overlap (docs/solver.md, "The TTFT search")."""
    m = cfg.model
    lay = cfg.layout()
    peaks = cfg.chip.peak_flops_per_s
    precision = lay.precision.on_chip(tuple(peaks))
    attn_peak = peaks[precision.attention]
    ffn_peak = peaks[precision.matmul_dtype(precision.ffn_weights)]
    pair_flops = attention_pair_flops(m, lay.mla_mode or "standard")
    dense_ffn, moe_ffn = _ffn_flops_per_token(m)
    stage_chips = cfg.cp * cfg.tp
    layers = [(m.layer_type(j), moe_ffn if m.is_moe_layer(j) else dense_ffn)
              for j in range(m.num_hidden_layers)]
    ranges = lay.stage_ranges(m.num_hidden_layers)

    def t(stage: range, new: int, before: int) -> float:
        attention = sum(attended_pairs(m, kind, new, before) * pair_flops
                        for kind, _ in (layers[j] for j in stage)
                        if kind in SOFTMAX_LAYER_TYPES)
        ffn = new * sum(layers[j][1] for j in stage)
        return cfg.batch * (attention / attn_peak + ffn / ffn_peak) / stage_chips

    best = float("inf")
    for chunks in chunk_schedules(cfg):
        work = [[t(stage, new, before) for new, before in chunks] for stage in ranges]
        tails = [w[-1] for w in work]
        bound = max(sum(work[j]) + sum(tails[j + 1:]) for j in range(len(ranges)))
        best = min(best, bound)
    return best


def _ffn_flops_per_token(m: ModelSpec) -> tuple[float, float]:
    """FLOPs per token of a dense FFN layer and of a MoE layer (top-k routed experts and the
    shared ones)."""
    dense = sum(x.flops(1) for x in dense_ffn_linears(m))
    moe = 0.0
    if m.moe is not None:
        moe = (m.moe.num_experts_per_tok * sum(x.flops(1) for x in expert_linears(m))
               + sum(x.flops(1) for x in shared_expert_linears(m)))
    return dense, moe
