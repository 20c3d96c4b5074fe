"""Where a simulated latency goes: the critical path charged to op kinds, per layer.

:func:`ctxplan.sim.critical.critical_path` walks the schedule back from the last completion and
charges every task on the path the time it was the binding constraint (the charges add up to
the makespan). Here the charges are summed by op kind, the fixed cost of a communication
operation (kind ``<kind>.op``) going to the kind of its transfers, and split into the model's
layers (averaged over them: ``per_layer_s``) and what runs outside them (the LM head). The
mapping of these kinds onto the columns of Meta's decode breakdown (arXiv:2411.01783 Table 8) is
in docs/validation.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ctxplan.mapping.entry import GraphBuilder, ops
from ctxplan.sim import SimResult
from ctxplan.sim.critical import critical_path

# The kinds of the attention part of a decode layer (from the query projection's end to the
# output projection's start), the span Table 8 of arXiv:2411.01783 calls its total.
DECODE_ATTENTION_KINDS = (ops.PASS_Q_SEND, ops.PARTIAL_ATTN, ops.MERGE_SEND, ops.ATTN_MERGE)
# Table 8's named parts as sums of op kinds (docs/validation.md, "Table 8"): the attention op is
# the partial attention, the SendRecv the pass-Q ring's transfers, the All2All the return of the
# partial outputs with their LSE, the ring loop the SendRecvs and attention steps together.
DECODE_ATTENTION_PARTS = {
    "attention_op": (ops.PARTIAL_ATTN,),
    "ring_loop": (ops.PASS_Q_SEND, ops.PARTIAL_ATTN),
    "sendrecv": (ops.PASS_Q_SEND,),
    "all2all": (ops.MERGE_SEND,),
}


def critical_breakdown(b: GraphBuilder, result: SimResult, n_layers: int) -> dict[str, Any]:
    """The breakdown of ``result`` (the simulation of ``b``'s graph, whose first ``n_layers``
    layers are model layers) as a plain dict (JSON-ready, sorted keys):

    * ``critical_path_s``: the simulated makespan (the charges add up to it);
    * ``layers``: the number of layers averaged over;
    * ``per_layer_s``: kind -> mean seconds per layer the kind was on the critical path;
    * ``op_cost_per_layer_s``: kind -> of that, the operations' fixed cost (launch, proxy,
      synchronisation) of that kind's collectives or SendRecvs;
    * ``outside_layers_s``: kind -> seconds outside the layers (the LM head).
    """
    tasks, charge = critical_path(b.graph, result)
    kinds = b.kinds
    code = b.kind_code[tasks]
    layer = b.layer[tasks]
    inside = (layer >= 0) & (layer < n_layers)
    per_layer: dict[str, float] = {}
    op_cost: dict[str, float] = {}
    outside: dict[str, float] = {}
    n_kinds = len(kinds)
    within = np.bincount(code[inside], weights=charge[inside].astype(np.float64),
                         minlength=n_kinds)
    beyond = np.bincount(code[~inside], weights=charge[~inside].astype(np.float64),
                         minlength=n_kinds)
    layers = max(n_layers, 1)
    for i, name in enumerate(kinds):
        base = ops.base_kind(name)
        if within[i]:
            per_layer[base] = per_layer.get(base, 0.0) + float(within[i]) / layers / 1e9
            if name != base:
                op_cost[base] = op_cost.get(base, 0.0) + float(within[i]) / layers / 1e9
        if beyond[i]:
            outside[base] = outside.get(base, 0.0) + float(beyond[i]) / 1e9
    return {   # keys sorted at every level, as the result store writes them
        "critical_path_s": int(charge.sum()) / 1e9,
        "layers": n_layers,
        "op_cost_per_layer_s": dict(sorted(op_cost.items())),
        "outside_layers_s": dict(sorted(outside.items())),
        "per_layer_s": dict(sorted(per_layer.items())),
    }


def decode_attention_part_s(breakdown: dict[str, Any], part: str = "total") -> float:
    """Seconds per layer on the critical path of a decode layer's attention part (Table 8's
    "total": pass-Q, the partial attention, the All2All and the merge, with their operations'
    fixed costs), or of one of its named parts (:data:`DECODE_ATTENTION_PARTS`)."""
    per = breakdown.get("per_layer_s", {})
    kinds = DECODE_ATTENTION_KINDS if part == "total" else DECODE_ATTENTION_PARTS[part]
    return float(sum(per.get(k, 0.0) for k in kinds))


__all__ = ["DECODE_ATTENTION_KINDS", "DECODE_ATTENTION_PARTS", "critical_breakdown",
           "decode_attention_part_s"]
