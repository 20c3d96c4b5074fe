"""How large a phase's graph will be, before it is built (docs/benchmarks.md, "Never out of
memory"): a closed-form bound on its tasks from the layout, and its bytes at the measured cost
per task.

Per layer, prefill (each chunk of a chunked prefill counts as one pass): the CP ring's Np steps
on every chip with a SendRecv per step (a compute, a send and two fixed-cost tasks: 4 tp Np^2),
the MoE all-to-alls (dispatch and combine, every chip to every other: 2 n^2), the TP collectives
(a send and its fixed cost per step on every chip: 4 tp n) and a few ops per chip (10 n). Decode
(per layer): the queries to every shard and the partials back (3 n Nd), the all-to-alls of a
batch's routed slots (2 n min(n, batch x top-k x tokens per step)), the TP collectives and the
ops per chip. Measured against built graphs (tests/mapping/test_size.py) the bound is 1.3-3x
the real count for prefill; decode's graphs are small whatever the bound.
"""

from __future__ import annotations

from ctxplan.mapping.chunking import chunk_sizes
from ctxplan.mapping.layout import Layout
from ctxplan.model.spec import ModelSpec

# The simulator's memory per task, dependencies, the kernel's arrays and the memory peak's
# included: 121 B measured on DeepSeek-V3 at 128K, Np = 128 (4.9 M tasks, 743 MB peak RSS less
# the ~150 MB after imports; AMD EPYC; docs/benchmarks.md, "Never out of memory").
BYTES_PER_TASK = 121


def estimated_tasks(m: ModelSpec, lay: Layout) -> int:
    """An upper estimate of the tasks of the phase's graph (the module docstring)."""
    # A layer runs on its pipeline stage's chips only; with stages, a decode step runs once
    # per micro-batch.
    n, cp, tp = lay.stage_chips, lay.cp, lay.tp
    layers = (m.num_hidden_layers + len(m.mtp_layer_types)) * (
        1 if lay.is_prefill else min(lay.pp, lay.batch))
    per_layer = 10 * n + 4 * tp * n
    if lay.is_prefill:
        per_layer += 4 * tp * cp * cp + (2 * n * n if m.moe is not None else 0)
        return len(chunk_sizes(lay)) * layers * per_layer
    slots = lay.batch * (m.moe.num_experts_per_tok if m.moe is not None else 0) * 2
    per_layer += 3 * n * cp + 2 * n * min(n, slots)
    return layers * per_layer


def estimated_bytes(m: ModelSpec, lay: Layout) -> int:
    """The graph's memory in the simulator at :data:`BYTES_PER_TASK`."""
    return estimated_tasks(m, lay) * BYTES_PER_TASK
