"""What an attention kind gives the rest of the mapping: its hooks (:class:`AttentionKind`).

Each kind of :data:`ctxplan.model.spec.LAYER_TYPES` is one module of this package that builds an
:class:`AttentionKind` (its ``KINDS``) and one line in :mod:`ctxplan.mapping.kinds` that
registers it. The phase emitters (``prefill.py``, ``decode.py``), the memory (``memory.py``) and
the KV handoff (``handoff.py``) look a layer's kind up there and call its hooks; none of them
names a kind. The hooks, by who calls them:

* the emitters (by the kind a layer *runs as*, :attr:`AttentionKind.runs_as`: a sliding window
  that holds the whole context runs as full attention): ``prefill_emitter``, ``decode_emitter``
  (the attention half of one layer, under this pool's layout) and ``prefill_comm``,
  ``decode_comm`` (what the kind's CP pattern moves, in closed form: a :class:`KindComm`);
* the memory (by the layer's own kind): ``prefill_kv`` / ``decode_kv``, the cache each rank's
  chips keep for the kind's layers (and, in prefill, the largest buffer one layer of the kind
  needs while it is computed), ``decode_activations`` (a kind's own live buffers in decode);
* the handoff (by the layer's own kind): ``handoff_pairs``, what moves from which prefill chip
  to which decode chip for one layer (byte for byte what ``decode_kv`` keeps), and
  ``handoff_ready``, which task of a prefill layer the transfers of its cache wait for;
* ``phases``: the phases the emitters simulate (a kind outside one is refused there);
  ``pairs_below``: the (query, key) mask of a softmax kind, for the pair counts of a prefill;
  ``rings``: the values of the prefill ring option (``prefill_ring``) its layers run, the first
  being what they run under any other value (empty: the option does not apply to them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ctxplan.mapping import ops
from ctxplan.mapping.builder import GraphBuilder
from ctxplan.mapping.decode_base import DecodeEmitter, DecodePool
from ctxplan.mapping.kind_comm import KindComm
from ctxplan.mapping.layout import Layout
from ctxplan.mapping.placement import PairsBelow, Placement
from ctxplan.mapping.prefill_base import AttentionEmitter, PrefillSetup
from ctxplan.model.spec import ModelSpec

PHASES = frozenset({"prefill", "decode"})

PrefillEmitterHook = Callable[[GraphBuilder, PrefillSetup, str], AttentionEmitter]
"""(builder, the pool's setup, layer type) -> the attention half of one prefill layer."""
DecodeEmitterHook = Callable[[GraphBuilder, ModelSpec, Layout, DecodePool, str], DecodeEmitter]
"""(builder, model, layout, the pool's arrays, layer type) -> one decode layer's attention."""
CommHook = Callable[[ModelSpec, Layout, str, int], KindComm]
"""(model, layout, layer type, its layers) -> the closed form of what its CP pattern moves."""
PrefillKVHook = Callable[[ModelSpec, Layout, str, int, Placement], "RankBytes"]
"""(model, layout, layer type, its layers, placement) -> per CP rank, on each TP chip: bytes kept
by those layers, and the largest transient of one of them."""
DecodeKVHook = Callable[[ModelSpec, Layout, str, int], list[int]]
"""(model, layout, layer type, its layers) -> per CP rank, on each TP chip: bytes kept."""
HandoffHook = Callable[[ModelSpec, str, Layout, Layout, Placement],
                       dict[tuple[int, int], int]]
"""(model, layer type, prefill layout, decode layout, the prefill's placement) ->
(prefill chip, decode chip) -> bytes of one layer."""


@dataclass(frozen=True)
class RankBytes:
    """Per CP rank (on each of its TP chips): what a kind's layers keep, and the largest buffer
    one of them needs while it is computed (prefill; the memory takes the largest of every
    kind's, one layer being computed at a time)."""

    held: list[int]
    transient: list[int]


@dataclass(frozen=True)
class HandoffReady:
    """The task of a prefill layer after which a chip holds what it hands over of that layer:
    the first (``last``: the last) of its tasks of these op kinds on the chip (no such task:
    its last compute task of the layer)."""

    op_kinds: tuple[str, ...] = (ops.QKV_PROJ,)
    last: bool = False


def no_activations(m: ModelSpec, lay: Layout) -> int:
    """A kind without live buffers of its own beyond the shared ones."""
    return 0


@dataclass(frozen=True)
class AttentionKind:
    """One attention kind's hooks (see the module docstring)."""

    layer_type: str
    prefill_emitter: PrefillEmitterHook
    prefill_comm: CommHook
    decode_emitter: DecodeEmitterHook
    decode_comm: CommHook
    prefill_kv: PrefillKVHook
    decode_kv: DecodeKVHook
    handoff_pairs: HandoffHook
    phases: frozenset[str] = PHASES
    handoff_ready: HandoffReady = HandoffReady()
    decode_activations: Callable[[ModelSpec, Layout], int] = no_activations
    pairs_below: Callable[[ModelSpec], PairsBelow] | None = None
    runs_as: Callable[[ModelSpec, int], str] | None = None   # (model, S) -> kind; None: itself
    rings: tuple[str, ...] = ()
