"""Routes between chips of a cluster, and the simulator resources (links, ports) they hold.

Link model (docs/hardware.md has the full story):

* Ranks are chip indices, filling the innermost group first; a pair talks at the innermost
  level whose group holds both (``Cluster.level_of``).
* ``switch`` level: every chip has one egress (``tx``) and one ingress (``rx``) port at that
  level. A route holds the source's tx and the destination's rx port, so flows out of one chip,
  or into one chip, contend. Bandwidth = level bandwidth x efficiency. A level with a
  ``port_level`` (the fabric joining two clusters) uses that level's ports, at its own
  bandwidth.
* ``full_mesh`` level: every ordered pair of *units* meeting in a group (chips at level 0, groups
  of the level below otherwise) has its own directional link. The chip's level bandwidth is
  split evenly over its links to the other units: bandwidth x efficiency / (units - 1). Above
  level 0 a chip has one link per other unit, so its flows into one unit share that link.

Resources are created lazily, on the first route that needs them, through the sink; creation
order therefore depends only on the order of ``route`` calls (deterministic).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ctxplan.errors import UserInputError
from ctxplan.hardware.cluster import Cluster
from ctxplan.hardware.units import ceil_ns, ceil_ns_array

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# Roles of link resources (the sink records them; traces and utilisation read them).
TX = "tx"        # a chip's egress port at a switch level
RX = "rx"        # a chip's ingress port at a switch level
LINK = "link"    # a directional full-mesh link


class ResourceSink(Protocol):
    """Whatever hands out resource ids (the graph builder), told which chip owns each resource
    (the sender for a link, the port's chip for a switch port) and its role."""

    def add_resource(self, name: str, chip: int, role: str) -> int: ...


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
        self._link_ids: dict[int, int] = {}   # link key (see _key) -> resource id
        self._tables: dict[tuple[int, int], Any] = {}   # (level, role) -> ids by (a, b)
        self._routes: dict[tuple[int, int], Route] = {}

    @property
    def resource_ids(self) -> dict[str, int]:
        """Name -> id of every link / port resource created so far (a copy)."""
        return dict(self._resource_ids)

    # A link resource is named by (level, role, a, b): a switch port (role TX / RX) of chip a;
    # a full-mesh link (role LINK) from chip a to chip b (level 0) or to unit b of the level
    # below. Both route() and routes() go through these keys, so they share resources.
    _ROLES = (TX, RX, LINK)

    def _key(self, index: int, role: int, a: int, b: int) -> int:
        n = self.n_chips
        return ((index * 3 + role) * n + a) * n + b

    def _name(self, index: int, role: int, a: int, b: int) -> tuple[str, int]:
        """Resource name and owning chip of a link key's parts."""
        if role == 0:
            return f"chip{a}.L{index}.tx", a
        if role == 1:
            return f"chip{a}.L{index}.rx", a
        if index == 0:
            return f"chip{a}->chip{b}.L0", a
        below = self.cluster.levels[index - 1]
        return f"chip{a}->{below.name}{b}.L{index}", a

    def _link(self, index: int, role: int, a: int, b: int) -> int:
        key = self._key(index, role, a, b)
        rid = self._link_ids.get(key)
        if rid is None:
            name, owner = self._name(index, role, a, b)
            rid = self._sink.add_resource(name, owner, self._ROLES[role])
            self._resource_ids[name] = rid
            self._link_ids[key] = rid
        return rid

    def _links(self, index: int, role: int, a: npt.NDArray[np.int64],
               b: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """:meth:`_link` over arrays, through a dense table of known ids per (level, role)
        (missing links are created through :meth:`_link`, in key order)."""
        import numpy as np

        table = self._tables.get((index, role))
        if table is None:
            width = 1 if role < 2 else self.n_chips
            table = self._tables[(index, role)] = np.full((self.n_chips, width), -1, np.int64)
        ids = table[a, b]
        missing = ids < 0
        if missing.any():
            for x, y in sorted(set(zip(a[missing].tolist(), b[missing].tolist(), strict=True))):
                table[x, y] = self._link(index, role, x, y)
            ids = table[a, b]
        return ids

    def _level(self, index: int) -> tuple[float, int]:
        """(effective bandwidth per link in bytes/s, latency in ns) at a level."""
        level = self.cluster.levels[index]
        effective_bytes_per_s = level.bandwidth_bytes_per_s * level.efficiency
        if level.fabric != "switch":  # full_mesh: the chip's bandwidth split over its links
            effective_bytes_per_s /= self.cluster.units_meeting_at(index) - 1
        return effective_bytes_per_s, level.latency_ns

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
        resources: tuple[int, ...]
        if level.fabric == "switch":
            ports = index if level.port_level is None else level.port_level
            resources = (self._link(ports, 0, src, 0), self._link(ports, 1, dst, 0))
        elif index == 0:
            resources = (self._link(index, 2, src, dst),)
        else:
            unit = dst // self.cluster.levels[index - 1].chips_per_group
            resources = (self._link(index, 2, src, unit),)
        bandwidth, latency = self._level(index)
        route = Route(resources=resources, bandwidth_bytes_per_s=bandwidth, latency_ns=latency,
                      level=index, op_overhead_ns=level.op_overhead_ns)
        self._routes[(src, dst)] = route
        return route

    def transfer_ns(self, route: Route, nbytes: int) -> int:
        """How long a transfer of ``nbytes`` holds the route's links (latency not included)."""
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        return ceil_ns(nbytes * 1e9 / route.bandwidth_bytes_per_s)

    def levels_of(self, src: npt.NDArray[np.int64],
                  dst: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Per pair, the index of the innermost level whose group holds both chips (vectorised
        ``Cluster.level_of``; pairs of one chip with itself get level 0)."""
        import numpy as np

        level = np.full(len(src), -1, np.int64)
        for index, lv in enumerate(self.cluster.levels):
            same = (level < 0) & (src // lv.chips_per_group == dst // lv.chips_per_group)
            level[same] = index
        return level

    def op_overhead_ns(self, level: npt.NDArray[np.int64], collective: bool,
                       special: str | None = None) -> npt.NDArray[np.int64]:
        """Per level index, the fixed cost of one operation of the given class (point-to-point
        or collective; ``special``: a MoE dispatch / combine) crossing that level."""
        import numpy as np

        table = np.array([lv.overhead_ns(collective, special) for lv in self.cluster.levels],
                         np.int64)
        return table[level]

    def link_ns(self, index: int, nbytes: float) -> float:
        """The time ``nbytes`` hold one link of level ``index`` (no latency), unrounded: what
        a library's tuner estimates an algorithm's steps with."""
        bandwidth, _ = self._level(index)
        return nbytes * 1e9 / bandwidth

    def routes(
        self, src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64],
        nbytes: npt.NDArray[np.int64], rate: float = 1.0,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Vectorised :meth:`route` + :meth:`transfer_ns` for arrays of transfers.

        Returns (resources as an (n, k) array padded with -1, hold time in ns, latency in ns),
        each element equal to what the scalar methods give for that transfer. ``rate`` < 1: the
        sending kernel reaches only that fraction of the route's bandwidth (an all-reduce
        algorithm's own, ``AlgorithmCost.efficiency``).
        """
        import numpy as np

        n = len(src)
        res = np.full((n, 2), -1, np.int64)
        bandwidth = np.empty(n, np.float64)
        latency = np.empty(n, np.int64)
        if n == 0:
            return res, np.zeros(0, np.int64), latency
        if nbytes.min() < 0:
            raise ValueError("nbytes must be >= 0")
        if (src == dst).any() or min(src.min(), dst.min()) < 0 or \
                max(src.max(), dst.max()) >= self.n_chips:
            raise ValueError("transfers need two different chips of this topology")
        level = self.levels_of(src, dst)
        for index in np.unique(level).tolist():
            sel = level == index
            s, d = src[sel], dst[sel]
            lv = self.cluster.levels[index]
            if lv.fabric == "switch":
                ports = index if lv.port_level is None else lv.port_level
                res[sel, 0] = self._links(ports, 0, s, np.zeros_like(s))
                res[sel, 1] = self._links(ports, 1, d, np.zeros_like(d))
            elif index == 0:
                res[sel, 0] = self._links(index, 2, s, d)
            else:
                unit = d // self.cluster.levels[index - 1].chips_per_group
                res[sel, 0] = self._links(index, 2, s, unit)
            bandwidth[sel], latency[sel] = self._level(index)
        if (res[:, 1] < 0).all():
            res = res[:, :1]
        if rate != 1.0:
            bandwidth = bandwidth * rate
        return res, ceil_ns_array(nbytes * 1e9 / bandwidth), latency
