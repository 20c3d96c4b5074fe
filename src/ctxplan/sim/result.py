"""What a simulation measured, and how it can fail."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]


class SimulationError(Exception):
    """The task graph cannot be simulated: a cycle, a task that can never start, or a runaway."""


class EventLimitError(SimulationError):
    """The simulation processed more events than its limit allows (``run(event_limit=...)``)."""

    def __init__(self, message: str, limit: int, events: int, done: int, total: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.events = events
        self.done = done
        self.total = total


@dataclass(frozen=True, eq=False)
class SimResult:
    """What one simulation measured. Arrays are int64 numpy arrays indexed by task / resource id."""

    makespan_ns: int                # completion time of the last task
    end_ns: IntArray                # per task id: when it completed (release + tail)
    resource_busy_ns: IntArray      # per resource id: total time held
    resource_bytes: IntArray        # per resource id: bytes of the tasks that held it
    events: int                     # events processed
    duration_ns: IntArray           # per task id: the graph's durations (a view, not a copy)
    tail_ns: npt.NDArray[np.int32]  # per task id: the graph's tails
    # Per task id, what its start waited for last, recorded by the kernel as it ran: a
    # dependency's id, or -(id + 2) of the task that released a resource it needed just then,
    # or -1 (started at 0). The critical path follows these back (ctxplan.sim.critical).
    binder: npt.NDArray[np.int32]

    @property
    def start_ns(self) -> IntArray:
        """Per task id: when it took its resources (end - tail - duration, exactly: a task
        holds its resources for its duration, then completes its tail later). Computed on
        demand: large graphs need only the ends."""
        return self.end_ns - self.tail_ns - self.duration_ns

    def utilisation(self, resource: int) -> float:
        """Fraction of the makespan the resource was held; never above 1 by construction."""
        return int(self.resource_busy_ns[resource]) / self.makespan_ns if self.makespan_ns else 0.0

    def same_schedule(self, other: object) -> bool:
        """Task-by-task equality of two schedules (and of everything else measured)."""
        if not isinstance(other, SimResult):
            return NotImplemented
        return (self.makespan_ns == other.makespan_ns and self.events == other.events
                and np.array_equal(self.start_ns, other.start_ns)
                and np.array_equal(self.end_ns, other.end_ns)
                and np.array_equal(self.resource_busy_ns, other.resource_busy_ns)
                and np.array_equal(self.resource_bytes, other.resource_bytes)
                and np.array_equal(self.binder, other.binder))

    __eq__ = same_schedule  # arrays compare element-wise; a result compares as a whole
    __hash__ = None  # type: ignore[assignment]
