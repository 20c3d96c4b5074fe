"""Hardware: chips, clusters and the links between chips, turned into durations and resources.

Imports only :mod:`ctxplan.errors` from the rest of the package (never mapping / solve / sweep /
model), so every layer above can use it.
"""

from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import FABRICS, Cluster, Level
from ctxplan.hardware.efficiency import ClassEfficiency, EfficiencyModel
from ctxplan.hardware.frozen_map import FrozenMap
from ctxplan.hardware.topology import ResourceSink, Route, Topology

__all__ = ["FABRICS", "Chip", "ClassEfficiency", "Cluster", "EfficiencyModel", "FrozenMap", "Level",
           "ResourceSink", "Route", "Topology"]
