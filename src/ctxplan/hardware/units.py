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


def ceil_ns(duration_ns: float) -> int:
    """Round a non-negative duration in ns up to an int, ignoring float noise."""
    if not math.isfinite(duration_ns) or duration_ns < 0:
        raise ValueError(f"duration must be a finite number >= 0 ns, got {duration_ns!r}")
    return math.ceil(duration_ns * (1.0 - _NOISE))


def ceil_ns_array(duration_ns: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """:func:`ceil_ns` element by element (the same float operations, so the same integers)."""
    import numpy as np

    d = np.asarray(duration_ns, np.float64)
    if d.size and not (np.isfinite(d).all() and d.min() >= 0):
        bad = d[~(np.isfinite(d) & (d >= 0))][0]
        raise ValueError(f"duration must be a finite number >= 0 ns, got {float(bad)!r}")
    return np.ceil(d * (1.0 - _NOISE)).astype(np.int64)
