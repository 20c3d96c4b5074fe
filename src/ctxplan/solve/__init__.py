"""The deployment solver: capacity walls, monotone search, SLA and composition over KV tiers.

Reaches the simulator only through :mod:`ctxplan.evaluate` (docs/solver.md).
"""

from ctxplan.solve.cache import EvalCache
from ctxplan.solve.request import SolveRequest
from ctxplan.solve.result import BatchPlan, Candidate, PhasePlan, SolveResult, TierPlan, TPOption
from ctxplan.solve.search import STRATEGIES, SearchOutcome, search
from ctxplan.solve.sla import SLA
from ctxplan.solve.solver import solve

__all__ = [
    "SLA", "STRATEGIES", "BatchPlan", "Candidate", "EvalCache", "PhasePlan", "SearchOutcome",
    "SolveRequest", "SolveResult", "TPOption", "TierPlan", "search", "solve",
]
