"""GraphBuilder: turns "compute this on chip c" and "send bytes from a to b" into kernel tasks.

It is the one place where ops meet hardware: compute ops get their duration from the chip's
roofline, transfers get their route (the link resources they hold) and duration from the
topology. It also keeps, per task, what the op was (kind, chip, peer, layer, step) so results
can be accounted by op kind and a trace can say what ran.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.hardware.topology import Topology
from ctxplan.sim import SimResult, TaskGraph

_CHIP_PREFIX = re.compile(r"chip(\d+)")


@dataclass(frozen=True)
class Work:
    """One roofline part of a compute op."""

    op_class: str      # "matmul" | "attention" | "memory": selects the chip efficiency
    flops: float
    mem_bytes: float   # HBM bytes read + written
    dtype: str         # compute dtype, selects the peak
    # The block's shape, for the chip's shape-dependent efficiency (0 = unknown: large block).
    m_rows: float = 0.0     # matmul: rows of the GEMM (tokens); attention: query tokens
    kv_tokens: float = 0.0  # attention: KV tokens each query of the block attends (one sequence)


class GraphBuilder:
    """Emit compute and transfer tasks for one phase on ``n_chips`` chips of a cluster."""

    def __init__(self, chip: Chip, cluster: Cluster, n_chips: int) -> None:
        self.chip = chip
        self.n_chips = n_chips
        self.graph = TaskGraph(namer=self.task_name)
        # Compute engines first so resource id c is chip c's compute engine.
        self.compute_res = [self.graph.add_resource(f"chip{c}.compute") for c in range(n_chips)]
        self.resource_chip: list[int] = list(range(n_chips))
        self.topology = Topology(cluster, n_chips, self)
        # Per-task metadata, parallel to the task ids.
        self.kind: list[str] = []
        self.chip_of: list[int] = []   # compute: the chip; transfer: the sender
        self.peer: list[int] = []      # transfer: the receiver; compute: -1
        self.layer: list[int] = []
        self.step: list[int] = []
        self.flops: list[float] = []

    # ResourceSink protocol for the topology: remember which chip owns each link resource.
    def add_resource(self, name: str) -> int:
        rid = self.graph.add_resource(name)
        m = _CHIP_PREFIX.match(name)
        self.resource_chip.append(int(m.group(1)) if m else -1)
        return rid

    def _record(self, kind: str, chip: int, peer: int, layer: int, step: int, flops: float) -> None:
        self.kind.append(kind)
        self.chip_of.append(chip)
        self.peer.append(peer)
        self.layer.append(layer)
        self.step.append(step)
        self.flops.append(flops)

    def compute(
        self,
        chip: int,
        kind: str,
        parts: Sequence[Work],
        deps: Iterable[int] = (),
        *,
        layer: int = -1,
        step: int = -1,
    ) -> int:
        """A fused compute op: the sum of its parts' roofline times plus one op overhead."""
        c = self.chip
        duration = 0
        total_flops = 0.0
        for w in parts:
            duration += c.compute_ns(w.op_class, w.flops, w.mem_bytes, w.dtype,
                                     m_rows=w.m_rows, kv_tokens=w.kv_tokens) - c.op_overhead_ns
            total_flops += w.flops
        duration += c.op_overhead_ns
        tid = self.graph.add_task("", duration, (self.compute_res[chip],), tuple(deps))
        self._record(kind, chip, -1, layer, step, total_flops)
        return tid

    def sync(self, chip: int, kind: str, deps: Iterable[int], *, layer: int = -1) -> int:
        """A zero-time join (no resource): completes when all of ``deps`` have."""
        tid = self.graph.add_task("", 0, (), tuple(deps))
        self._record(kind, chip, -1, layer, -1, 0.0)
        return tid

    def send(
        self,
        src: int,
        dst: int,
        nbytes: int,
        kind: str,
        deps: Iterable[int] = (),
        *,
        layer: int = -1,
        step: int = -1,
    ) -> int:
        """A point-to-point transfer: holds every link of the route for bytes / bandwidth, then
        completes one route latency later (latency does not hold the link)."""
        route = self.topology.route(src, dst)
        hold_ns = self.topology.transfer_ns(route, nbytes)
        tid = self.graph.add_task(
            "", hold_ns, route.resources, tuple(deps), tail_ns=route.latency_ns, nbytes=nbytes
        )
        self._record(kind, src, dst, layer, step, 0.0)
        return tid

    def task_name(self, t: int) -> str:
        """What task ``t`` ran: "L3.passkv_attn[2]" or "L3.passkv_send[2] 0->1".

        Built on demand from the metadata rather than stored per task: graphs reach millions
        of tasks, and a string each was a sixth of their memory.
        """
        where = f"[{self.step[t]}]" if self.step[t] >= 0 else ""
        name = f"L{self.layer[t]}.{self.kind[t]}{where}"
        return f"{name} {self.chip_of[t]}->{self.peer[t]}" if self.peer[t] >= 0 else name

    def run(self, event_limit: int | None = None) -> SimResult:
        return self.graph.run(event_limit=event_limit)

    def bytes_of_kinds(self, kinds: Iterable[str]) -> int:
        """Bytes moved by the transfer tasks of the given kinds (summed from the tasks)."""
        wanted = set(kinds)
        nb = self.graph.nbytes
        return sum(nb[t] for t, k in enumerate(self.kind) if k in wanted)

    def count_kind(self, kind: str) -> int:
        return sum(1 for k in self.kind if k == kind)

    def count_kinds(self, kinds: Iterable[str], layer: int) -> int:
        """Tasks of the given kinds in one layer."""
        wanted = set(kinds)
        return sum(1 for t, k in enumerate(self.kind) if k in wanted and self.layer[t] == layer)
