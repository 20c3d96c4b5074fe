"""The registry of attention kinds: each layer's kind is looked up here, never named elsewhere.

Every kind of :data:`ctxplan.model.spec.LAYER_TYPES` is one module of this package that builds
its :class:`~ctxplan.mapping.kinds.base.AttentionKind` (the hooks the emitters, the memory and
the handoff call: see :mod:`.base`), registered by one line below. Both phases simulate every
kind but DeepSeek-V4's, each with its own context-parallel pattern:

* full attention (:mod:`.full`): prefill's pass-KV or pass-Q ring, decode's pass-Q over the
  sharded KV;
* sliding window and chunked (:mod:`.window`): a halo exchange in prefill, the home rank in
  decode; a window that holds the whole context is full attention exactly and runs as such;
* linear attention (:mod:`.linear`): a state chain in prefill, the home rank in decode;
* DSA (:mod:`.dsa`): the pass-KV ring with the indexer keys in prefill, an exact sharded top-k
  in decode (:mod:`.dsa_decode`);
* DeepSeek-V4's window only, CSA and HCA (:mod:`.compressed`): their memory only; refused in
  simulation until their emitters exist (issue 27's next stage).

**A new kind** is one module here (its hooks, in one ``KINDS`` tuple) and one line in
:data:`BUILTIN`; the model layer gives it its ``LAYER_TYPES`` entry and its per-layer shapes
(``ctxplan.model``). A kind that the emitters of a phase do not simulate yet leaves that phase out
of its ``phases``: :func:`check_simulated_kinds` then refuses it there (one ``UserInputError``
naming ``layer_types``), while memory (``check_memory``, the solver's capacity wall) needs no
simulation.
"""

from __future__ import annotations

from ctxplan.errors import UserInputError
from ctxplan.mapping.kinds import compressed, dsa, full, linear, window
from ctxplan.mapping.kinds.base import AttentionKind
from ctxplan.model.spec import ModelSpec

BUILTIN: tuple[AttentionKind, ...] = (*full.KINDS, *window.KINDS, *linear.KINDS, *dsa.KINDS,
                                      *compressed.KINDS)

REGISTRY: dict[str, AttentionKind] = {}
# The kinds each phase's emitters simulate (from the registered kinds' ``phases``).
SIMULATED: dict[str, frozenset[str]] = {phase: frozenset() for phase in ("prefill", "decode")}


def register(kind: AttentionKind) -> None:
    """Make ``kind``'s hooks the ones every layer of its ``layer_type`` runs."""
    REGISTRY[kind.layer_type] = kind
    for phase in SIMULATED:
        names = SIMULATED[phase] - {kind.layer_type}
        SIMULATED[phase] = names | {kind.layer_type} if phase in kind.phases else names


for _kind in BUILTIN:
    register(_kind)


def kind_of(layer_type: str) -> AttentionKind:
    """The registered hooks of ``layer_type``."""
    return REGISTRY[layer_type]


def runs_as(m: ModelSpec, layer_type: str, context_length: int) -> AttentionKind:
    """The kind whose emitters and closed forms a layer of ``layer_type`` runs at this context
    length (a window holding the whole context: full attention)."""
    kind = REGISTRY[layer_type]
    return kind if kind.runs_as is None else REGISTRY[kind.runs_as(m, context_length)]


def unsimulated_kinds(m: ModelSpec, context_length: int,
                      phase: str = "decode") -> dict[str, int]:
    """The attention kinds of ``m`` (with their layer counts) that the emitters of ``phase``
    do not simulate (DeepSeek-V4's today)."""
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


__all__ = ["BUILTIN", "REGISTRY", "SIMULATED", "AttentionKind", "check_simulated_kinds",
           "kind_of", "register", "runs_as", "unsimulated_kinds"]
