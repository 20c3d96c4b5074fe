"""Many solves or evaluations: executors and context-length sweeps."""

from ctxplan.sweep.contexts import SweepResult, sweep_contexts
from ctxplan.sweep.executor import Executor, SerialExecutor

__all__ = ["Executor", "SerialExecutor", "SweepResult", "sweep_contexts"]
