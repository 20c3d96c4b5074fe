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

``lay.policy.prefill_chunk`` is resolved before a graph is built (ctxplan.evaluate): "off", or
a whole number of tokens. "auto" (the user's default) is the evaluation's choice.
"""

from __future__ import annotations

from dataclasses import replace

from ctxplan.mapping.layout import Layout

OFF = "off"
AUTO = "auto"


def chunk_tokens(lay: Layout) -> int:
    """Tokens per chunk of the layout (its new tokens when unchunked)."""
    asked = lay.policy.prefill_chunk
    if not lay.is_prefill or asked in (OFF, AUTO):
        return lay.new_tokens
    return min(int(asked), lay.new_tokens)


def chunk_sizes(lay: Layout) -> list[int]:
    """The new tokens of each chunk, in order: equal chunks, the last one shorter."""
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
