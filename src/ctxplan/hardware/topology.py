"""Routes between chips of a cluster, and the simulator resources (links, ports) they hold.

Link model (docs/hardware.md has the full story):

* Ranks are chip indices, filling the innermost group first; a pair talks at the innermost
  level whose group holds both (``Cluster.level_of``).
* ``switch`` level: every chip has one egress (``tx``) and one ingress (``rx``) port at that
  level. A route holds the source's tx and the destination's rx port, so flows out of one chip,
  or into one chip, contend. Bandwidth = level bandwidth x efficiency.
* ``full_mesh`` level: every ordered pair of *units* meeting in a group (chips at level 0, groups
  of the level below otherwise) has its own directional link. The chip's level bandwidth is
  split evenly over its links to the other units: bandwidth x efficiency / (units - 1). Above
  level 0 a chip has one link per other unit, so its flows into one unit share that link.

Resources are created lazily, on the first route that needs them, through the sink; creation
order therefore depends only on the order of ``route`` calls (deterministic).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ctxplan.errors import UserInputError
from ctxplan.hardware.cluster import Cluster
from ctxplan.hardware.units import ceil_ns


class ResourceSink(Protocol):
    """Whatever hands out resource ids (the simulator's TaskGraph)."""

    def add_resource(self, name: str) -> int: ...


@dataclass(frozen=True)
class Route:
    """How one transfer from src to dst travels."""

    resources: tuple[int, ...]     # every directional link / port resource id it holds
    bandwidth_bytes_per_s: float   # effective: bandwidth x efficiency of the bottleneck
    latency_ns: int                # one-way latency; does not hold the resources
    level: int                     # index of the cluster level the pair talks at
    op_overhead_ns: int = 0        # the level's fixed cost per collective / p2p operation


class Topology:
    """The first ``n_chips`` chips of a cluster, wired to one resource sink."""

    def __init__(self, cluster: Cluster, n_chips: int, sink: ResourceSink) -> None:
        if not 1 <= n_chips <= cluster.max_chips:
            raise UserInputError(
                "n_chips",
                n_chips,
                f"use 1 to {cluster.max_chips} chips, or a cluster with more levels or larger "
                "groups",
                f"cluster {cluster.name} holds at most {cluster.max_chips} chips",
            )
        self.cluster = cluster
        self.n_chips = n_chips
        self._sink = sink
        self._resource_ids: dict[str, int] = {}
        self._routes: dict[tuple[int, int], Route] = {}

    @property
    def resource_ids(self) -> dict[str, int]:
        """Name -> id of every link / port resource created so far (a copy)."""
        return dict(self._resource_ids)

    def route(self, src: int, dst: int) -> Route:
        """The route from chip src to chip dst (cached; creates its resources on first use)."""
        cached = self._routes.get((src, dst))
        if cached is not None:
            return cached
        for chip in (src, dst):
            if not 0 <= chip < self.n_chips:
                raise ValueError(f"chip {chip} is outside this topology (0..{self.n_chips - 1})")
        if src == dst:
            raise ValueError(f"no route from chip {src} to itself: callers must not send to self")
        index = self.cluster.level_of(src, dst)
        level = self.cluster.levels[index]
        effective_bytes_per_s = level.bandwidth_bytes_per_s * level.efficiency
        names: tuple[str, ...]
        if level.fabric == "switch":
            names = (f"chip{src}.L{index}.tx", f"chip{dst}.L{index}.rx")
        else:  # full_mesh
            units = self.cluster.units_meeting_at(index)
            effective_bytes_per_s /= units - 1
            if index == 0:
                names = (f"chip{src}->chip{dst}.L0",)
            else:
                below = self.cluster.levels[index - 1]
                unit = dst // below.chips_per_group
                names = (f"chip{src}->{below.name}{unit}.L{index}",)
        route = Route(
            resources=tuple(self._resource(name) for name in names),
            bandwidth_bytes_per_s=effective_bytes_per_s,
            latency_ns=level.latency_ns,
            level=index,
            op_overhead_ns=level.op_overhead_ns,
        )
        self._routes[(src, dst)] = route
        return route

    def transfer_ns(self, route: Route, nbytes: int) -> int:
        """How long a transfer of ``nbytes`` holds the route's links (latency not included)."""
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        return ceil_ns(nbytes * 1e9 / route.bandwidth_bytes_per_s)

    def _resource(self, name: str) -> int:
        rid = self._resource_ids.get(name)
        if rid is None:
            rid = self._sink.add_resource(name)
            self._resource_ids[name] = rid
        return rid
