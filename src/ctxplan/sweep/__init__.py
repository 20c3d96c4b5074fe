"""Many solves or evaluations: executors, context-length sweeps, the result store."""

from ctxplan.sweep.contexts import SweepResult, sweep_contexts
from ctxplan.sweep.executor import (
    Executor,
    ProcessExecutor,
    RayExecutor,
    SerialExecutor,
    make_executor,
)
from ctxplan.sweep.store import ResultStore, open_store

__all__ = ["Executor", "ProcessExecutor", "RayExecutor", "ResultStore", "SerialExecutor",
           "SweepResult", "make_executor", "open_store", "sweep_contexts"]
