"""The Python API: what the CLI calls, one function per command, returning typed results.

Every argument that names a preset also takes a path (YAML / JSON / HF config.json) or an
already-built object, so scripts can mix presets and their own definitions. The functions live
in one module per job (``inputs``: models, chips, clusters, contexts, the policy of the options;
``point``: one evaluation; ``search``: solve and sweep; ``serving``: capacity; ``sensitivities``;
``studies``: study and point files; ``store``: the result store; ``validation``; ``report``),
and every name is reachable here, ``ctxplan.api.solve`` as before.

A name is imported on first use (``__getattr__``): ``ctxplan eval`` loads the evaluation, not
the report page or the study-file schemas, and the command line's fast start (``--help``,
``presets``: tests/test_startup.py) never loads this package at all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Where each public name lives (tests/api/test_exports.py checks this against the imports for
# type checkers below, and that every name resolves).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "ctxplan.api.inputs": ("ChipLike", "ClusterLike", "ModelLike", "check_output",
                           "context_lengths", "format_context", "model_items", "one_model",
                           "other_pool_system", "policy_of", "precision_for", "resolve_chip",
                           "resolve_cluster",
                           "resolve_model", "resolve_models"),
    "ctxplan.api.point": ("eval_config", "evaluate", "write_trace"),
    "ctxplan.api.search": ("check_sweep_outputs", "eval_cache", "pareto", "solve",
                           "solve_request", "sweep", "write_pareto_plot", "write_sweep"),
    "ctxplan.api.serving": ("capacity", "capacity_request", "check_capacity_batch",
                            "write_capacity_plot"),
    "ctxplan.api.sensitivities": ("sensitivity", "write_tornado"),
    "ctxplan.api.store": ("export_store", "open_store", "store_choice", "store_path"),
    "ctxplan.api.studies": ("capacity_study", "evaluate_point", "file_schema", "load_point",
                            "load_study", "sensitivity_study", "solve_study"),
    "ctxplan.api.validation": ("validate", "validation_for_chip", "validation_sensitivity"),
    "ctxplan.api.report": ("REPORT_SUFFIXES", "Report", "report_assumptions", "report_results",
                           "report_study"),
    # the types the functions take and return
    "ctxplan.config.study": ("Point", "Study"),
    "ctxplan.evaluate": ("EvalConfig", "EvalResult", "Trace"),
    "ctxplan.hardware.chip": ("Chip",),
    "ctxplan.hardware.cluster": ("Cluster",),
    "ctxplan.model.precision": ("Precision",),
    "ctxplan.model.spec": ("ModelSpec",),
    "ctxplan.policy": ("Policy",),
    "ctxplan.sensitivity": ("SensitivityStudy",),
    "ctxplan.serve": ("CapacityRequest", "CapacityResult"),
    "ctxplan.solve": ("EvalCache", "SolveRequest", "SolveResult"),
    "ctxplan.solve.pareto": ("ParetoResult",),
    "ctxplan.sweep": ("Executor", "SweepResult"),
    "ctxplan.sweep.store": ("ResultStore", "StoreLike"),
    "ctxplan.validate": ("SensitivityResult", "ValidationReport"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxplan.api' has no attribute {name!r}")
    # Imported here, on first use: the fast start of the command line (module docstring).
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


if TYPE_CHECKING:
    from ctxplan.api.inputs import (
        ChipLike,
        ClusterLike,
        ModelLike,
        check_output,
        context_lengths,
        format_context,
        model_items,
        one_model,
        other_pool_system,
        policy_of,
        precision_for,
        resolve_chip,
        resolve_cluster,
        resolve_model,
        resolve_models,
    )
    from ctxplan.api.point import eval_config, evaluate, write_trace
    from ctxplan.api.report import (
        REPORT_SUFFIXES,
        Report,
        report_assumptions,
        report_results,
        report_study,
    )
    from ctxplan.api.search import (
        check_sweep_outputs,
        eval_cache,
        pareto,
        solve,
        solve_request,
        sweep,
        write_pareto_plot,
        write_sweep,
    )
    from ctxplan.api.sensitivities import sensitivity, write_tornado
    from ctxplan.api.serving import (
        capacity,
        capacity_request,
        check_capacity_batch,
        write_capacity_plot,
    )
    from ctxplan.api.store import export_store, open_store, store_choice, store_path
    from ctxplan.api.studies import (
        capacity_study,
        evaluate_point,
        file_schema,
        load_point,
        load_study,
        sensitivity_study,
        solve_study,
    )
    from ctxplan.api.validation import validate, validation_for_chip, validation_sensitivity
    from ctxplan.config.study import Point, Study
    from ctxplan.evaluate import EvalConfig, EvalResult, Trace
    from ctxplan.hardware.chip import Chip
    from ctxplan.hardware.cluster import Cluster
    from ctxplan.model.precision import Precision
    from ctxplan.model.spec import ModelSpec
    from ctxplan.policy import Policy
    from ctxplan.sensitivity import SensitivityStudy
    from ctxplan.serve import CapacityRequest, CapacityResult
    from ctxplan.solve import EvalCache, SolveRequest, SolveResult
    from ctxplan.solve.pareto import ParetoResult
    from ctxplan.sweep import Executor, SweepResult
    from ctxplan.sweep.store import ResultStore, StoreLike
    from ctxplan.validate import SensitivityResult, ValidationReport
