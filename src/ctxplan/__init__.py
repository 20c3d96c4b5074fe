"""ctxplan: minimum-chip deployment plans for long-context LLM inference.

Every latency figure comes from the event-driven simulator in :mod:`ctxplan.sim`.
"""

__version__ = "0.1.0"
