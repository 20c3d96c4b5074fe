"""Turning float durations into the simulator's integer nanoseconds."""

from __future__ import annotations

import math

# A float duration a hair above an integer (1000.0000000000001 ns from 1e-6 s * 1e9) is float
# noise, not a real extra nanosecond; anything more than one part in 1e12 above is rounded up.
_NOISE = 1e-12


def ceil_ns(duration_ns: float) -> int:
    """Round a non-negative duration in ns up to an int, ignoring float noise."""
    if not math.isfinite(duration_ns) or duration_ns < 0:
        raise ValueError(f"duration must be a finite number >= 0 ns, got {duration_ns!r}")
    return math.ceil(duration_ns * (1.0 - _NOISE))
