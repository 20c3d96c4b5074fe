"""Chunked prefill: the prompt enters in chunks, one forward pass each (docs/mapping.md,
"Chunked prefill").

SGLang and vLLM prefill a long prompt in chunks (``--chunked-prefill-size``,
``max_num_batched_tokens``: 8K-32K tokens per forward pass on large GPUs), which bounds the
activations and the MoE all-to-all buffers of a pass by the chunk instead of the prompt. Chunk k
(0-based) of C tokens computes positions [P + k C, P + (k + 1) C) with the KV of everything
before it cached: it is the cached-prefix prefill the mapping already simulates, with P = the
earlier chunks (and any real cached prefix) and T = this chunk, placed over the CP ranks causally
balanced within the chunk (mapping/placement.py's zigzag over the chunk). The pool finishes chunk
k, every layer, before chunk k + 1 starts.

``lay.policy.prefill_chunk`` is resolved before a graph is built (ctxplan.evaluate): "off", a
whole number of tokens, or "dynamic:c0,c1,..." (the sizes :func:`dynamic_sizes` picked).
"auto" (the user's default) is the evaluation's choice.

Dynamic chunks (``dynamic:N``, from ``--prefill-chunk dynamic``; SGLang's dynamic chunking for
pipelined prefill): chunk k attends to everything before it, so equal chunks cost more and more
and a pipeline's stages stall behind the late ones. N chunks of decreasing size are picked so
that each costs about the same: a chunk of c tokens after x others costs
alpha c + Sum_layers pair_flops x pairs(c, x) FLOPs (alpha: the projections' and the FFN's FLOPs
per token over the layers; pairs: the (query, key) pairs its kind attends, model.kinds), and
the common cost is the least for which N such chunks cover the prompt (a bisection), the last
chunk taking what is left.
"""

from __future__ import annotations

from dataclasses import replace

from ctxplan.mapping.layout import Layout
from ctxplan.model.attention import attention_pair_flops
from ctxplan.model.kinds import attended_pairs
from ctxplan.model.linear import (
    attention_linears,
    dense_ffn_linears,
    expert_linears,
    shared_expert_linears,
)
from ctxplan.model.spec import SOFTMAX_LAYER_TYPES, ModelSpec

OFF = "off"
AUTO = "auto"
DYNAMIC = "dynamic"


def chunk_tokens(lay: Layout) -> int:
    """Tokens per chunk of the layout (its new tokens when unchunked; the first, largest,
    chunk of dynamic chunks)."""
    asked = lay.policy.prefill_chunk
    if not lay.is_prefill or asked in (OFF, AUTO):
        return lay.new_tokens
    if isinstance(asked, str) and asked.startswith(DYNAMIC):
        return chunk_sizes(lay)[0]
    return min(int(asked), lay.new_tokens)


def chunk_sizes(lay: Layout) -> list[int]:
    """The new tokens of each chunk, in order: equal chunks, the last one shorter (dynamic:
    decreasing, of about equal cost)."""
    asked = lay.policy.prefill_chunk
    if lay.is_prefill and isinstance(asked, str) and asked.startswith(DYNAMIC + ":"):
        return [int(x) for x in asked.split(":")[1].split(",")]
    c = chunk_tokens(lay)
    full, rest = divmod(lay.new_tokens, c)
    return [c] * full + ([rest] if rest else [])


def chunk_layouts(lay: Layout) -> list[Layout]:
    """The layout of each chunk: a cached-prefix prefill of its tokens after the earlier ones
    (one chunk: the layout itself, so ``off`` and a chunk of S tokens are the same graph)."""
    sizes = chunk_sizes(lay)
    if len(sizes) == 1:
        return [lay]
    out, done = [], lay.cached
    for c in sizes:
        out.append(replace(lay, context_length=done + c, cached=done))
        done += c
    return out


def dynamic_sizes(m: ModelSpec, lay: Layout, n_chunks: int) -> list[int]:
    """``n_chunks`` decreasing chunks of the layout's new tokens of about equal cost (the
    module docstring), at least one token each."""
    new, cached = lay.new_tokens, lay.cached
    n_chunks = max(1, min(n_chunks, new))
    pair_flops = attention_pair_flops(m, lay.mla_mode or "standard")
    alpha = 0.0
    softmax: dict[str, int] = {}
    for layer in range(m.num_hidden_layers):
        kind = m.layer_type(layer)
        alpha += sum(x.flops(1) for x in attention_linears(m, kind))
        if m.is_moe_layer(layer):
            assert m.moe is not None
            alpha += (m.moe.num_experts_per_tok * sum(x.flops(1) for x in expert_linears(m))
                      + sum(x.flops(1) for x in shared_expert_linears(m)))
        else:
            alpha += sum(x.flops(1) for x in dense_ffn_linears(m))
        if kind in SOFTMAX_LAYER_TYPES:
            softmax[kind] = softmax.get(kind, 0) + 1

    def cost(c: int, before: int) -> float:
        return alpha * c + pair_flops * sum(
            n * attended_pairs(m, kind, c, before) for kind, n in softmax.items())

    def largest(before: int, budget: float, left: int) -> int:
        """The largest chunk after ``before`` tokens costing at most ``budget`` (>= 1)."""
        lo, hi = 1, left
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if cost(mid, before) <= budget:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def cover(budget: float) -> list[int]:
        sizes, done = [], cached
        for _ in range(n_chunks):
            left = cached + new - done
            if not left:
                break
            c = largest(done, budget, left)
            sizes.append(c)
            done += c
        return sizes

    lo, hi = 0.0, cost(new, cached)
    for _ in range(60):   # bisection on the common cost: to well below one token's cost
        mid = (lo + hi) / 2
        if sum(cover(mid)) >= new:
            hi = mid
        else:
            lo = mid
    sizes = cover(hi)
    sizes[-1] += new - sum(sizes)   # rounding: the last chunk takes what is left
    return sizes
