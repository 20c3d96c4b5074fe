"""The event-driven simulation kernel. Knows nothing of LLMs; imports nothing from ctxplan."""

from ctxplan.sim.kernel import (
    EventLimitError,
    SimResult,
    SimulationError,
    TaskGraph,
    paused_gc,
)

__all__ = ["EventLimitError", "SimResult", "SimulationError", "TaskGraph", "paused_gc"]
