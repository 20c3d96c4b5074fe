"""Which attention kinds the emitters simulate, and the one error for the others.

Prefill simulates every kind with its own context-parallel pattern (:mod:`ctxplan.mapping.
prefill`: pass-KV or pass-Q for full attention, a halo exchange for sliding-window and chunked
layers, the pass-KV ring with the indexer keys for DSA, a state chain for linear attention).

Decode (:mod:`ctxplan.mapping.decode`) still writes every layer as full attention: the query
against every cached token. That is exact for full attention, and also for a sliding-window or
chunked layer whose window or chunk holds the whole context (S <= w: a query at position i < S
sees every j <= i, since i - w < 0; S <= c: every token sits in chunk 0). Anything else (a
window shorter than S, a linear-attention layer, DSA's indexer and top-k) would be simulated as
something it is not, so a decode evaluation refuses it with one ``UserInputError`` naming
``layer_types``. Memory (``memory_report``, the solver's capacity wall) counts every kind
already and needs no simulation. Per-kind decode (issue 16) replaces this check kind by kind.
"""

from __future__ import annotations

from ctxplan.errors import UserInputError
from ctxplan.model.spec import CHUNKED_ATTENTION, FULL_ATTENTION, SLIDING_ATTENTION, ModelSpec


def _span(m: ModelSpec, layer_type: str) -> int | None:
    """The tokens a layer of a windowed kind can see (None for the other kinds)."""
    if layer_type == SLIDING_ATTENTION:
        return m.sliding_window
    if layer_type == CHUNKED_ATTENTION:
        return m.attention_chunk_size
    return None


def unsimulated_kinds(m: ModelSpec, context_length: int,
                      phase: str = "decode") -> dict[str, int]:
    """The attention kinds of ``m`` (with their layer counts) that the emitters of ``phase``
    cannot simulate exactly at ``context_length`` tokens: none in prefill; in decode every kind
    but full attention, except a windowed kind whose window (chunk) holds the whole context."""
    if phase == "prefill":
        return {}
    out = {}
    for kind, n in m.layer_type_counts.items():
        if kind == FULL_ATTENTION:
            continue
        span = _span(m, kind)
        if span is not None and context_length <= span:
            continue  # the window sees every earlier token: exactly full attention
        out[kind] = n
    return out


def check_simulated_kinds(m: ModelSpec, context_length: int, phase: str = "decode") -> None:
    """Refuse (UserInputError on ``layer_types``) a model with layers the emitters of
    ``phase`` would simulate as full attention although they are not at this context length."""
    missing = unsimulated_kinds(m, context_length, phase)
    if not missing:
        return
    shown = ", ".join(f"{n} {kind}" for kind, n in missing.items())
    spans = [_span(m, kind) for kind in missing]
    within = (f"evaluate at a context of at most {min(s for s in spans if s):,} tokens (the "
              "window holds it all), or " if all(spans) else "")
    raise UserInputError(
        "layer_types", f"{m.name}: {shown} of {m.num_hidden_layers} layers",
        f"{within}simulate the prefill (every kind is simulated there), or check decode "
        "memory only (ctxplan.evaluate.check_memory, the solver's capacity wall), which needs "
        "no simulation; decode per kind arrives with per-kind context parallelism (issue 16)",
        f"decode not simulated at context {context_length:,}, since the decode simulator "
        "treats every layer as full attention")
