"""What a sensitivity study moves: hardware figures (through :mod:`ctxplan.hardware.perturb`)
and the SLAs, each by the same relative steps.

The default set is what a deployment answer can hinge on when a chip or cluster figure is not
verified: per chip its memory bandwidth, memory capacity and the dense peak of every dtype it
has; per cluster level its link bandwidth and the fixed cost of a point-to-point and of a
collective operation over it (``op_overhead``, ``collective_overhead``: a level without a
collective figure uses its point-to-point one for both); and the SLAs (the TPOT
target, and the TTFT target when there is one). Any figure :func:`ctxplan.hardware.perturb.
figures` names can be asked for instead (``--figures chip.op_overhead,cluster.board.latency``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxplan.config.units import parse_steps
from ctxplan.errors import UserInputError
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.hardware.perturb import figures as hardware_figures

__all__ = ["DECODE", "DEFAULT_STEPS", "SLA_FIGURES", "default_figures", "known_figures",
           "parse_steps", "resolve_figures"]

SLA_FIGURES = ("sla.tpot_max", "sla.ttft_max")
DEFAULT_STEPS = "-25%,-10%,+10%,+25%"


# A decode pool on a chip / cluster of its own (solve --decode-chip): its figures are named
# with this prefix (decode_chip.memory_capacity, decode_cluster.host.bandwidth); chip.* and
# cluster.* stay --chip's and --cluster's (which the decode pool shares where it has no own).
DECODE = "decode_"
System = tuple[Chip, Cluster]


def _hardware_defaults(chip: Chip, cluster: Cluster) -> list[str]:
    names = ["chip.memory_bandwidth", "chip.memory_capacity"]
    names += [f"chip.peak.{dtype}" for dtype in sorted(chip.peak_flops_per_s)]
    for level in cluster.levels:
        names += [f"cluster.{level.name}.{f}"
                  for f in ("bandwidth", "op_overhead", "collective_overhead")]
    return names


def default_figures(chip: Chip, cluster: Cluster, has_ttft: bool,
                    decode: System | None = None) -> tuple[str, ...]:
    """The figures moved unless others are named (see the module docstring); ``decode``: the
    decode pool's own chip and cluster, whose figures join the set with their prefix."""
    names = _hardware_defaults(chip, cluster)
    if decode is not None:
        names += [DECODE + n for n in _hardware_defaults(*decode)]
    names.append("sla.tpot_max")
    if has_ttft:
        names.append("sla.ttft_max")
    return tuple(names)


def known_figures(chip: Chip, cluster: Cluster, has_ttft: bool,
                  decode: System | None = None) -> tuple[str, ...]:
    own = () if decode is None else tuple(DECODE + n for n in hardware_figures(*decode))
    return hardware_figures(chip, cluster) + own + \
        (SLA_FIGURES if has_ttft else SLA_FIGURES[:1])


def resolve_figures(value: str | Sequence[str] | None, chip: Chip, cluster: Cluster,
                    has_ttft: bool, decode: System | None = None) -> tuple[str, ...]:
    """The figures to move: the default set (None), or those named, each checked."""
    if value is None:
        return default_figures(chip, cluster, has_ttft, decode)
    names = [p.strip() for p in value.split(",")] if isinstance(value, str) else list(value)
    names = [n for n in names if n]
    if not names:
        raise UserInputError("figures", value, "name figures such as chip.memory_bandwidth, or "
                             "leave the option out for the default set")
    known = known_figures(chip, cluster, has_ttft, decode)
    for name in names:
        if name not in known:
            hint = ("; sla.ttft_max needs a TTFT target (--ttft-max)"
                    if name == "sla.ttft_max" else "")
            raise UserInputError("figures", name, f"use one of: {', '.join(known)}{hint}",
                                 "no such figure")
    return tuple(dict.fromkeys(names))
