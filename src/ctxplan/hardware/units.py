"""Turning float durations into the simulator's integer nanoseconds."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt



# A float duration a hair above an integer (1000.0000000000001 ns from 1e-6 s * 1e9) is float
# noise, not a real extra nanosecond; anything more than one part in 1e12 above is rounded up.
_NOISE = 1e-12
_SHRINK = 1.0 - _NOISE

# The largest duration the array form accepts: int64 nanoseconds hold 292 years; a duration near
# that is a caller bug (a FLOP count in the wrong unit), not a simulation.
MAX_ARRAY_NS = float(2**62)


def ceil_ns(duration_ns: float) -> int:
    """Round a non-negative duration in ns up to an int, ignoring float noise."""
    if not math.isfinite(duration_ns) or duration_ns < 0:
        raise ValueError(f"duration must be a finite number >= 0 ns, got {duration_ns!r}")
    return math.ceil(duration_ns * _SHRINK)


def ceil_ns_array(duration_ns: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """:func:`ceil_ns` element by element (the same float operation, so the same result)."""
    import numpy as np

    if not np.all(np.isfinite(duration_ns)) or np.any(duration_ns < 0):
        raise ValueError("durations must be finite numbers >= 0 ns")
    if np.any(duration_ns > MAX_ARRAY_NS):
        raise ValueError(f"a duration exceeds {MAX_ARRAY_NS:.3g} ns (292 years): a caller bug")
    return np.ceil(duration_ns * _SHRINK).astype(np.int64)
