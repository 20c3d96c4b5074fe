"""A cluster as nested levels of chip groups (board, pod, scale-out), innermost first."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ctxplan.hardware.frozen_map import FrozenMap

# "full_mesh": every pair of units meeting at the level has its own link (bandwidth split
# between peers). "switch": each chip has one egress and one ingress port at the level, shared
# by all of its flows. See docs/hardware.md for the exact link model.
FABRICS = frozenset({"full_mesh", "switch"})

# All-reduce algorithms a library may offer at a level besides NCCL's ring (docs/hardware.md,
# "Collectives by size and algorithm"): one-shot (every rank reads every peer's whole buffer and
# reduces: one step, (n - 1) x the bytes per port) and two-shot (a direct reduce-scatter and
# all-gather: two steps, the ring's bytes), as vLLM's / SGLang's / TensorRT-LLM's custom
# all-reduce kernels run them inside one NVLink domain.
RING = "ring"
ONE_SHOT = "one_shot"
TWO_SHOT = "two_shot"
ALLREDUCE_ALGORITHMS = (RING, ONE_SHOT, TWO_SHOT)
# Across the groups of a level (a TP group spanning hosts), NCCL's hierarchical all-reduce: a ring
# reduce-scatter inside each group of the level below, an all-reduce of the 1 / m shard between
# the groups over each rail in parallel, a ring all-gather inside (docs/mapping.md, "Collectives
# as point-to-point algorithms"). Not a per-level offer: it is built from the levels' own figures.
HIERARCHICAL = "hierarchical"
# Operations whose fixed cost a level may give apart from its collective figure: MoE dispatch and
# combine (low-latency expert-parallel kernels, DeepEP / TensorRT-LLM one-sided).
DISPATCH = "dispatch"
COMBINE = "combine"


@dataclass(frozen=True)
class AlgorithmCost:
    """The latency-bandwidth curve of one all-reduce algorithm: a fixed cost of
    ``overhead_ns`` plus ``per_peer_ns`` per peer of the group (the flags every rank sets and
    polls), and its transfers at ``efficiency`` of the link's effective bandwidth (its kernel
    copies with a few SMs: the engines' custom all-reduce reaches well below NCCL's ring)."""

    overhead_ns: int
    per_peer_ns: int = 0
    efficiency: float = 1.0

    def __post_init__(self) -> None:
        if self.overhead_ns < 0 or self.per_peer_ns < 0:
            raise ValueError("an algorithm's overhead and per-peer cost must be >= 0")
        if not (math.isfinite(self.efficiency) and 0 < self.efficiency <= 1):
            raise ValueError("an algorithm's efficiency must be in (0, 1]")

    def ns(self, ranks: int) -> int:
        return self.overhead_ns + self.per_peer_ns * (ranks - 1)


@dataclass(frozen=True)
class Level:
    """One level of the interconnect hierarchy."""

    name: str                      # e.g. "board", "cluster", "pod", "host", "scale-out"
    chips_per_group: int           # CUMULATIVE chips in one group at this level (8, 32, 1024)
    fabric: str                    # "full_mesh" or "switch"
    bandwidth_bytes_per_s: float   # per chip per direction at this level (nominal)
    latency_ns: int                # one-way latency of a transfer here, switch hops included
    efficiency: float              # achievable fraction of bandwidth, in (0, 1]
    # Fixed cost of one point-to-point operation (a SendRecv between ring neighbours) whose
    # traffic crosses this level: kernel launch, proxy thread, synchronisation of the two peers,
    # on top of the per-hop latency and the bytes over bandwidth. 0 = not modelled.
    op_overhead_ns: int = 0
    # Fixed cost of one collective operation (all-reduce, reduce-scatter, all-gather,
    # all-to-all, broadcast, gather: every rank of a group exchanges and completes only with
    # the group) crossing this level. None: the same as ``op_overhead_ns``. docs/hardware.md.
    collective_overhead_ns: int | None = None
    # All-reduce algorithms offered here besides the ring (whose cost is the collective figure),
    # with their fixed costs; {} = the ring only (NCCL's default kernels).
    allreduce: Mapping[str, AlgorithmCost] = field(default_factory=dict)
    # Fixed cost of one MoE dispatch / combine crossing this level (low-latency expert-parallel
    # kernels); None: the collective figure.
    dispatch_overhead_ns: int | None = None
    combine_overhead_ns: int | None = None
    # A switch level whose chips reach it through the tx / rx ports of the level of this index
    # (below it): a joined cluster's fabric, reached through each chip's scale-out NIC, so a
    # handoff and the prefill's own traffic across hosts share the port. None: its own ports.
    port_level: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "allreduce", FrozenMap(self.allreduce))
        unknown = sorted(set(self.allreduce) - set(ALLREDUCE_ALGORITHMS[1:]))
        if unknown:
            raise ValueError(f"level {self.name}: unknown all-reduce algorithm {unknown[0]!r} "
                             f"(known besides the ring: {ALLREDUCE_ALGORITHMS[1:]})")
        for what, ns in (("dispatch_overhead_ns", self.dispatch_overhead_ns),
                         ("combine_overhead_ns", self.combine_overhead_ns)):
            if ns is not None and ns < 0:
                raise ValueError(f"level {self.name}: {what} must be >= 0")
        if self.chips_per_group < 1:
            raise ValueError(f"level {self.name}: chips_per_group must be >= 1")
        if self.fabric not in FABRICS:
            raise ValueError(
                f"level {self.name}: fabric {self.fabric!r} is not one of {sorted(FABRICS)}"
            )
        if not (math.isfinite(self.bandwidth_bytes_per_s) and self.bandwidth_bytes_per_s > 0):
            raise ValueError(f"level {self.name}: bandwidth_bytes_per_s must be finite and > 0")
        if self.latency_ns < 0:
            raise ValueError(f"level {self.name}: latency_ns must be >= 0")
        if not (math.isfinite(self.efficiency) and 0 < self.efficiency <= 1):
            raise ValueError(f"level {self.name}: efficiency must be in (0, 1]")
        if self.op_overhead_ns < 0:
            raise ValueError(f"level {self.name}: op_overhead_ns must be >= 0")
        if self.collective_overhead_ns is not None and self.collective_overhead_ns < 0:
            raise ValueError(f"level {self.name}: collective_overhead_ns must be >= 0")

    @property
    def collective_ns(self) -> int:
        """The fixed cost of one collective operation crossing this level."""
        c = self.collective_overhead_ns
        return self.op_overhead_ns if c is None else c

    def overhead_ns(self, collective: bool, special: str | None = None) -> int:
        """The fixed cost of one operation of the given class crossing this level; ``special``
        (``dispatch`` / ``combine``) takes the level's own figure for it when it gives one."""
        if special == DISPATCH and self.dispatch_overhead_ns is not None:
            return self.dispatch_overhead_ns
        if special == COMBINE and self.combine_overhead_ns is not None:
            return self.combine_overhead_ns
        return self.collective_ns if collective else self.op_overhead_ns


@dataclass(frozen=True)
class Cluster:
    """A cluster of one chip type. Chip c belongs to group c // chips_per_group at each level."""

    name: str
    chip: str                      # default chip name
    levels: tuple[Level, ...]      # innermost first
    source: str
    verified: bool
    # How many of its peers a rank has transfers in flight to during one all-to-all (or any
    # grouped exchange): its k-th transfer waits for its (k - w)-th to arrive. The library
    # issues them in staggered order (rank + 1, rank + 2, ...) a batch at a time; NCCL's
    # device code takes up to 8 point-to-point operations per batch
    # (NCCL_MAX_DEV_WORK_P2P_PER_BATCH). 0: no window (every transfer posted at once, the
    # links pick any whose ends are free). docs/mapping.md, "All-to-all".
    all_to_all_peers_in_flight: int = 8
    # What a solve searches on this cluster (not what a point measures: neither is in a
    # result's key). ``tp_max``: the largest TP degree the TP search tries (it tries the
    # divisors of the innermost group up to it; a 72-GPU NVLink domain would otherwise offer
    # 72). ``group_size``: the step of the "group" candidate set, in chips (None: the innermost
    # group; an NVL72 rack steps by its 4-GPU compute trays).
    tp_max: int = 8
    group_size: int | None = None
    # The chunk of a chunked prefill under ``prefill_chunk = auto`` when the prompt does not
    # fit in one pass (docs/mapping.md, "Chunked prefill"): 16K tokens, the chunk SGLang
    # (--chunked-prefill-size) and vLLM (max_num_batched_tokens) are configured with on large
    # GPUs.
    prefill_chunk_tokens: int = 16384
    # Chips per host (one machine): a disaggregated plan's prefill and decode pools start on
    # separate hosts (docs/handoff.md, "Placement"), as real prefill and decode instances are
    # separate machines. None: the innermost level's group (an HGX host's 8 GPUs, an SG2262
    # board); a preset names it when the host is not a level (an NVL72 rack's 4-GPU tray).
    host_chips: int | None = None
    # A joined cluster only (:func:`join_clusters`): the first chip of the decode pool's own
    # cluster, past every chip of the prefill's; None on every cluster a file describes.
    decode_pool_start: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", tuple(self.levels))
        if not self.levels:
            raise ValueError(f"cluster {self.name}: needs at least one level")
        if self.all_to_all_peers_in_flight < 0:
            raise ValueError(f"cluster {self.name}: all_to_all_peers_in_flight must be >= 0")
        if self.tp_max < 1:
            raise ValueError(f"cluster {self.name}: tp_max must be >= 1")
        if self.group_size is not None and self.group_size < 1:
            raise ValueError(f"cluster {self.name}: group_size must be None or >= 1")
        if self.prefill_chunk_tokens < 1:
            raise ValueError(f"cluster {self.name}: prefill_chunk_tokens must be >= 1")
        if self.host_chips is not None and (
                self.host_chips < 1 or self.levels[-1].chips_per_group % self.host_chips):
            raise ValueError(f"cluster {self.name}: host_chips must divide the outermost "
                             f"group ({self.levels[-1].chips_per_group} chips)")
        for inner, outer in zip(self.levels, self.levels[1:], strict=False):
            if outer.chips_per_group <= inner.chips_per_group:
                raise ValueError(
                    f"cluster {self.name}: level {outer.name} chips_per_group must exceed "
                    f"level {inner.name}'s ({inner.chips_per_group})"
                )
            if outer.chips_per_group % inner.chips_per_group:
                raise ValueError(
                    f"cluster {self.name}: level {outer.name} chips_per_group must be a multiple "
                    f"of level {inner.name}'s ({inner.chips_per_group})"
                )

    @property
    def candidate_group_size(self) -> int:
        """Chips per group of the "group" candidate set: ``group_size``, else the innermost
        level's group."""
        return self.group_size if self.group_size is not None else self.levels[0].chips_per_group

    @property
    def host_size(self) -> int:
        """Chips per host: ``host_chips``, else the innermost level's group."""
        return self.host_chips if self.host_chips is not None else \
            self.levels[0].chips_per_group

    def decode_start(self, prefill_chips: int, colocate: bool) -> int:
        """The first chip of the decode pool that a prefill pool on chips 0 ..
        ``prefill_chips`` - 1 hands its KV to: the first chip of the next host (the pools on
        hosts of their own, as separate prefill and decode machines are), or with ``colocate``
        the chip right after the prefill pool (packed in one rank order)."""
        if self.decode_pool_start is not None:
            return self.decode_pool_start
        if colocate:
            return prefill_chips
        host = self.host_size
        return -(-prefill_chips // host) * host

    @property
    def max_chips(self) -> int:
        """The largest number of chips this cluster holds (the outermost group)."""
        return self.levels[-1].chips_per_group

    def level_of(self, a: int, b: int) -> int:
        """Index of the innermost level whose group holds both chips a and b (a != b)."""
        if a == b:
            raise ValueError(f"level_of needs two different chips, got {a} twice")
        for chip in (a, b):
            if not 0 <= chip < self.max_chips:
                raise ValueError(
                    f"chip {chip} is outside cluster {self.name} (0..{self.max_chips - 1})"
                )
        for index, level in enumerate(self.levels):
            if a // level.chips_per_group == b // level.chips_per_group:
                return index
        raise AssertionError("unreachable: the outermost group holds every chip")

    def units_meeting_at(self, index: int) -> int:
        """How many units of the level below meet in one group of level ``index``.

        Units are chips at level 0 and groups of the previous level above it; a full mesh at
        this level links every pair of these units.
        """
        below = self.levels[index - 1].chips_per_group if index > 0 else 1
        return self.levels[index].chips_per_group // below


# The name of the level a joined cluster adds on top of the prefill cluster's levels.
JOIN_LEVEL = "pools"


def join_level(prefill: Cluster, decode: Cluster, bandwidth_gbps: float | None = None) -> Level:
    """The fabric joining a prefill pool's cluster to a decode pool's on another: by default
    the slower of the two clusters' outermost levels (by effective bandwidth, bandwidth x
    efficiency; ties: the prefill's), taken whole (a switch, its bandwidth, efficiency and
    fixed costs) with the larger of the two latencies, as both reach the data-centre fabric
    through their own scale-out NICs; ``bandwidth_gbps`` (GB/s per chip per direction) replaces
    its bandwidth. docs/handoff.md, "Pools on two clusters"."""
    outer = [prefill.levels[-1], decode.levels[-1]]
    slow = min(outer, key=lambda lv: lv.bandwidth_bytes_per_s * lv.efficiency)
    bandwidth = slow.bandwidth_bytes_per_s if bandwidth_gbps is None else bandwidth_gbps * 1e9
    return Level(name=JOIN_LEVEL, chips_per_group=prefill.max_chips, fabric="switch",
                 bandwidth_bytes_per_s=bandwidth,
                 latency_ns=max(lv.latency_ns for lv in outer), efficiency=slow.efficiency,
                 op_overhead_ns=max(lv.op_overhead_ns for lv in outer),
                 collective_overhead_ns=slow.collective_overhead_ns)


def join_clusters(prefill: Cluster, decode: Cluster,
                  bandwidth_gbps: float | None = None) -> Cluster:
    """One rank order over a prefill cluster and a decode cluster for a KV handoff between
    them: the prefill cluster's chips first (its levels as they are), then the decode
    cluster's from chip ``prefill.max_chips`` on (``decode_pool_start``), every pair across
    the two meeting at the join level (:func:`join_level`). Only the handoff's transfers cross
    it; the decode chips have no traffic among themselves in a handoff, so the decode
    cluster's own levels do not enter."""
    p = prefill.max_chips
    groups = 1 + -(-decode.max_chips // p)           # the prefill's, then the decode's
    top = len(prefill.levels) - 1                    # the prefill's scale-out NICs' ports
    level = replace(join_level(prefill, decode, bandwidth_gbps), chips_per_group=p * groups,
                    port_level=top if prefill.levels[top].fabric == "switch" else None)
    return replace(prefill, name=f"{prefill.name}+{decode.name}",
                   levels=(*prefill.levels, level), decode_pool_start=p)
