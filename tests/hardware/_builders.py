"""Shared builders for the hardware tests: small chips and clusters with round numbers."""

from __future__ import annotations

from ctxplan.hardware import Chip, Cluster, EfficiencyModel, Level


class RecordingSink:
    """A ResourceSink that hands out dense ids and remembers the names, like the TaskGraph."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.owners: list[int] = []
        self.roles: list[str] = []

    def add_resource(self, name: str, chip: int, role: str) -> int:
        self.names.append(name)
        self.owners.append(chip)
        self.roles.append(role)
        return len(self.names) - 1


def make_chip(**overrides: object) -> Chip:
    """A toy chip. ``efficiency={...}`` gives fixed fractions (EfficiencyModel.constant);
    ``efficiency_model=`` a full model."""
    fields: dict[str, object] = {
        "name": "toy",
        "peak_flops_per_s": {"bf16": 1e15, "fp8": 2e15},
        "memory_bytes": 100 * 10**9,
        "memory_bandwidth_bytes_per_s": 2e12,
        "efficiency": {"matmul": 0.5, "attention": 0.25, "memory": 0.5},
        "op_overhead_ns": 1000,
        "reserved_memory_bytes": 4 * 10**9,
        "default_cluster": "toy-cluster",
        "source": "test fixture",
        "verified": False,
    }
    fields.update(overrides)
    fractions = fields.pop("efficiency", None)
    if "efficiency_model" not in fields:
        fields["efficiency_model"] = EfficiencyModel.constant(fractions)  # type: ignore[arg-type]
    return Chip(**fields)  # type: ignore[arg-type]


def three_level_cluster(fabric0: str = "full_mesh", fabric1: str = "switch") -> Cluster:
    """Boards of 8, clusters of 32, pods of 1024 (the SG2262 shape), round bandwidths."""
    return Cluster(
        name="toy-cluster",
        chip="toy",
        levels=(
            Level("board", 8, fabric0, 700e9, 200, 1.0),
            Level("cluster", 32, fabric1, 400e9, 1000, 0.5),
            Level("pod", 1024, "switch", 100e9, 3000, 1.0),
        ),
        source="test fixture",
        verified=False,
    )
