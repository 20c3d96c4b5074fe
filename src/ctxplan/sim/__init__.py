"""The event-driven simulation kernel. Knows nothing of LLMs; imports nothing from ctxplan.

:mod:`ctxplan.sim.graph` holds the task graph (flat arrays) and its semantics,
:mod:`ctxplan.sim.compiled` the kernel compiled with numba, :mod:`ctxplan.sim.reference` the same
algorithm in plain Python for the tests.
"""

from ctxplan.sim.graph import KERNELS, TaskGraph
from ctxplan.sim.result import EventLimitError, SimResult, SimulationError

__all__ = ["KERNELS", "EventLimitError", "SimResult", "SimulationError", "TaskGraph"]
