"""Study and point files (docs/study-files.md): loading them, and each command run from one."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Unpack

from ctxplan.api.inputs import format_context, one_model
from ctxplan.api.point import evaluate
from ctxplan.api.search import sweep
from ctxplan.api.sensitivities import sensitivity
from ctxplan.api.serving import capacity
from ctxplan.config.json_schema import json_schema
from ctxplan.config.options import RunOptions, with_options
from ctxplan.config.study import Point, Study
from ctxplan.config.study import load_point as _load_point
from ctxplan.config.study import load_study as _load_study
from ctxplan.errors import UserInputError
from ctxplan.evaluate import EvalResult
from ctxplan.sensitivity import SensitivityStudy
from ctxplan.serve import CapacityResult
from ctxplan.solve import EvalCache, SolveResult
from ctxplan.sweep import Executor, SweepResult
from ctxplan.sweep.store import StoreLike


def load_study(path: str | Path | None = None, *, sets: Sequence[str] = (),
               flags: Mapping[str, Any] | None = None) -> Study:
    """A study file (docs/study-files.md), with ``flags`` ({"sla.tpot_max": "30ms", ...})
    overriding it and ``sets`` ("chip.memory_gb=96", ...) applied last."""
    return _load_study(path, sets=sets, flags=flags)


def load_point(path: str | Path | None = None, *, sets: Sequence[str] = (),
               flags: Mapping[str, Any] | None = None) -> Point:
    """A point file (docs/study-files.md), with ``flags`` and ``sets`` as in load_study."""
    return _load_point(path, sets=sets, flags=flags)


def file_schema(kind: str = "study") -> dict[str, Any]:
    """The JSON Schema of study ("study") or point ("point") files, for editor completion."""
    return json_schema(kind)


def _study(study: Study | str | Path) -> Study:
    return study if not isinstance(study, str | Path) else load_study(study)


def evaluate_point(point: Point | str | Path, *,
                   trace_path: str | Path | None = None,
                   store: StoreLike = None) -> EvalResult:
    """Simulate a loaded point (or the point file at a path); ``store`` as in evaluate."""
    p = point if not isinstance(point, str | Path) else load_point(point)
    return evaluate(p.model, p.chip, p.context_length, p.phase, p.cp, trace_path=trace_path,
                    store=store, **p.eval_options())


@with_options(RunOptions)
def solve_study(study: Study | str | Path, *, cache: EvalCache | None = None,
                executor: Executor | None = None,
                on_point: Callable[[SolveResult], None] | None = None,
                store: StoreLike = None, **run: Unpack[RunOptions]) -> SweepResult:
    """Solve a loaded study (or the study file at a path) at each of its context lengths,
    sharing one cache; one point per context, in the study's order. ``store`` and the run
    options as in :func:`sweep`."""
    s = _study(study)
    return sweep(list(s.models), s.chip, list(s.contexts), cache=cache, executor=executor,
                 on_point=on_point, store=store, **run, **s.solve_options())


def capacity_study(study: Study | str | Path, *, cache: EvalCache | None = None,
                   store: StoreLike = None) -> CapacityResult:
    """:func:`capacity` for a loaded study (or the study file at a path): its model, chip,
    search options and ``serving`` section. Without ``serving.contexts`` the study's one
    context length is the whole mix."""
    s = _study(study)
    one_model(s, "capacity")
    serving = s.serving_options()
    if serving.get("context_mix") is None:
        if len(s.contexts) != 1:
            raise UserInputError("serving.contexts", None, "give the mix of context lengths, "
                                 "e.g. serving.contexts: 128K:0.7,1M:0.3",
                                 f"the study lists {len(s.contexts)} context lengths")
        serving["context_mix"] = str(s.contexts[0])
    solve_options = s.solve_options()
    if solve_options.get("batch") == 1:
        del solve_options["batch"]   # the file's default (or batch: 1): not a fixed batch
    return capacity(s.model, s.chip, cache=cache, store=store, **serving, **solve_options)


def sensitivity_study(study: Study | str | Path, *, cache: EvalCache | None = None,
                      store: StoreLike = None,
                      on_solve: Callable[[str, float], None] | None = None
                      ) -> SensitivityStudy:
    """:func:`sensitivity` for a loaded study (or the study file at a path) with one context
    length: its model, chip, search options and ``sensitivity`` section."""
    s = _study(study)
    one_model(s, "sensitivity")
    if len(s.contexts) != 1:
        raise UserInputError("contexts", [format_context(c) for c in s.contexts],
                             "give one context length for a sensitivity study (--context)",
                             f"the study lists {len(s.contexts)}")
    return sensitivity(s.model, s.chip, s.contexts[0], cache=cache, store=store,
                       on_solve=on_solve, **s.sensitivity_options(), **s.solve_options())
