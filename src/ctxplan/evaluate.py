"""Single-point evaluation: one fully specified configuration -> TTFT or TPOT, memory, bytes.

The solver treats this as a black box. A configuration whose memory does not fit is reported as
such and never simulated (the capacity wall costs no simulation).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ctxplan.errors import CtxplanError, UserInputError
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.mapping import ops
from ctxplan.mapping.builder import GraphBuilder
from ctxplan.mapping.decode import decode_structure, emit_decode, pass_q_analytic_bytes
from ctxplan.mapping.layout import Layout, Precision, make_layout
from ctxplan.mapping.memory import MemoryReport, memory_report
from ctxplan.mapping.prefill import emit_prefill, pass_kv_analytic_bytes
from ctxplan.model.kv import default_kv_tiers, resolve_kv_tier
from ctxplan.model.spec import ModelSpec
from ctxplan.sim import EventLimitError, SimResult, SimulationError, paused_gc

# Bumped whenever a change alters simulated figures: part of every cache / store key.
SIM_VERSION = "2"  # 2: elementwise traffic in the mapping (issue 5)

DEFAULT_EVENT_LIMIT = 200_000_000


@dataclass(frozen=True)
class EvalConfig:
    """Everything that determines one evaluation."""

    model: ModelSpec
    chip: Chip
    cluster: Cluster
    phase: str                          # "prefill" | "decode"
    context_length: int                 # S, tokens per sequence
    cp: int                             # Np (prefill) or Nd (decode)
    tp: int = 1                         # chips per CP rank
    batch: int = 1
    kv_tier: str | int | None = None    # tier name or bytes per token per layer; None: default
    mla_mode: str | None = None         # None: standard for prefill, absorbed for decode
    precision: Precision | None = None  # None: the model's weight dtype, BF16 attention
    event_limit: int = DEFAULT_EVENT_LIMIT
    periodic_shortcut: bool = False     # True: extrapolate repeated layers (below); else all
    pass_q: str = "broadcast"           # decode: "broadcast" or "ring" query movement

    def resolved_precision(self) -> Precision:
        if self.precision is not None:
            return self.precision
        w = self.model.weight_dtype
        return Precision(attention_weights=w, ffn_weights=w)

    def kv(self) -> tuple[str, int]:
        tier = self.kv_tier if self.kv_tier is not None else default_kv_tiers(self.model)[0]
        return resolve_kv_tier(self.model, tier)

    def layout(self) -> Layout:
        _, c_kv = self.kv()
        _check_dtypes(self.resolved_precision(), self.chip)
        return make_layout(
            self.model, phase=self.phase, cp=self.cp, tp=self.tp, batch=self.batch,
            context_length=self.context_length, c_kv_bytes=c_kv, mla_mode=self.mla_mode,
            precision=self.resolved_precision(), max_chips=self.cluster.max_chips,
            pass_q=self.pass_q,
        )

    def key(self) -> str:
        """Hash of the full configuration and the simulator version (cache and store key).

        The event limit is left out: it decides only whether a simulation may finish, never
        what a finished one measured, so results under any limit are interchangeable."""
        fields = _plain(self)
        del fields["event_limit"]
        blob = json.dumps([SIM_VERSION, fields], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _check_dtypes(p: Precision, chip: Chip) -> None:
    """Every compute dtype must have a peak on the chip (and a known width)."""
    known = sorted(chip.peak_flops_per_s)
    for field_name in ("attention_weights", "ffn_weights", "attention"):
        dtype = getattr(p, field_name)
        if dtype not in chip.peak_flops_per_s:
            raise UserInputError(
                field_name, dtype,
                f"chip {chip.name} has peaks for {', '.join(known)}: use one of them (a model "
                "shipped in another dtype, e.g. int4, runs its matmuls in one of these)",
                "no peak FLOP/s for this dtype")


def _plain(obj: Any) -> Any:
    if hasattr(obj, "__dataclass_fields__"):
        return {k: _plain(v) for k, v in asdict(obj).items()}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj


@dataclass(frozen=True)
class CommReport:
    pattern: str                 # "pass-kv" | "pass-q"
    ring_steps_per_layer: int    # prefill: Np - 1; decode: 0 (no ring)
    sends_per_layer: int         # CP-pattern transfer tasks per layer
    analytic_bytes: int          # closed form (docs/mapping.md)
    simulated_bytes: int         # summed from the simulated transfer tasks of the pattern


@dataclass(frozen=True)
class EvalResult:
    phase: str
    model: str
    chip: str
    cluster: str
    context_length: int
    batch: int
    kv_tier: str
    c_kv_bytes: int
    cp: int
    tp: int
    chips: int
    mla_mode: str
    latency_s: float | None      # TTFT (prefill) or TPOT (decode); None when not simulated
    memory: MemoryReport
    comm: CommReport | None
    events: int
    tasks: int
    simulated: bool
    reason: str                  # why not simulated ("" when simulated)
    busy_s_by_kind: dict[str, float] = field(default_factory=dict)
    max_compute_utilisation: float = 0.0
    max_link_utilisation: float = 0.0
    key: str = ""
    layers_simulated: int = 0    # layers in the simulated graph (fewer: periodic shortcut)

    @property
    def ttft_s(self) -> float | None:
        return self.latency_s if self.phase == "prefill" else None

    @property
    def tpot_s(self) -> float | None:
        return self.latency_s if self.phase == "decode" else None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "phase": self.phase, "model": self.model, "chip": self.chip,
            "cluster": self.cluster, "context_length": self.context_length,
            "batch": self.batch, "kv_tier": self.kv_tier, "c_kv_bytes": self.c_kv_bytes,
            "cp": self.cp, "tp": self.tp, "chips": self.chips, "mla_mode": self.mla_mode,
        }
        d["ttft_s" if self.phase == "prefill" else "tpot_s"] = self.latency_s
        d["simulated"] = self.simulated
        d["reason"] = self.reason
        d["memory"] = self.memory.to_dict()
        d["comm"] = asdict(self.comm) if self.comm else None
        d["events"] = self.events
        d["layers_simulated"] = self.layers_simulated
        d["tasks"] = self.tasks
        d["utilisation"] = {"max_compute": self.max_compute_utilisation,
                            "max_link": self.max_link_utilisation}
        d["busy_s_by_kind"] = dict(sorted(self.busy_s_by_kind.items()))
        d["key"] = self.key
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvalResult:
        """The exact inverse of :meth:`to_dict` (floats travel as their shortest repr, which
        JSON reads back bit for bit). tests/sweep/test_store.py checks every field, so a field
        added without a way back fails there."""
        phase = d["phase"]
        comm = d["comm"]
        util = d["utilisation"]
        return cls(
            phase=phase, model=d["model"], chip=d["chip"], cluster=d["cluster"],
            context_length=d["context_length"], batch=d["batch"], kv_tier=d["kv_tier"],
            c_kv_bytes=d["c_kv_bytes"], cp=d["cp"], tp=d["tp"], chips=d["chips"],
            mla_mode=d["mla_mode"],
            latency_s=d["ttft_s" if phase == "prefill" else "tpot_s"],
            memory=MemoryReport(**d["memory"]),
            comm=CommReport(**comm) if comm is not None else None,
            events=d["events"], tasks=d["tasks"], simulated=d["simulated"], reason=d["reason"],
            busy_s_by_kind=dict(d["busy_s_by_kind"]),
            max_compute_utilisation=util["max_compute"], max_link_utilisation=util["max_link"],
            key=d["key"], layers_simulated=d["layers_simulated"],
        )


@dataclass
class Trace:
    """The simulated graph and its timings, for the Perfetto export."""

    builder: GraphBuilder
    result: SimResult


def check_memory(cfg: EvalConfig) -> MemoryReport:
    """Per-chip memory of the configuration, without simulating."""
    return memory_report(cfg.model, cfg.layout(), cfg.chip)


def build_graph(cfg: EvalConfig, lay: Layout | None = None,
                n_layers: int | None = None) -> GraphBuilder:
    """Emit the op graph of one configuration (the phase picks the emitter); ``n_layers``
    emits only the model's first n layers, then the LM head."""
    lay = lay or cfg.layout()
    b = GraphBuilder(cfg.chip, cfg.cluster, lay.n_chips)
    if lay.is_prefill:
        emit_prefill(b, cfg.model, lay, n_layers)
    else:
        emit_decode(b, cfg.model, lay, n_layers)
    return b


# -- the periodic-layer shortcut -----------------------------------------------------------
# From some layer k0 on, a model repeats one pattern of p layers (p = 1: every layer MoE after
# the leading dense ones, or every layer dense; p = moe_layer_freq otherwise): the same ops
# with the same durations on the same resources. Once the simulated pipeline settles, each
# period completes exactly Δ ns after the previous one on every chip, and every later period
# is the same schedule shifted by Δ (the kernel is deterministic and shift-invariant). So the
# first n layers are simulated, and if their last CHECK_PERIODS periods completed at exactly
# equal intervals on every chip, the makespan of all L layers is T(n) + (L - n) / p * Δ. If
# not, more layers are given to settle (once, x4) and, failing that, the full graph is
# simulated. tests/test_evaluate_shortcut.py compares the two on a matrix of configurations
# (both phases, MLA / GQA, dense / MoE, TP, batch, uneven chunks, S < Np): equal to the
# nanosecond. It runs only when EvalConfig.periodic_shortcut is set (CLI --periodic-shortcut);
# by default every layer is simulated.
CHECK_PERIODS = 3


def layer_period(m: ModelSpec) -> tuple[int, int]:
    """(k0, p): layers k0, k0 + 1, ... repeat with period p (by layer type: dense / MoE)."""
    kinds = [m.is_moe_layer(j) for j in range(m.num_hidden_layers)]
    p = m.moe.moe_layer_freq if m.moe is not None else 1
    k0 = m.moe.first_k_dense_replace if m.moe is not None else 0
    while k0 < len(kinds) and any(kinds[j] != kinds[j + p] for j in range(k0, len(kinds) - p)):
        k0 += 1  # not periodic from k0 (an unusual layer pattern): start later
    return k0, p


@dataclass
class _Run:
    builder: GraphBuilder
    result: SimResult
    latency_ns: int
    layers_simulated: int
    repeat: int            # periods of p layers extrapolated (0: full simulation)
    period_layers: range   # the last simulated period, which the repeats copy


def _simulate(cfg: EvalConfig, lay: Layout) -> _Run:
    m = cfg.model
    L = m.num_hidden_layers
    k0, p = layer_period(m)
    # Periods allowed to settle before the compared ones: one, then (a retry) four. A schedule
    # that is still not periodic then (uneven chunks can leave sub-microsecond jitter between
    # layers for good) is simulated in full: further retries would cost more than they save.
    for settle in (1, 4):
        if not cfg.periodic_shortcut:
            break
        n = k0 + (settle + CHECK_PERIODS) * p
        n += (L - n) % p
        if n >= L:
            break
        b = build_graph(cfg, lay, n)
        res = b.run(event_limit=cfg.event_limit)
        # Completion of each layer on each chip (a transfer counts for its sender). The
        # schedule is periodic only if every chip's layers complete Δ apart: a chip with slack
        # can drift a little per layer before the others hold it back, which the latest
        # completion alone would not show.
        n_chips = lay.n_chips
        done = [0] * (n * n_chips)
        end = res.end_ns
        chip_of = b.chip_of
        for t, layer in enumerate(b.layer):
            if 0 <= layer < n:
                i = layer * n_chips + chip_of[t]
                if end[t] > done[i]:
                    done[i] = end[t]
        steps = {done[(n - 1 - i * p) * n_chips + c] - done[(n - 1 - (i + 1) * p) * n_chips + c]
                 for i in range(CHECK_PERIODS) for c in range(n_chips)}
        if len(steps) == 1:
            repeat = (L - n) // p
            return _Run(b, res, res.makespan_ns + repeat * steps.pop(), n, repeat,
                        range(n - p, n))
    b = build_graph(cfg, lay)
    res = b.run(event_limit=cfg.event_limit)
    return _Run(b, res, res.makespan_ns, L, 0, range(0))


def _bytes(run: _Run, kinds: tuple[str, ...]) -> int:
    """CP bytes of the whole model: the simulated tasks, plus the repeated periods' copies."""
    wanted = set(kinds)
    b = run.builder
    nb = b.graph.nbytes
    total = 0
    repeated = 0
    for t, k in enumerate(b.kind):
        if k in wanted:
            total += nb[t]
            if b.layer[t] in run.period_layers:
                repeated += nb[t]
    return total + run.repeat * repeated


def _simulation_failed(cfg: EvalConfig, exc: SimulationError) -> CtxplanError:
    """A stopped simulation as one line for the user: the event limit (raise it), or a graph
    that cannot run (a cycle or a task that can never start: a bug, named in the message)."""
    what = f"{cfg.phase} cp {cfg.cp} x tp {cfg.tp}, S = {cfg.context_length:,}"
    if isinstance(exc, EventLimitError):
        return UserInputError(
            "event_limit", exc.limit,
            f"raise it (--event-limit, or event_limit in a study / point file) above "
            f"{exc.limit:,}, or simulate a smaller configuration",
            f"simulation of {what} stopped after {exc.limit:,} events with {exc.done:,} of "
            f"{exc.total:,} tasks done")
    return CtxplanError(f"simulation of {what} failed: {exc}. This is a bug in ctxplan's op "
                        "graph; please report it with the command that triggered it")


def evaluate(cfg: EvalConfig, *, trace: bool = False) -> tuple[EvalResult, Trace | None]:
    """Evaluate one configuration. Returns the result and, if asked, the trace data."""
    lay = cfg.layout()
    tier_name, c_kv = cfg.kv()
    mem = memory_report(cfg.model, lay, cfg.chip)
    base = dict(
        phase=cfg.phase, model=cfg.model.name, chip=cfg.chip.name, cluster=cfg.cluster.name,
        context_length=cfg.context_length, batch=cfg.batch, kv_tier=tier_name, c_kv_bytes=c_kv,
        cp=cfg.cp, tp=cfg.tp, chips=lay.n_chips, mla_mode=lay.mla_mode, memory=mem,
        key=cfg.key(),
    )
    if not mem.fits:
        reason = (f"does not fit: {mem.per_chip_bytes / 1e9:.1f} GB per chip "
                  f"(weights {mem.weights_bytes / 1e9:.1f}, KV {mem.kv_bytes / 1e9:.1f}, "
                  f"activations {mem.activation_bytes / 1e9:.1f}, reserve "
                  f"{mem.reserved_bytes / 1e9:.1f}) > {mem.capacity_bytes / 1e9:.1f} GB")
        return EvalResult(latency_s=None, comm=None, events=0, tasks=0, simulated=False,
                          reason=reason, **base), None  # type: ignore[arg-type]

    with paused_gc():  # millions of acyclic small objects: see ctxplan.sim.kernel.paused_gc
        try:
            run = _simulate(cfg, lay)
        except SimulationError as exc:
            raise _simulation_failed(cfg, exc) from None
    b, res = run.builder, run.result
    if lay.is_prefill:
        kinds: tuple[str, ...] = ops.PREFILL_CP_KINDS
        analytic = pass_kv_analytic_bytes(cfg.model, lay)
        per_layer = b.count_kinds(kinds, layer=0)
        comm = CommReport("pass-kv", lay.cp - 1, per_layer, analytic, _bytes(run, kinds))
    else:
        kinds = ops.DECODE_CP_KINDS
        st = decode_structure(lay)
        comm = CommReport("pass-q", 0, st["pass_q_sends_per_layer"] + st["merge_sends_per_layer"],
                          pass_q_analytic_bytes(cfg.model, lay), _bytes(run, kinds))
    busy: dict[str, float] = {}
    dur = b.graph.duration_ns
    for t, k in enumerate(b.kind):
        weight = 1 + run.repeat if b.layer[t] in run.period_layers else 1
        busy[k] = busy.get(k, 0.0) + dur[t] * weight
    n_chips = lay.n_chips
    span = res.makespan_ns or 1
    compute_util = max(res.resource_busy_ns[c] for c in range(n_chips)) / span
    link_busy = res.resource_busy_ns[n_chips:]
    link_util = (max(link_busy) / span) if link_busy else 0.0
    result = EvalResult(
        latency_s=run.latency_ns / 1e9, comm=comm, events=res.events, tasks=b.graph.n_tasks,
        simulated=True, reason="",
        busy_s_by_kind={k: v / 1e9 for k, v in busy.items()},
        max_compute_utilisation=round(compute_util, 6),
        max_link_utilisation=round(link_util, 6),
        layers_simulated=run.layers_simulated,
        **base,  # type: ignore[arg-type]
    )
    return result, (Trace(b, res) if trace else None)
