"""The CP communication of the layers of one attention kind: a report row, in either phase."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KindComm:
    """What the CP pattern of one attention kind's layers moves (its closed form), in either
    phase: each kind's ``prefill_comm`` / ``decode_comm`` hook (:mod:`ctxplan.mapping.kinds`)."""

    layer_type: str
    pattern: str                # prefill: "pass-kv", "pass-q", "halo", "state-chain";
                                # decode: "pass-q", "local", "pass-q+top-k"
    layers: int
    ring_steps_per_layer: int   # sequential exchange steps per layer
    sends_per_layer: int        # CP transfer tasks per layer (all TP indices)
    analytic_bytes: int         # all layers of the kind, closed form
