"""Sensitivity: what a deployment answer hinges on (docs/sensitivity.md).

N* and TTFT / TPOT when each chip and cluster figure, and each SLA, moves by a few relative
steps (-25 %, -10 %, +10 %, +25 % by default); a table sorted by effect and a tornado plot.
"""

from ctxplan.sensitivity.figures import (
    DEFAULT_STEPS,
    default_figures,
    parse_steps,
    resolve_figures,
)
from ctxplan.sensitivity.result import FigureRow, Move, Outcome, SensitivityStudy
from ctxplan.sensitivity.study import moved_request, run_sensitivity

__all__ = ["DEFAULT_STEPS", "FigureRow", "Move", "Outcome", "SensitivityStudy",
           "default_figures", "moved_request", "parse_steps", "resolve_figures",
           "run_sensitivity"]
