"""Validation against published measurements: the cases in ``validation/*.yaml``, run in the open.

Each case file is one measured row of a paper (model, chip, cluster, phase, context, layout,
batch, precision, measured seconds, the source with its table). A decode case may measure the
attention part of one layer instead of the whole step (``quantity: attention_per_layer``, Table 8
of arXiv:2411.01783), with named parts (``breakdown``) held against the simulated critical path
(:mod:`ctxplan.evaluate.breakdown`). :func:`run_validation` simulates
every case with the presets as they are (no per-case tuning: one chip preset serves them all)
and reports, per case, the measured and simulated latency and the signed relative error
``(simulated - measured) / measured``, then the median and the worst absolute error.

Beside the cases, kernel-level rows (:mod:`ctxplan.validate_kernels`, ``validation/kernels/``):
published kernel and collective timings, fitted on some GPUs' tables and predicting the others',
reported apart with their own medians.

Every case has a role. ``calibration``: the row was used to set a figure of a preset (so its
error shows a fit, not evidence; ``validation/fit.py`` reproduces the fit). ``prediction``: the
row was used for nothing. The report keeps the two apart (:meth:`ValidationReport.summary`,
``by_role``). :func:`sensitivity` reruns cases with one hardware figure scaled (the machinery of
:mod:`ctxplan.hardware.perturb`). docs/validation.md has the table, the account of every fitted
figure against the rows that constrain it, and where the simulator is off and why.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ctxplan.config.checks import check_point
from ctxplan.config.hardware_presets import load_chip, load_cluster
from ctxplan.config.loader import STRICT, read_mapping
from ctxplan.config.loader import validate as validate_schema
from ctxplan.config.model_presets import load_model
from ctxplan.config.units import parse_tokens
from ctxplan.errors import UserInputError
from ctxplan.evaluate import EvalConfig, evaluate
from ctxplan.evaluate.breakdown import decode_attention_part_s
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.hardware.perturb import figure_value, figures, scale
from ctxplan.model.precision import Precision
from ctxplan.policy import Policy
from ctxplan.validate_kernels import KernelResult, KernelRow, run_kernel_rows
from ctxplan.validate_kernels import summary as kernel_summary

_STRICT = STRICT
_NonEmpty = Annotated[str, Field(min_length=1)]
_DTYPES = Literal["bf16", "fp16", "fp8", "int8", "fp32"]
ROLES = ("calibration", "prediction")


class LayoutSchema(BaseModel):
    """The parallel layout of the measured run: CP ranks (hosts) x TP chips per rank."""

    model_config = _STRICT

    cp: Annotated[int, Field(ge=1)]
    tp: Annotated[int, Field(ge=1)]


class PrecisionSchema(BaseModel):
    """Data types of the measured run (see :class:`ctxplan.model.precision.Precision`)."""

    model_config = _STRICT

    attention_weights: _DTYPES
    ffn_weights: _DTYPES
    attention: _DTYPES
    activation_bytes: Annotated[int, Field(ge=1, le=4)] = 2


class PartSchema(BaseModel):
    """One named part of a measured breakdown (Table 8 of arXiv:2411.01783)."""

    model_config = _STRICT

    measured_s: Annotated[float, Field(gt=0)]
    tolerance: Annotated[float, Field(gt=0, le=1)] | None = None   # None: reported, no target


_PART_NAMES = Literal["attention_op", "ring_loop", "sendrecv", "all2all"]
QUANTITIES = ("latency", "attention_per_layer")


class CaseSchema(BaseModel):
    """One measured row: ``validation/<name>.yaml``."""

    model_config = _STRICT

    name: _NonEmpty | None = None          # defaults to the file name
    source: _NonEmpty                      # paper and table, e.g. "arXiv:2411.01783 Table 6"
    role: Literal["calibration", "prediction"]   # used to set a figure / used for nothing
    model: _NonEmpty
    chip: _NonEmpty
    cluster: _NonEmpty
    phase: Literal["prefill", "decode"]
    context: str | int                     # 8K, 128K, 1M or a whole number of tokens
    layout: LayoutSchema
    batch: Annotated[int, Field(ge=1)] = 1
    precision: PrecisionSchema
    kv_tier: str | int | None = None       # None: the model's default tier
    pass_q: Literal["broadcast", "ring"] | None = None   # decode: how queries move to the shards
    # What measured_s is: "latency" (TTFT for prefill, TTIT for decode) or, for decode,
    # "attention_per_layer": the attention part of one layer (Table 8 of arXiv:2411.01783).
    quantity: Literal["latency", "attention_per_layer"] = "latency"
    breakdown: dict[_PART_NAMES, PartSchema] = Field(default_factory=dict)
    measured_s: Annotated[float, Field(gt=0)]
    tolerance: Annotated[float, Field(gt=0, le=1)]   # target on |relative error|
    notes: str | None = None

    @model_validator(mode="after")
    def _decode_only(self) -> CaseSchema:
        if self.phase != "decode":
            if self.pass_q is not None:
                raise ValueError("pass_q is for decode cases; remove it from a prefill case")
            if self.quantity != "latency":
                raise ValueError("quantity attention_per_layer is for decode cases")
        if self.breakdown and self.quantity != "attention_per_layer":
            raise ValueError("a breakdown belongs to quantity: attention_per_layer")
        return self

    @field_validator("context")
    @classmethod
    def _context(cls, value: str | int) -> str | int:
        try:
            parse_tokens(value, "context")
        except UserInputError as exc:
            raise ValueError(exc.fix) from None
        return value

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("name the paper and table the figure comes from")
        return value


@dataclass(frozen=True)
class Case:
    """A validated case, with its context parsed."""

    name: str
    source: str
    role: str
    model: str
    chip: str
    cluster: str
    phase: str
    context_length: int
    cp: int
    tp: int
    batch: int
    precision: Precision
    kv_tier: str | int | None
    measured_s: float
    tolerance: float
    notes: str
    path: str
    pass_q: str | None = None
    quantity: str = "latency"
    parts: tuple[tuple[str, float, float | None], ...] = ()   # (part, measured s, tolerance)

    @property
    def metric(self) -> str:
        """What was measured: TTFT for prefill, TTIT (= TPOT) for decode, or the attention part
        of one decode layer (ATTN/layer)."""
        if self.quantity == "attention_per_layer":
            return "ATTN/layer"
        return "TTFT" if self.phase == "prefill" else "TTIT"


@dataclass(frozen=True)
class PartResult:
    """One named part of a breakdown case, measured against simulated."""

    name: str
    measured_s: float
    simulated_s: float | None
    tolerance: float | None       # None: reported, no target

    @property
    def error(self) -> float | None:
        if self.simulated_s is None:
            return None
        return (self.simulated_s - self.measured_s) / self.measured_s

    @property
    def within(self) -> bool:
        """Within its target (a part without one always is)."""
        if self.tolerance is None:
            return True
        e = self.error
        return e is not None and abs(e) <= self.tolerance

    def to_dict(self) -> dict[str, Any]:
        return {"part": self.name, "measured": self.measured_s, "simulated": self.simulated_s,
                "error": self.error, "tolerance": self.tolerance,
                "within_tolerance": self.within}


@dataclass(frozen=True)
class CaseResult:
    case: Case
    simulated_s: float | None     # None when the configuration does not fit in memory
    reason: str                   # why not simulated ("" when simulated)
    parts: tuple[PartResult, ...] = ()

    @property
    def error(self) -> float | None:
        """Signed relative error (simulated - measured) / measured."""
        if self.simulated_s is None:
            return None
        return (self.simulated_s - self.case.measured_s) / self.case.measured_s

    @property
    def within(self) -> bool:
        """The measured figure within its target, and so is every part that has one."""
        e = self.error
        return (e is not None and abs(e) <= self.case.tolerance
                and all(p.within for p in self.parts))

    def to_dict(self) -> dict[str, Any]:
        c = self.case
        return {
            "name": c.name, "source": c.source, "role": c.role, "metric": c.metric,
            "model": c.model, "chip": c.chip, "cluster": c.cluster, "phase": c.phase,
            "context_length": c.context_length, "cp": c.cp, "tp": c.tp, "batch": c.batch,
            "precision": asdict(c.precision), "kv_tier": c.kv_tier, "pass_q": c.pass_q,
            "measured": c.measured_s, "simulated": self.simulated_s, "error": self.error,
            "tolerance": c.tolerance, "within_tolerance": self.within, "reason": self.reason,
            "breakdown": [p.to_dict() for p in self.parts],
        }


@dataclass(frozen=True)
class ValidationReport:
    results: list[CaseResult]
    # Kernel-level rows (ctxplan.validate_kernels): published kernel and collective timings,
    # calibration tables apart from prediction tables ([] when not run).
    kernels: list[KernelResult] = field(default_factory=list)

    @property
    def abs_errors(self) -> list[float]:
        return [abs(e) for r in self.results if (e := r.error) is not None]

    @property
    def median_abs_error(self) -> float | None:
        errs = self.abs_errors
        return statistics.median(errs) if errs else None

    @property
    def worst(self) -> CaseResult | None:
        scored = [r for r in self.results if r.error is not None]
        return max(scored, key=lambda r: abs(r.error or 0.0)) if scored else None

    @property
    def all_within(self) -> bool:
        return all(r.within for r in self.results)

    @property
    def kernel_targets_met(self) -> bool:
        """Every role's kernel rows meet their median target (True when none were run)."""
        stats = kernel_summary(self.kernels)
        return all(x["within_target"] for x in stats.values() if x["rows"])

    def summary(self) -> dict[str, Any]:
        worst = self.worst
        return {
            "cases": len(self.results),
            "simulated": len(self.abs_errors),
            "within_tolerance": sum(r.within for r in self.results),
            "median_abs_error": self.median_abs_error,
            "worst_abs_error": abs(worst.error) if worst and worst.error is not None else None,
            "worst_case": worst.case.name if worst else None,
            "by_role": {role: _role_summary(self.of_role(role)) for role in ROLES},
            "kernels": kernel_summary(self.kernels),
        }

    def of_role(self, role: str) -> list[CaseResult]:
        """The results of the cases of one role, in report order."""
        return [r for r in self.results if r.case.role == role]

    def to_dict(self) -> dict[str, Any]:
        return {"cases": [r.to_dict() for r in self.results],
                "kernels": [k.to_dict() for k in self.kernels], "summary": self.summary()}


def _role_summary(results: list[CaseResult]) -> dict[str, Any]:
    scored = [r for r in results if r.error is not None]
    errs = [abs(r.error or 0.0) for r in scored]
    worst = max(scored, key=lambda r: abs(r.error or 0.0)) if scored else None
    return {
        "cases": len(results),
        "within_tolerance": sum(r.within for r in results),
        "median_abs_error": statistics.median(errs) if errs else None,
        "worst_abs_error": max(errs) if errs else None,
        "worst_case": worst.case.name if worst else None,
    }


# ------------------------------------------------------------------------------------ loading


def default_cases_dir() -> Path:
    """``validation/`` of the source tree (editable install), else of the working directory."""
    for base in (Path(__file__).resolve().parents[2], Path.cwd()):
        d = base / "validation"
        if d.is_dir() and any(d.glob("*.yaml")):
            return d
    raise UserInputError("cases", "validation/",
                         "run from the ctxplan source tree or pass --cases DIR",
                         "no validation/*.yaml found")


def load_case(path: str | Path) -> Case:
    p = Path(path)
    s = validate_schema(CaseSchema, read_mapping(p, "case"), str(p))
    return Case(
        name=s.name or p.stem, source=s.source.strip(), role=s.role, model=s.model,
        chip=s.chip, cluster=s.cluster, phase=s.phase,
        context_length=parse_tokens(s.context, "context"), cp=s.layout.cp, tp=s.layout.tp,
        batch=s.batch,
        precision=Precision(attention_weights=s.precision.attention_weights,
                            ffn_weights=s.precision.ffn_weights,
                            attention=s.precision.attention,
                            activation_bytes=s.precision.activation_bytes),
        kv_tier=s.kv_tier, measured_s=s.measured_s, tolerance=s.tolerance,
        notes=(s.notes or "").strip(), path=str(p), pass_q=s.pass_q, quantity=s.quantity,
        parts=tuple((name, part.measured_s, part.tolerance)
                    for name, part in sorted(s.breakdown.items(),
                                             key=lambda kv: _PART_ORDER.index(kv[0]))),
    )


_PART_ORDER = ("attention_op", "ring_loop", "sendrecv", "all2all")


def _order(c: Case) -> tuple[Any, ...]:
    # Reading order: role (calibration first), model, phase (prefill first), what was measured
    # (latencies first), cluster, layout, batch, then context.
    return (ROLES.index(c.role), c.model, c.phase != "prefill", QUANTITIES.index(c.quantity),
            c.cluster, c.cp, c.tp, c.batch, c.context_length, c.name)


def load_cases(directory: str | Path | None = None,
               names: Iterable[str] | None = None) -> list[Case]:
    """Every ``*.yaml`` case of the directory (sorted by file name), optionally only ``names``."""
    d = Path(directory) if directory is not None else default_cases_dir()
    if not d.is_dir():
        raise UserInputError("cases", str(d), "give a directory of validation/*.yaml files",
                             "no such directory")
    cases = sorted((load_case(p) for p in d.glob("*.yaml")), key=_order)
    seen: set[str] = set()
    for c in cases:
        if c.name in seen:
            raise UserInputError("name", c.name, "give every case a unique name",
                                 f"{c.path} repeats a case name")
        seen.add(c.name)
    if names is not None:
        wanted = list(names)
        unknown = [n for n in wanted if n not in seen]
        if unknown:
            raise UserInputError("case", unknown[0],
                                 f"use one of: {', '.join(c.name for c in cases)}",
                                 "unknown case")
        cases = [c for c in cases if c.name in wanted]
    if not cases:
        raise UserInputError("cases", str(d), "add validation cases (*.yaml) there",
                             "no cases found")
    return cases


# ------------------------------------------------------------------------------------ running


def case_config(case: Case, *, chip: Chip | None = None,
                cluster: Cluster | None = None) -> EvalConfig:
    """The evaluation of a case. ``chip`` / ``cluster`` replace the presets (for fitting)."""
    cfg = EvalConfig(
        model=load_model(case.model), chip=chip or load_chip(case.chip),
        cluster=cluster or load_cluster(case.cluster), phase=case.phase,
        context_length=case.context_length, cp=case.cp, tp=case.tp, batch=case.batch,
        kv_tier=case.kv_tier, policy=Policy(
            precision=case.precision,
            pass_q=case.pass_q if case.pass_q is not None else Policy.pass_q),
    )
    return check_point(cfg)  # the layout against the model and the cluster


def run_case(case: Case, *, chip: Chip | None = None,
             cluster: Cluster | None = None) -> CaseResult:
    result, _ = evaluate(case_config(case, chip=chip, cluster=cluster))
    if case.quantity == "latency" or not result.simulated:
        return CaseResult(case, result.latency_s, result.reason)
    # The attention part of one decode layer, from the critical path (ctxplan.evaluate.breakdown).
    bd = result.breakdown
    parts = tuple(PartResult(name, measured, decode_attention_part_s(bd, name), tol)
                  for name, measured, tol in case.parts)
    return CaseResult(case, decode_attention_part_s(bd), result.reason, parts)


def run_validation(cases: Sequence[Case] | None = None, *, chip: Chip | None = None,
                   cluster: Cluster | None = None,
                   kernel_rows: Sequence[KernelRow] = ()) -> ValidationReport:
    """Simulate every case (all of ``validation/`` by default) and every kernel row given."""
    cases = list(cases) if cases is not None else load_cases()
    return ValidationReport([run_case(c, chip=chip, cluster=cluster) for c in cases],
                            run_kernel_rows(kernel_rows))


# -------------------------------------------------------------------------------- sensitivity


@dataclass(frozen=True)
class SensitivityResult:
    """How one case's simulated latency moves when one hardware figure is scaled."""

    case: str
    figure: str             # as ctxplan.hardware.perturb.scale names it, e.g. "chip.peak.fp8"
    factor: float
    value: float            # the figure's preset value (FLOP/s, bytes, ns, fraction)
    base_s: float | None
    scaled_s: float | None  # None: not simulated (does not fit, or the scaled figure is invalid)
    reason: str

    @property
    def change(self) -> float | None:
        """Relative change of the latency: scaled / base - 1."""
        if self.base_s is None or self.scaled_s is None:
            return None
        return self.scaled_s / self.base_s - 1.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "change": self.change}


def case_figures(case: Case) -> tuple[str, ...]:
    """Every hardware figure of a case's chip and cluster that :func:`sensitivity` can scale."""
    return figures(load_chip(case.chip), load_cluster(case.cluster))


def sensitivity(cases: Sequence[Case], figure_names: Sequence[str] | None = None,
                factor: float = 1.1) -> list[SensitivityResult]:
    """Rerun every case with each figure scaled by ``factor`` (all figures of the case's chip
    and cluster by default; a named figure the case's hardware lacks is a ``UserInputError``).
    One figure at a time, the preset's others unchanged."""
    if not (factor > 0 and factor != 1.0 and factor < float("inf")):
        raise UserInputError("factor", factor, "give a positive factor other than 1, e.g. 1.1",
                             "not a perturbation")
    out: list[SensitivityResult] = []
    for case in cases:
        chip, cluster = load_chip(case.chip), load_cluster(case.cluster)
        names = list(figure_names) if figure_names is not None else figures(chip, cluster)
        known = figures(chip, cluster)
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UserInputError("figure", unknown[0], f"use one of: {', '.join(known)}",
                                 f"no such figure for {case.name}")
        base = _simulated(case, chip, cluster)
        for name in names:
            value = figure_value(chip, cluster, name)
            try:
                new_chip, new_cluster = scale(chip, cluster, name, factor)
            except ValueError as exc:
                out.append(SensitivityResult(case.name, name, factor, value, base, None,
                                             f"scaled figure invalid: {exc}"))
                continue
            scaled = _simulated(case, new_chip, new_cluster)
            reason = "" if scaled is not None else "does not fit with the scaled figure"
            out.append(SensitivityResult(case.name, name, factor, value, base, scaled, reason))
    return out


def _simulated(case: Case, chip: Chip, cluster: Cluster) -> float | None:
    return _simulated_cached(case, chip, cluster)


@lru_cache(maxsize=4096)
def _simulated_cached(case: Case, chip: Chip, cluster: Cluster) -> float | None:
    # A scaled figure that changes nothing for this case (a level it never crosses) gives an
    # equal chip / cluster, hence a cache hit.
    return run_case(case, chip=chip, cluster=cluster).simulated_s


__all__ = ["QUANTITIES", "ROLES", "Case", "CaseResult", "CaseSchema", "PartResult",
           "SensitivityResult", "ValidationReport", "case_config", "case_figures",
           "default_cases_dir", "load_case", "load_cases", "run_case", "run_validation",
           "sensitivity"]
