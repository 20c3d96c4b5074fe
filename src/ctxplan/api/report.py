"""The review report (``ctxplan report``, docs/report.md): a study solved now, or a saved result,
written as one HTML page with its assumptions and the validation rows of its chip."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from ctxplan import __version__
from ctxplan.api.inputs import (
    ChipLike,
    ClusterLike,
    ModelLike,
    check_output,
    model_items,
    resolve_chip,
    resolve_cluster,
    resolve_model,
)
from ctxplan.api.search import eval_cache
from ctxplan.api.studies import capacity_study, load_study, sensitivity_study, solve_study
from ctxplan.api.validation import validation_for_chip
from ctxplan.config.hardware_presets import (
    chip_names,
    cluster_names,
    hardware_definition,
    load_chip,
    load_cluster,
)
from ctxplan.config.model_presets import is_model_preset, load_model
from ctxplan.config.study import Study
from ctxplan.errors import UserInputError
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.report.page.assumptions import chip_facts, cluster_facts, model_facts
from ctxplan.report.page.render import ReportInputs, render_report
from ctxplan.report.page.view import kind_of
from ctxplan.solve import EvalCache
from ctxplan.sweep.store import StoreLike

REPORT_SUFFIXES = (".html", ".htm")
T = TypeVar("T")


@dataclass(frozen=True)
class Report:
    """A written report: where, what kind of result it shows, and that result's JSON."""

    path: Path
    kind: str                        # solve | sweep | capacity | sensitivity
    data: dict[str, Any]             # the result's JSON (as --json prints it)
    sensitivity: dict[str, Any] | None = None


def report_study(study: Study | str | Path, out: str | Path, *, sensitivity: bool = False,
                 cases: str | Path | None = None, cache: EvalCache | None = None,
                 store: StoreLike = None) -> Report:
    """Solve what a study asks and write the review page (``ctxplan report --config``): a
    capacity study when it has ``serving.rates``, else a solve (one context length) or a sweep
    (several); ``sensitivity`` also moves each figure (one context length). The page holds the
    answer with its SLA, N*(S), the per-tier table, the search path, the chip, cluster and
    model figures with their sources and flags, and the validation rows on the chip (``cases``:
    the validation directory, default the source tree's). ``cache`` / ``store`` as in
    :func:`solve`. docs/report.md."""
    path = check_output(out, "out", REPORT_SUFFIXES)
    s = study if not isinstance(study, str | Path) else load_study(study)
    if sensitivity and len(s.contexts) != 1:
        raise UserInputError("sensitivity", True, "give one context length for a report with "
                             "sensitivity, or leave --sensitivity out",
                             f"the study lists {len(s.contexts)}")
    shared = eval_cache(store, cache)
    data: dict[str, Any]
    if s.serving_options().get("rates") is not None:
        data = capacity_study(s, cache=shared).to_dict()
    else:
        swept = solve_study(s, cache=shared)
        data = swept.points[0].to_dict() if len(swept.points) == 1 else swept.to_dict()
    moved = sensitivity_study(s, cache=shared).to_dict() if sensitivity else None
    cluster = s.cluster if s.cluster is not None else resolve_cluster(None, s.chip)
    source = ("command-line flags, solved now" if s.source == "command line"
              else f"study file {s.source}, solved now")
    return _write_report(path, data, source, list(s.models) or [s.model], s.chip, cluster,
                         cases, moved)


def report_results(results: Mapping[str, Any] | str | Path, out: str | Path, *,
                   model: ModelLike | Sequence[ModelLike] | None = None,
                   chip: ChipLike | None = None, cluster: ClusterLike = None,
                   cases: str | Path | None = None) -> Report:
    """Write the review page of a saved result (``ctxplan report --from``): the ``--json`` of
    ``solve`` (with ``--sensitivity`` too), ``sweep``, ``capacity``, ``sensitivity`` or
    ``pareto``, as a
    mapping or a file. The result names its model, chip and cluster; their figures are the
    presets of those names unless ``model`` / ``chip`` / ``cluster`` give the definitions it
    was solved with (a name that is no preset is reported as such, figures left out)."""
    path = check_output(out, "out", REPORT_SUFFIXES)
    where = "the result"
    if isinstance(results, str | Path):
        where = f"saved result {results}"
        results = _read_result(results)
    data = {k: v for k, v in results.items() if k != "timings"}
    try:
        kind = kind_of(data)
    except ValueError as exc:
        raise UserInputError("from", str(where), "give the --json output of ctxplan solve, "
                             "sweep, capacity, sensitivity or pareto", str(exc)) from None
    head = data["points"][0] if kind == "sweep" and data.get("points") else data
    if kind == "sweep" and not data.get("points"):
        raise UserInputError("from", str(where), "give a sweep with at least one point",
                             "no points")
    models = list(dict.fromkeys(data.get("models") or [p["model"] for p in data["points"]])) \
        if kind == "sweep" else [head["model"]]
    names = {"model": ",".join(models), "chip": head["chip"], "cluster": head["cluster"]}
    source = f"{where} (the --json of ctxplan {kind})"
    return _write_report(path, data, source, model or models, chip or names["chip"],
                         cluster or names["cluster"], cases, None, named=names)


def _read_result(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise UserInputError("from", str(path), "give the path of a saved --json result",
                             "no such file")
    try:
        data = json.loads(p.read_text("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UserInputError("from", str(path), "give the --json output of a ctxplan command",
                             f"not JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise UserInputError("from", str(path), "give the --json output of a ctxplan command",
                             "not a JSON object")
    return data


def _write_report(path: Path, data: dict[str, Any], source: str,
                  model: ModelLike | Sequence[ModelLike],
                  chip: ChipLike, cluster: ClusterLike, cases: str | Path | None,
                  sensitivity: dict[str, Any] | None,
                  named: Mapping[str, str] | None = None) -> Report:
    facts, chip_obj = report_assumptions(model, chip, cluster, named)
    chip_name = chip_obj.name if chip_obj is not None else str(chip)
    validation = validation_for_chip(chip_obj if chip_obj is not None else chip_name, cases)
    html = render_report(ReportInputs(data=data, assumptions=facts, validation=validation,
                                      source=source, version=__version__,
                                      sensitivity=sensitivity))
    path.write_text(html, encoding="utf-8")
    return Report(path, kind_of(data), data,
                  sensitivity or (data.get("sensitivity") if isinstance(data, dict) else None))


def report_assumptions(model: ModelLike | Sequence[ModelLike], chip: ChipLike,
                       cluster: ClusterLike,
                       named: Mapping[str, str] | None = None
                       ) -> tuple[dict[str, Any], Chip | None]:
    """The chip, cluster and model figures a report shows, with their sources, flags and notes
    (report.page.assumptions). ``named``: the names a saved result gives, looked up as presets;
    a name that is not one is reported, not guessed."""
    facts: dict[str, Any] = {"notes": []}
    given = named or {}

    def origin(kind: str, value: object, presets: Sequence[str], loaded: object,
               load: Callable[[str], object]) -> tuple[str, bool]:
        """How the object was defined, and whether its preset's notes describe it."""
        if isinstance(value, str) and value.strip().lower() in presets:
            key = value.strip().lower()
            return f"preset {key}", load(key) == loaded
        if isinstance(value, str):
            return f"file {value}", False
        name = getattr(loaded, "name", "")
        same = name in presets and load(name) == loaded
        return (f"preset {name}" if same else "your definition (not a preset)"), same

    def missing(kind: str, name: str) -> None:
        facts["notes"].append(
            f"The saved result names {kind} '{name}', which is not a preset: its figures are not "
            f"in the result. Give the definition it was solved with (ctxplan report --from "
            f"FILE --{kind} PATH) to show them.")

    def found(kind: str, name: object, load: Callable[[], T]) -> T | None:
        """The object, or None with a note when a saved result names what is no preset."""
        try:
            return load()
        except UserInputError:
            if kind not in given:
                raise
            missing(kind, str(name))
            return None

    chip_obj = found("chip", chip, lambda: resolve_chip(chip))
    if chip_obj is not None:
        text, same = origin("chip", chip, chip_names(), chip_obj, load_chip)
        facts["chip"] = chip_facts(chip_obj, hardware_definition("chip", chip_obj.name)
                                   if same else None, text)

    def the_cluster() -> Cluster | None:
        if isinstance(cluster, Cluster):
            return cluster
        if cluster:
            return load_cluster(cluster)
        return resolve_cluster(None, chip_obj) if chip_obj is not None else None

    cluster_obj = found("cluster", cluster, the_cluster)
    if cluster_obj is not None:
        text, same = origin("cluster", cluster, cluster_names(), cluster_obj, load_cluster)
        facts["cluster"] = cluster_facts(cluster_obj, hardware_definition(
            "cluster", cluster_obj.name) if same else None, text)
    items = model_items(model)
    facts["models"] = []
    for item in items:
        model_obj = found("model", item, partial(resolve_model, item))
        if model_obj is None:
            continue
        if isinstance(item, str):
            text = f"preset {model_obj.name}" if is_model_preset(item) else f"file {item}"
        else:
            same = is_model_preset(model_obj.name) and load_model(model_obj.name) == model_obj
            text = f"preset {model_obj.name}" if same else "your definition (not a preset)"
        facts["models"].append(model_facts(model_obj, text,
                                           anchor=model_obj.name if len(items) > 1 else ""))
    return facts, chip_obj
