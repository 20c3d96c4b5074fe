"""Which attention kinds the emitters simulate, and the one error for the others.

Both phases simulate every kind of :data:`ctxplan.model.spec.LAYER_TYPES` with its own
context-parallel pattern. Prefill (:mod:`ctxplan.mapping.prefill`): pass-KV or pass-Q for full
attention, a halo exchange for sliding-window and chunked layers, the pass-KV ring with the
indexer keys for DSA, a state chain for linear attention. Decode (:mod:`ctxplan.mapping.
decode`): pass-Q over the sharded KV for full attention, the home rank for sliding-window,
chunked and linear layers (their cache does not grow with S), and an exact sharded top-k for
DSA. A sliding-window or chunked layer whose window holds the whole context is full attention
exactly and runs as such in both phases.

A kind added to the model layer before its emitters would otherwise be simulated as something
it is not, so :func:`check_simulated_kinds` refuses it (one ``UserInputError`` naming
``layer_types``) until it joins :data:`SIMULATED`. Memory (``memory_report``, the solver's
capacity wall) needs no simulation. DeepSeek-V4's kinds (``window_attention``,
``compressed_sparse_attention``, ``heavily_compressed_attention``; issue 27) are such kinds
today: the model layer knows their caches and costs (:mod:`ctxplan.model.compressed`), their
emitters are the issue's next stage.
"""

from __future__ import annotations

from ctxplan.errors import UserInputError
from ctxplan.model.spec import (
    CHUNKED_ATTENTION,
    FULL_ATTENTION,
    INDEXED_ATTENTION,
    LINEAR_ATTENTION,
    SLIDING_ATTENTION,
    ModelSpec,
)

# The kinds each phase's emitters simulate (issue 16: prefill and decode per kind).
SIMULATED: dict[str, frozenset[str]] = {
    phase: frozenset({FULL_ATTENTION, SLIDING_ATTENTION, CHUNKED_ATTENTION, LINEAR_ATTENTION,
                      INDEXED_ATTENTION})
    for phase in ("prefill", "decode")
}


def unsimulated_kinds(m: ModelSpec, context_length: int,
                      phase: str = "decode") -> dict[str, int]:
    """The attention kinds of ``m`` (with their layer counts) that the emitters of ``phase``
    do not simulate (none of the kinds the model layer knows today)."""
    del context_length  # every kind is simulated at every context length
    return {kind: n for kind, n in m.layer_type_counts.items() if kind not in SIMULATED[phase]}


def check_simulated_kinds(m: ModelSpec, context_length: int, phase: str = "decode") -> None:
    """Refuse (UserInputError on ``layer_types``) a model with layers the emitters of
    ``phase`` would simulate as something they are not."""
    missing = unsimulated_kinds(m, context_length, phase)
    if not missing:
        return
    shown = ", ".join(f"{n} {kind}" for kind, n in missing.items())
    raise UserInputError(
        "layer_types", m.name,
        "check memory only (ctxplan.evaluate.check_memory, the solver's capacity wall, "
        "ctxplan eval on a configuration that does not fit), which needs no simulation",
        f"{phase} is not simulated for its {shown} layers (of {m.num_hidden_layers}) yet")
