"""Single-point evaluation: one fully specified configuration -> TTFT or TPOT, memory, bytes.

The solver treats this as a black box. A configuration whose memory does not fit is reported as
such and never simulated (the capacity wall costs no simulation).
"""

from __future__ import annotations

import gc
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxplan.breakdown import critical_breakdown
from ctxplan.errors import CtxplanError, UserInputError, did_you_mean
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.mapping import ops
from ctxplan.mapping.builder import COMPUTE, GraphBuilder
from ctxplan.mapping.decode import decode_comm, emit_decode
from ctxplan.mapping.handoff import HANDOFF_MODES, KV_HANDOFF, decode_pool_kv_bytes, emit_handoff
from ctxplan.mapping.kinds import check_simulated_kinds
from ctxplan.mapping.layers import layer_period
from ctxplan.mapping.layout import (
    PREFILL_RING_CHOICES,
    Layout,
    Precision,
    kv_bytes_per_chip_token,
    make_layout,
)
from ctxplan.mapping.memory import MemoryReport, memory_report
from ctxplan.mapping.prefill import KindComm, emit_prefill, prefill_comm
from ctxplan.mapping.prefill_passq import message_bytes
from ctxplan.model.dtypes import WEIGHT_DTYPES, matmul_dtype, matmul_dtype_preference
from ctxplan.model.kv import default_kv_tiers, resolve_kv_tier
from ctxplan.model.spec import INDEXED_ATTENTION, ModelSpec
from ctxplan.sim import EventLimitError, SimResult, SimulationError

# Bumped whenever a change alters simulated figures: part of every cache / store key.
SIM_VERSION = "7"  # 2: elementwise traffic (issue 5); 3: full simulation by default (issue 10);
                   # 4: per-operation costs of collectives, Meta's pass-Q, per-kernel overhead,
                   #    absorbed MLA's kv_b weights (issue 12 stage 2);
                   # 5: attention kinds in prefill, cached prefix and prefill rings, DSA indexer
                   #    replicated over TP (issues 15 / 16);
                   # 6: the KV handoff per attention kind (windows and states to the homes,
                   #    from the prefill's placement; a linear state after its chain);
                   # 7: all-to-alls with a window of peers in flight per rank

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
    periodic_shortcut: bool = False     # True: simulate a few layers, extrapolate if exactly
                                        # periodic (opt-in; default: every layer simulated)
    pass_q: str = "broadcast"           # decode: "broadcast" or "ring" query movement
    cached: int = 0                     # prefill: tokens whose KV is cached (T = S - cached new)
    prefill_ring: str = "pass-kv"       # prefill, full attention: pass-kv, pass-q or auto
    # Prefill only: simulate the KV handoff to a decode pool of handoff_to CP ranks x
    # handoff_tp chips placed on the chips after the prefill pool (mapping/handoff.py), moving
    # the cache layer by layer ("streamed") or after the last layer ("after"). None: no handoff.
    handoff_to: int | None = None
    handoff_tp: int = 1
    kv_handoff: str = "streamed"
    memory_headroom: float = 1.0        # usable fraction of memory after the reserve (issue 13)

    def resolved_precision(self) -> Precision:
        """The precision given, else the model's storage dtypes (the FFN in the routed experts'
        dtype when it differs: gpt-oss's MXFP4), with each weight dtype's matmul dtype resolved
        for the chip (docs/model.md, "Weight dtypes")."""
        p = self.precision
        if p is None:
            w = self.model.weight_dtype
            p = Precision(attention_weights=w, ffn_weights=self.model.expert_weight_dtype or w)
        return p.on_chip(self.chip.peak_flops_per_s)

    def kv(self) -> tuple[str, int]:
        tier = self.kv_tier if self.kv_tier is not None else default_kv_tiers(self.model)[0]
        return resolve_kv_tier(self.model, tier)

    def layout(self) -> Layout:
        """The validated layout; with ``prefill_ring = "auto"`` the pass-KV one (evaluate
        simulates both rings)."""
        _, c_kv = self.kv()
        _check_dtypes(self.resolved_precision(), self.chip)
        if self.prefill_ring not in PREFILL_RING_CHOICES:
            raise UserInputError("prefill_ring", self.prefill_ring,
                                 f"use one of {', '.join(PREFILL_RING_CHOICES)}")
        return make_layout(
            self.model, phase=self.phase, cp=self.cp, tp=self.tp, batch=self.batch,
            context_length=self.context_length, c_kv_bytes=c_kv, mla_mode=self.mla_mode,
            precision=self.resolved_precision(), max_chips=self.cluster.max_chips,
            pass_q=self.pass_q, cached=self.cached,
            prefill_ring="pass-kv" if self.prefill_ring == "auto" else self.prefill_ring,
        )

    def handoff_layout(self) -> Layout | None:
        """The decode pool the KV is handed to (validated), or None without a handoff."""
        if self.handoff_to is None:
            return None
        if self.phase != "prefill":
            raise UserInputError("handoff_to", self.handoff_to, "drop it, or evaluate the "
                                 "prefill phase: the handoff moves prefill's KV to decode")
        if self.kv_handoff not in HANDOFF_MODES:
            raise UserInputError("kv_handoff", self.kv_handoff,
                                 f"use one of {', '.join(HANDOFF_MODES)} with --handoff-to")
        _, c_kv = self.kv()
        lay_d = make_layout(
            self.model, phase="decode", cp=self.handoff_to, tp=self.handoff_tp,
            batch=self.batch, context_length=self.context_length, c_kv_bytes=c_kv,
            mla_mode=None, precision=self.resolved_precision(),
            max_chips=self.cluster.max_chips, pass_q=self.pass_q)
        total = self.cp * self.tp + lay_d.n_chips
        if total > self.cluster.max_chips:
            raise UserInputError(
                "handoff_to", self.handoff_to,
                f"the two pools take {self.cp * self.tp} + {lay_d.n_chips} = {total} chips and "
                f"cluster {self.cluster.name} has {self.cluster.max_chips}: pick smaller pools "
                "or a larger cluster (the handoff needs both pools on one cluster's links)")
        return lay_d

    def key(self) -> str:
        """Hash of the full configuration and the simulator version (cache and store key).

        The event limit is left out: it decides only whether a simulation may finish, never
        what a finished one measured, so results under any limit are interchangeable. Without
        a handoff its fields are left out too, so keys stored before it existed still hold."""
        fields = _plain(self)
        del fields["event_limit"]
        if self.handoff_to is None:
            for name in ("handoff_to", "handoff_tp", "kv_handoff"):
                del fields[name]
        if fields["memory_headroom"] == 1.0:
            del fields["memory_headroom"]  # the default: keys from before the option still hold
        # Figures that shape a search or sit beside an answer, not what a point measures: left
        # out, so that adding them (issue 27) kept every stored key.
        del fields["chip"]["tdp_w"]
        for name in ("tp_max", "group_size"):
            del fields["cluster"][name]
        model = fields["model"]
        for name in ("max_position_embeddings", "rope_scaling_factor",
                     "original_max_position_embeddings"):
            del model[name]   # the trained context: a warning's business, not a simulation's
        for name, default in _MODEL_DEFAULTS_OUT_OF_KEY.items():
            if model[name] == default:
                del model[name]   # DeepSeek-V4's fields, absent from every model before it
        blob = json.dumps([SIM_VERSION, fields], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:32]


# ModelSpec fields added by issue 27 that other models leave at these values: out of the key then.
_MODEL_DEFAULTS_OUT_OF_KEY: dict[str, Any] = {
    "compressed_attention": None, "hc_mult": 1, "num_hash_layers": 0, "mtp_layer_types": [],
}


def _check_dtypes(p: Precision, chip: Chip) -> None:
    """Every weight dtype must be a known storage dtype the chip can run a matmul for (at its
    own peak or, for packed formats, one it dequantises to), and the attention dtype a peak."""
    known = ", ".join(sorted(chip.peak_flops_per_s))
    for field_name in ("attention_weights", "ffn_weights"):
        dtype = getattr(p, field_name)
        if dtype not in WEIGHT_DTYPES:
            raise UserInputError(field_name, dtype, f"{did_you_mean(dtype, WEIGHT_DTYPES)}use "
                                 f"one of {', '.join(WEIGHT_DTYPES)}", "unknown weight dtype")
        if matmul_dtype(dtype, chip.peak_flops_per_s) is None:
            runs_at = " or ".join(matmul_dtype_preference(dtype))
            raise UserInputError(
                field_name, dtype,
                f"chip {chip.name} has peaks for {known}: store the weights in one of them "
                f"(weights stored in {dtype} run their matmuls at {runs_at})",
                "no peak FLOP/s for this dtype")
    if p.attention not in chip.peak_flops_per_s:
        raise UserInputError("attention", p.attention,
                             f"chip {chip.name} has peaks for {known}: use one of them",
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
    pattern: str                 # each kind's pattern, "+"-joined ("pass-kv+halo", "pass-q")
    ring_steps_per_layer: int    # the most sequential exchange steps of any kind's layer
    sends_per_layer: int         # CP-pattern transfer tasks of the busiest layer (prefill:
                                 # counted in the graph; decode: the most of any kind's layer)
    analytic_bytes: int          # closed form (docs/mapping.md)
    simulated_bytes: int         # summed from the simulated transfer tasks of the pattern
    kinds: tuple[KindComm, ...] = ()  # per attention kind (docs/mapping.md)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["kinds"] = [asdict(k) for k in self.kinds]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CommReport:
        return cls(**{**d, "kinds": tuple(KindComm(**k) for k in d.get("kinds", ()))})


@dataclass(frozen=True)
class RingChoice:
    """Prefill: which ring the full-attention layers used, and Meta's closed-form heuristic
    beside it (arXiv:2411.01783: pass-Q when T / (T + P) <= 2 N_KV / N_H, here in bytes: a
    token's KV over its query, per chip, which is 2 N_KV / N_H for GQA)."""

    asked: str                   # "pass-kv" | "pass-q" | "auto"
    used: str                    # "pass-kv" | "pass-q"
    heuristic: str               # what the heuristic picks
    miss_rate: float             # T / (T + P)
    threshold: float             # KV bytes / query bytes per token
    ttft_pass_kv_s: float | None = None  # "auto": both simulated
    ttft_pass_q_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RingChoice:
        return cls(**d)


@dataclass(frozen=True)
class HandoffReport:
    """The KV handoff of a prefill to its decode pool (docs/handoff.md)."""

    mode: str                    # "streamed" | "after"
    decode_cp: int
    decode_tp: int
    first_decode_chip: int       # the decode pool's chips: this one and the next ones
    bytes_moved: int             # summed over the simulated handoff transfers
    decode_kv_bytes: int         # what the decode pool keeps, by the model's KV accounting
    sends: int                   # handoff transfer tasks
    prefill_s: float             # the prefill's own last task (LM head included)
    handoff_s: float             # the part of the handoff not hidden behind the prefill


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
    handoff: HandoffReport | None = None   # prefill with handoff_to: latency_s includes it
    # The critical path charged to op kinds (ctxplan.breakdown.critical_breakdown); {} when
    # not simulated.
    breakdown: dict[str, Any] = field(default_factory=dict)
    cached: int = 0              # prefill: cached prefix P (new tokens S - P)
    ring: RingChoice | None = None  # prefill: the ring used and Meta's heuristic
    simulations: int = 0         # simulations this result took (2: "auto" ran both rings)
    # What the run warns about (ctxplan.run_warnings): attached by the API, not simulated, so
    # not stored with the result (the store keeps what the simulation measured).
    warnings: tuple[str, ...] = ()

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
        d["comm"] = self.comm.to_dict() if self.comm else None
        d["events"] = self.events
        d["layers_simulated"] = self.layers_simulated
        d["tasks"] = self.tasks
        d["utilisation"] = {"max_compute": self.max_compute_utilisation,
                            "max_link": self.max_link_utilisation}
        d["busy_s_by_kind"] = dict(sorted(self.busy_s_by_kind.items()))
        d["breakdown"] = self.breakdown
        d["key"] = self.key
        d["cached"] = self.cached
        d["ring"] = self.ring.to_dict() if self.ring else None
        d["simulations"] = self.simulations
        if self.handoff is not None:
            d["handoff"] = asdict(self.handoff)
        d["warnings"] = list(self.warnings)
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
            comm=CommReport.from_dict(comm) if comm is not None else None,
            events=d["events"], tasks=d["tasks"], simulated=d["simulated"], reason=d["reason"],
            busy_s_by_kind=dict(d["busy_s_by_kind"]),
            max_compute_utilisation=util["max_compute"], max_link_utilisation=util["max_link"],
            key=d["key"], layers_simulated=d["layers_simulated"],
            handoff=HandoffReport(**d["handoff"]) if d.get("handoff") else None,
            breakdown=d.get("breakdown", {}),
            cached=d.get("cached", 0),
            ring=RingChoice.from_dict(d["ring"]) if d.get("ring") else None,
            simulations=d.get("simulations", int(d["simulated"])),
            warnings=tuple(d.get("warnings", ())),
        )


@dataclass
class Trace:
    """The simulated graph and its timings, for the Perfetto export."""

    builder: GraphBuilder
    result: SimResult


def check_memory(cfg: EvalConfig) -> MemoryReport:
    """Per-chip memory of the configuration, without simulating."""
    return memory_report(cfg.model, cfg.layout(), cfg.chip, cfg.memory_headroom)


def build_graph(cfg: EvalConfig, lay: Layout | None = None,
                n_layers: int | None = None) -> GraphBuilder:
    """Emit the op graph of one configuration (the phase picks the emitter); ``n_layers``
    emits only the model's first n layers, then the LM head."""
    lay = lay or cfg.layout()
    check_simulated_kinds(cfg.model, lay.context_length, lay.phase)
    lay_d = cfg.handoff_layout()
    b = GraphBuilder(cfg.chip, cfg.cluster, lay.n_chips + (lay_d.n_chips if lay_d else 0))
    if lay.is_prefill:
        emit_prefill(b, cfg.model, lay, n_layers)
        if lay_d is not None:
            emit_handoff(b, cfg.model, lay, lay_d, cfg.kv_handoff, n_layers)
    else:
        emit_decode(b, cfg.model, lay, n_layers)
    b.flush()
    return b


@dataclass
class _Run:
    builder: GraphBuilder
    result: SimResult
    latency_ns: int
    layers_simulated: int
    repeat: int                   # periods extrapolated (0: full simulation)
    period: range = range(0)      # task ids of the last simulated period (the one repeated)
    delta_ns: int = 0             # time between periods


def _simulate(cfg: EvalConfig, lay: Layout) -> _Run:
    """Simulate the whole configuration, or (opt-in ``periodic_shortcut``) its first layers.
    A handoff is always simulated in full (its transfers follow the layers, not a period)."""
    if cfg.periodic_shortcut and cfg.handoff_to is None:
        run = _simulate_periodic(cfg, lay)
        if run is not None:
            return run
    b = build_graph(cfg, lay)
    res = b.run(event_limit=cfg.event_limit)
    return _Run(b, res, res.makespan_ns, cfg.model.num_hidden_layers, 0)


# -- the periodic-layer shortcut (opt-in) ----------------------------------------------------
# The layers after the first few repeat one pattern of p layers, and the graph holds them as
# tiled copies of one period of T tasks (ctxplan.mapping.layers). The shortcut simulates only
# n < L layers and checks that, over the last CHECK_PERIODS periods, EVERY task started and
# ended exactly Δ after its counterpart one period earlier (the task T ids before it). Then the
# schedule has settled into a pure shift (the kernel is deterministic and shift-invariant), and
# the remaining periods are extrapolated: latency T(n) + (L - n) / p * Δ, bytes and busy time
# plus that many copies of the last period's. If the check fails (a little drift anywhere, even
# on a task that is not the last of its chip), it retries once with more layers to settle and
# then simulates in full. tests/test_evaluate_shortcut.py compares it with the full
# simulation on a fuzzed matrix (MoE, TP, cross-host, uneven chunks) and on the
# configurations where an earlier, weaker check (last completion per chip) was wrong.
CHECK_PERIODS = 3


def _simulate_periodic(cfg: EvalConfig, lay: Layout) -> _Run | None:
    m = cfg.model
    L = m.num_hidden_layers
    k0, p = layer_period(m)
    for settle in (1, 4):
        n = k0 + (settle + CHECK_PERIODS + 1) * p
        n += (L - n) % p
        if n >= L:
            return None
        b = build_graph(cfg, lay, n)
        res = b.run(event_limit=cfg.event_limit)
        # Period q (0-based from layer k0) of the truncated graph: its tasks' ids.
        layer = b.layer   # non-decreasing in task id: layers are emitted in order
        lo = int(np.searchsorted(layer, n - p, side="left"))
        hi = int(np.searchsorted(layer, n - 1, side="right"))
        t = hi - lo   # tasks per period
        delta = _shift_of(res, lo, t, CHECK_PERIODS)
        if delta is None:
            continue
        repeat = (L - n) // p
        return _Run(b, res, res.makespan_ns + repeat * delta, n, repeat, range(lo, hi), delta)
    return None


def _shift_of(res: SimResult, lo: int, t: int, periods: int) -> int | None:
    """Δ if every task of the ``periods`` periods ending at [lo, lo + t) started and ended
    exactly Δ after its counterpart one period (t ids) earlier; else None."""
    first = lo - periods * t
    if first < 0:
        return None
    start = res.start_ns[first:lo + t].reshape(periods + 1, t)
    end = res.end_ns[first:lo + t].reshape(periods + 1, t)
    d_start = np.diff(start, axis=0)
    d_end = np.diff(end, axis=0)
    delta = int(d_start[0, 0])
    if (d_start == delta).all() and (d_end == delta).all():
        return delta
    return None


def _busy_and_bytes(run: _Run, lay: Layout, kinds: tuple[str, ...]
                    ) -> tuple[dict[str, float], int, npt.NDArray[np.int64]]:
    """Busy ns per op kind, CP bytes of the given kinds and busy ns per resource, of the whole
    model: the simulated tasks plus the repeated periods' copies."""
    b, res = run.builder, run.result
    g = b.graph
    code = b.kind_code
    dur = g.duration_ns
    weight = np.ones(len(dur), np.int64)
    resource_busy = res.resource_busy_ns.copy()
    if run.repeat:
        sl = slice(run.period.start, run.period.stop)
        weight[sl] += run.repeat
        per = np.zeros_like(resource_busy)
        lo, hi = g.res_ptr[run.period.start], g.res_ptr[run.period.stop]
        holder = np.repeat(np.arange(run.period.start, run.period.stop),
                           np.diff(g.res_ptr[run.period.start:run.period.stop + 1]))
        np.add.at(per, g.res_idx[lo:hi], dur[holder])
        resource_busy += run.repeat * per
    # Busy time is time holding a resource: the fixed costs of communication operations
    # (tasks that hold none) are not busy time.
    holds = np.diff(g.res_ptr) > 0
    busy_ns = np.bincount(code, weights=(dur * weight * holds).astype(np.float64),
                          minlength=len(b.kinds))
    busy = {k: float(busy_ns[i]) / 1e9 for i, k in enumerate(b.kinds)
            if ops.base_kind(k) == k}   # operation-cost kinds hold nothing
    cp_mask = b.mask_of(kinds)
    cp_bytes = int((g.nbytes[cp_mask] * weight[cp_mask]).sum())
    return busy, cp_bytes, resource_busy


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


def ring_heuristic(m: ModelSpec, lay: Layout) -> tuple[float, float, str]:
    """Meta's closed-form choice between the prefill rings (arXiv:2411.01783): pass-Q when the
    miss rate T / (T + P) <= 2 N_KV / N_H, the ratio of a token's KV to its query; here the
    ratio of the bytes each moves per token per chip (c_kv per chip over the query's), which
    is 2 N_KV / N_H for GQA with KV in the activations' dtype. (miss rate, threshold, pick)."""
    miss = lay.new_tokens / lay.context_length
    q_bytes, _ = message_bytes(m, lay)
    threshold = kv_bytes_per_chip_token(m, lay) / q_bytes
    return miss, threshold, "pass-q" if miss <= threshold else "pass-kv"
@contextmanager
def paused_gc() -> Iterator[None]:
    """Python's cyclic garbage collector off for a block (restored after, if it was on).

    Building a graph allocates few Python objects, but enough to trigger collections, and a
    full collection walks every object the process holds (numba's compiled-code bookkeeping
    is large): about a tenth of a 1M-token evaluation (docs/benchmarks.md). Nothing built
    here forms reference cycles; reference counting frees it all.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def evaluate(cfg: EvalConfig, *, trace: bool = False) -> tuple[EvalResult, Trace | None]:
    """Evaluate one configuration. Returns the result and, if asked, the trace data.

    A prefill with ``prefill_ring = "auto"`` simulates both rings and keeps the faster (the
    pass-KV one on a tie, or when the model has no layer that runs either), reporting both
    TTFTs and Meta's heuristic beside them (:class:`RingChoice`)."""
    if cfg.phase == "prefill" and cfg.prefill_ring == "auto":
        return _evaluate_auto(cfg, trace)
    result, tr = _evaluate_one(cfg, trace)
    if result.phase == "prefill":
        lay = cfg.layout()
        miss, threshold, pick = ring_heuristic(cfg.model, lay)
        result = replace(result, ring=RingChoice(cfg.prefill_ring, lay.prefill_ring, pick,
                                                 miss, threshold))
    return result, tr


def _runs_a_ring(m: ModelSpec, lay: Layout) -> bool:
    """Does any layer of ``m`` run as full attention (where the ring choice applies)?"""
    return any(k.pattern in ("pass-kv", "pass-q") and k.layer_type != INDEXED_ATTENTION
               for k in prefill_comm(m, lay))


def _evaluate_auto(cfg: EvalConfig, trace: bool) -> tuple[EvalResult, Trace | None]:
    lay = cfg.layout()
    miss, threshold, pick = ring_heuristic(cfg.model, lay)
    kv, kv_trace = _evaluate_one(replace(cfg, prefill_ring="pass-kv"), trace)
    ttft_q = None
    chosen, chosen_trace, used = kv, kv_trace, "pass-kv"
    runs = kv.simulations
    if _runs_a_ring(cfg.model, lay):
        q, q_trace = _evaluate_one(replace(cfg, prefill_ring="pass-q"), trace)
        runs += q.simulations
        ttft_q = q.latency_s
        faster = (q.latency_s is not None
                  and (kv.latency_s is None or q.latency_s < kv.latency_s))
        if faster:
            chosen, chosen_trace, used = q, q_trace, "pass-q"
    else:
        ttft_q = kv.latency_s   # no full-attention layer: the two are the same graph
    ring = RingChoice("auto", used, pick, miss, threshold, kv.latency_s, ttft_q)
    return replace(chosen, key=cfg.key(), ring=ring, simulations=runs), chosen_trace


def _evaluate_one(cfg: EvalConfig, trace: bool) -> tuple[EvalResult, Trace | None]:
    lay = cfg.layout()
    lay_d = cfg.handoff_layout()
    tier_name, c_kv = cfg.kv()
    mem = memory_report(cfg.model, lay, cfg.chip, cfg.memory_headroom)
    base = dict(
        phase=cfg.phase, model=cfg.model.name, chip=cfg.chip.name, cluster=cfg.cluster.name,
        context_length=cfg.context_length, batch=cfg.batch, kv_tier=tier_name, c_kv_bytes=c_kv,
        cp=cfg.cp, tp=cfg.tp, chips=lay.n_chips, mla_mode=lay.mla_mode, memory=mem,
        key=cfg.key(), cached=lay.cached,
    )
    if not mem.fits:
        reason = (f"does not fit: {mem.per_chip_bytes / 1e9:.1f} GB per chip "
                  f"(weights {mem.weights_bytes / 1e9:.1f}, KV {mem.kv_bytes / 1e9:.1f}, "
                  f"activations {mem.activation_bytes / 1e9:.1f}, reserve "
                  f"{mem.reserved_bytes / 1e9:.1f}) > {mem.usable_text()}")
        return EvalResult(latency_s=None, comm=None, events=0, tasks=0, simulated=False,
                          reason=reason, **base), None  # type: ignore[arg-type]

    try:
        with paused_gc():
            run = _simulate(cfg, lay)
    except SimulationError as exc:
        raise _simulation_failed(cfg, exc) from None
    b, res = run.builder, run.result
    by_kind: tuple[KindComm, ...] = ()
    if lay.is_prefill:
        kinds: tuple[str, ...] = ops.PREFILL_CP_KINDS
        by_kind = tuple(prefill_comm(cfg.model, lay))
        analytic = sum(k.analytic_bytes for k in by_kind)
        per_layer = b.most_per_layer(kinds)   # simulated: layers of different kinds differ
        ring_steps = max(k.ring_steps_per_layer for k in by_kind)
        pattern = "+".join(dict.fromkeys(k.pattern for k in by_kind))
    else:
        kinds = ops.DECODE_CP_KINDS
        by_kind = tuple(decode_comm(cfg.model, lay))
        analytic = sum(k.analytic_bytes for k in by_kind)
        per_layer = max(k.sends_per_layer for k in by_kind)
        ring_steps = max(k.ring_steps_per_layer for k in by_kind)
        pattern = "+".join(dict.fromkeys(k.pattern for k in by_kind))
    busy, cp_bytes, resource_busy = _busy_and_bytes(run, lay, kinds)
    comm = CommReport(pattern, ring_steps, per_layer, analytic, cp_bytes, by_kind)
    span = run.latency_ns or 1
    is_compute = np.array([r == COMPUTE for r in b.resource_role], bool)
    compute_util = resource_busy[is_compute].max(initial=0) / span
    link_busy = resource_busy[~is_compute]
    link_util = link_busy.max(initial=0) / span
    handoff = None
    if lay_d is not None:
        moving = b.mask_of([KV_HANDOFF])
        handing = b.mask_of([KV_HANDOFF, ops.op_kind(KV_HANDOFF)])  # with its operations' costs
        prefill_end = int(res.end_ns[~handing].max())
        handoff = HandoffReport(
            mode=cfg.kv_handoff, decode_cp=lay_d.cp, decode_tp=lay_d.tp,
            first_decode_chip=lay.n_chips, bytes_moved=int(b.graph.nbytes[moving].sum()),
            decode_kv_bytes=decode_pool_kv_bytes(cfg.model, lay_d), sends=int(moving.sum()),
            prefill_s=prefill_end / 1e9, handoff_s=(run.latency_ns - prefill_end) / 1e9)
    result = EvalResult(
        latency_s=run.latency_ns / 1e9, comm=comm, events=res.events, tasks=b.graph.n_tasks,
        simulated=True, reason="", simulations=1, handoff=handoff,
        busy_s_by_kind=busy,
        max_compute_utilisation=round(float(compute_util), 6),
        max_link_utilisation=round(float(link_util), 6),
        layers_simulated=run.layers_simulated,
        breakdown=critical_breakdown(b, res, run.layers_simulated),
        **base,  # type: ignore[arg-type]
    )
    return result, (Trace(b, res) if trace else None)
