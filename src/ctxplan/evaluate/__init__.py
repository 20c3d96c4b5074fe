"""Single-point evaluation: one fully specified configuration -> EvalResult (+ Trace).

``config`` (:class:`EvalConfig` and its key), ``results`` (what an evaluation returns),
``run`` (:func:`evaluate`, :func:`check_memory`), ``simulate`` (the graph and the kernel,
with the opt-in periodic-layer shortcut), ``breakdown`` (the critical path by op kind) and
``version`` (:data:`SIM_VERSION` and its history). The package reaches the mapping only
through :mod:`ctxplan.mapping.entry`.
"""

from ctxplan.evaluate.config import EvalConfig
from ctxplan.evaluate.results import (
    CommReport,
    EvalResult,
    HandoffReport,
    MemoryReport,
    MoeChoice,
    RingChoice,
    Trace,
)
from ctxplan.evaluate.run import (
    TOO_LARGE,
    check_memory,
    chunk_schedules,
    evaluate,
    over_host_budget,
)
from ctxplan.evaluate.simulate import build_graph
from ctxplan.evaluate.version import SIM_VERSION

__all__ = ["SIM_VERSION", "TOO_LARGE", "CommReport", "EvalConfig", "EvalResult", "HandoffReport",
           "MemoryReport", "MoeChoice", "RingChoice", "Trace", "build_graph", "check_memory",
           "chunk_schedules",
           "evaluate", "over_host_budget"]
