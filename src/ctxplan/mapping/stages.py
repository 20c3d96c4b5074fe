"""Pipeline stages: which contiguous layers each stage holds (docs/mapping.md, "Pipeline
parallelism").

Engines split a model's layers into PP contiguous ranges, uneven where the count does not
divide (SGLang and vLLM put the remainder on the first stages: 61 layers over 4 stages run as
16/15/15/15). ctxplan balances the ranges by a closed-form cost per layer at the chip's rates, so
a layer that costs more (a MoE layer next to the dense first ones, a full-attention layer among
windowed ones), the embedding on the first stage and the LM head on the last weigh where they
are:

* a layer's cost is max(FLOPs / peak, HBM bytes / bandwidth) of one stage chip's share of it:
  the projections and the FFN (the dense SwiGLU, or the routed experts its tokens touch plus the
  shared ones) over the phase's tokens, the attention core over the pairs its kind attends
  (prefill) or the KV it reads (decode), each part's weights streamed once;
* the embedding (a gather of the tokens' rows) counts on the first stage, the LM head (the last
  position of each sequence in prefill, every token in decode) and the MTP layers a decode
  drafts with on the last.

The split minimises the costliest stage; among splits as good, the most even one (the least
sum of squared stage costs), then the one with the earlier stages larger. Costs are rounded to
whole picoseconds first, so the comparison is exact and the split deterministic.
"""

from __future__ import annotations

from functools import lru_cache

from ctxplan.hardware.chip import Chip
from ctxplan.mapping.layout import Layout
from ctxplan.model.attention import attention_pair_flops
from ctxplan.model.kinds import attended_pairs, layer_kv_bytes
from ctxplan.model.linear import (
    attention_linears,
    dense_ffn_linears,
    expert_linears,
    lm_head_linear,
    shared_expert_linears,
)
from ctxplan.model.params import bytes_per_param
from ctxplan.model.spec import SOFTMAX_LAYER_TYPES, ModelSpec

PS_PER_S = 10**12


def _seconds(chip: Chip, flops: float, dtype: str, mem_bytes: float) -> float:
    peak = chip.peak_flops_per_s.get(dtype) or max(chip.peak_flops_per_s.values())
    return max(flops / peak, mem_bytes / chip.memory_bandwidth_bytes_per_s)


def layer_costs(m: ModelSpec, lay: Layout, chip: Chip) -> list[float]:
    """Seconds per layer of one stage chip's share, by the closed form of the module
    docstring (the embedding added to layer 0's cost, the LM head to the last layer's)."""
    p = lay.precision
    w = lay.stage_chips
    tp = lay.tp
    tokens = lay.batch * (lay.new_tokens if lay.is_prefill else 1)
    att_b = bytes_per_param(p.attention_weights)
    ffn_b = bytes_per_param(p.ffn_weights)
    att_dtype = p.matmul_dtype(p.attention_weights)
    ffn_dtype = p.matmul_dtype(p.ffn_weights)
    pair_flops = attention_pair_flops(m, lay.mla_mode or "standard")

    def linears_cost(linears: list, n_tokens: float, share: float, wbytes: float,
                     dtype: str) -> float:
        params = sum(x.params for x in linears) / share
        return _seconds(chip, 2.0 * params * n_tokens, dtype, params * wbytes)

    dense = dense_ffn_linears(m)
    costs: list[float] = []
    # A layer's cost depends on its kind and on whether it is a MoE layer alone: each pair is
    # costed once (made fast on purpose: a search stages many layouts).
    seen: dict[tuple[str, bool], float] = {}
    for layer in range(m.num_hidden_layers):
        kind = m.layer_type(layer)
        key = (kind, m.is_moe_layer(layer))
        if key in seen:
            costs.append(seen[key])
            continue
        cost = linears_cost(attention_linears(m, kind), tokens / lay.cp, tp, att_b, att_dtype)
        if lay.is_prefill:
            if kind in SOFTMAX_LAYER_TYPES:
                pairs = attended_pairs(m, kind, lay.new_tokens, lay.cached) * lay.batch
                cost += _seconds(chip, pairs * pair_flops / w, p.attention, 0.0)
        else:
            kv = layer_kv_bytes(m, kind, lay.context_length, lay.c_kv_bytes) * lay.batch
            cost += _seconds(chip, 0.0, p.attention, kv / w)
        if m.is_moe_layer(layer):
            assert m.moe is not None
            expert = sum(x.params for x in expert_linears(m))
            touched = min(m.moe.n_routed_experts, tokens * m.moe.num_experts_per_tok)
            flops = 2.0 * tokens * m.moe.num_experts_per_tok * expert / w
            cost += _seconds(chip, flops, ffn_dtype, touched * expert * ffn_b / w)
            cost += linears_cost(shared_expert_linears(m), tokens / lay.cp, tp, ffn_b,
                                 ffn_dtype)
        else:
            cost += linears_cost(dense, tokens / lay.cp, tp, ffn_b, ffn_dtype)
        seen[key] = cost
        costs.append(cost)
    act = p.activation_bytes
    costs[0] += _seconds(chip, 0.0, p.attention, tokens / lay.cp * m.hidden_size * act)
    head_rows = lay.batch if lay.is_prefill else tokens
    costs[-1] += linears_cost([lm_head_linear(m)], head_rows, tp, 2, "bf16")
    if not lay.is_prefill and lay.policy.mtp_speculation and m.mtp_layer_types:
        costs[-1] += len(m.mtp_layer_types) * costs[-2 if len(costs) > 1 else -1]
    return costs


@lru_cache(maxsize=256)
def balanced_split(costs_ps: tuple[int, ...], pp: int) -> tuple[tuple[int, int], ...]:
    """The (first, last) layers of ``pp`` contiguous non-empty stages of layers costing
    ``costs_ps`` (whole picoseconds): the least costliest stage, then the least sum of squared
    stage costs, then the earlier stages larger (module docstring)."""
    n = len(costs_ps)
    if not 1 <= pp <= n:
        raise ValueError(f"pp must be in [1, {n}], got {pp}")
    prefix = [0]
    for c in costs_ps:
        prefix.append(prefix[-1] + c)

    # best[s][j]: (max, sum of squares) of the first j layers in s stages; choice[s][j]: the
    # start of the last of them. Scanning the last stage's start from the right keeps, on a
    # tie, the shortest last stage: the earlier stages larger.
    inf = (float("inf"), float("inf"))
    best = [[inf] * (n + 1) for _ in range(pp + 1)]
    choice = [[0] * (n + 1) for _ in range(pp + 1)]
    best[0][0] = (0, 0)
    for s in range(1, pp + 1):
        before_s = best[s - 1]
        for j in range(s, n - (pp - s) + 1):
            top = inf
            pick = 0
            end = prefix[j]
            for i in range(j - 1, s - 2, -1):
                c = end - prefix[i]   # the last stage: layers i .. j - 1
                # The last stage only grows as its start moves left: once it alone costs more
                # than the best split's costliest stage, no earlier start can win (ties are
                # still weighed). Made fast on purpose: a search stages many layouts.
                if c > top[0]:
                    break
                before = before_s[i]
                if before is inf:
                    continue
                cand = (before[0] if before[0] > c else c, before[1] + c * c)
                if cand < top:
                    top, pick = cand, i
            best[s][j], choice[s][j] = top, pick
    out = []
    j = n
    for s in range(pp, 0, -1):
        i = choice[s][j]
        out.append((i, j - 1))
        j = i
    return tuple(reversed(out))


def pipeline_stages(m: ModelSpec, lay: Layout, chip: Chip) -> tuple[tuple[int, int], ...]:
    """The stages of ``lay.pp`` for ``lay``'s phase on ``chip`` (() when pp = 1)."""
    if lay.pp == 1:
        return ()
    return _balanced_stages(m, lay, chip)


# Memoised: a search builds the same pipelined layout many times (every memory check and host
# budget estimate of a candidate), and costing every layer takes milliseconds. The inputs are
# frozen dataclasses, so equal inputs give the equal split.
@lru_cache(maxsize=4096)
def _balanced_stages(m: ModelSpec, lay: Layout, chip: Chip) -> tuple[tuple[int, int], ...]:
    costs = layer_costs(m, lay.stage_layout(), chip)
    return balanced_split(tuple(round(c * PS_PER_S) for c in costs), lay.pp)


def stage_of_layer(lay: Layout, layer: int) -> int:
    """The stage holding ``layer`` (0 when pp = 1)."""
    for s, (a, b) in enumerate(lay.stages):
        if a <= layer <= b:
            return s
    return 0
