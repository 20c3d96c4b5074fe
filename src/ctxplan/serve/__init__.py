"""Serving at scale: pools of prefill and decode instances sized for an arrival rate.

A request-level discrete-event simulation above :mod:`ctxplan.sim` (docs/serving.md): requests
arrive, queue at prefill instances, hand their KV to decode instances and decode in continuous
batches, with every instance-level duration taken from the event-driven simulator through
:mod:`ctxplan.evaluate` (never a closed form).
"""

from ctxplan.serve.capacity import CapacityRequest, capacity
from ctxplan.serve.result import CapacityPoint, CapacityResult, PoolProbe
from ctxplan.serve.traffic import ContextMix, arrivals

__all__ = ["CapacityPoint", "CapacityRequest", "CapacityResult", "ContextMix", "PoolProbe",
           "arrivals", "capacity"]
