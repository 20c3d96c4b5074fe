"""What one evaluation returns (:class:`EvalResult`) and its parts: the memory of the fullest
chip, the CP communication simulated and in closed form, the prefill ring chosen, the KV
handoff; and the simulated graph for a trace (:class:`Trace`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ctxplan.hardware.chip import Chip
from ctxplan.mapping.entry import ChipMemory, GraphBuilder, KindComm
from ctxplan.sim import SimResult


@dataclass(frozen=True)
class MemoryReport:
    per_chip_bytes: int     # everything on the fullest chip
    capacity_bytes: int     # the chip's memory
    fits: bool
    weights_bytes: int
    kv_bytes: int
    activation_bytes: int
    reserved_bytes: int
    memory_headroom: float = 1.0   # usable fraction of the memory after the reserve
    # The peak of the transient (non-KV) buffers on the fullest chip, from the simulated
    # schedule (mapping/buffers.py); 0 before a simulation.
    transient_peak_bytes: int = 0
    # "simulated": weights + the simulated peak of KV and transient buffers + reserve;
    # "lower bound": weights + KV + reserve, the capacity wall's figure before any simulation.
    activation_source: str = "lower bound"

    @property
    def usable_bytes(self) -> int:
        """What a plan may fill: the reserve plus ``memory_headroom`` of the rest."""
        if self.memory_headroom == 1.0:
            return self.capacity_bytes
        spare = self.capacity_bytes - self.reserved_bytes
        return self.reserved_bytes + int(self.memory_headroom * spare)

    def usable_text(self) -> str:
        """'80.0 GB', or '72.4 GB usable (0.9 of 80.0 GB after the 4.0 GB reserve)'."""
        gb = 1e9
        if self.memory_headroom == 1.0:
            return f"{self.capacity_bytes / gb:.1f} GB"
        return (f"{self.usable_bytes / gb:.1f} GB usable ({self.memory_headroom:g} of the "
                f"{self.capacity_bytes / gb:.1f} GB after the {self.reserved_bytes / gb:.1f} GB "
                "reserve)")

    def to_dict(self) -> dict[str, int | bool | float]:
        return asdict(self)

    @classmethod
    def of(cls, held: ChipMemory, chip: Chip, memory_headroom: float = 1.0) -> MemoryReport:
        """The fullest chip's memory with the chip's reserve; it fits when it is at most the
        reserve plus ``memory_headroom`` of the memory after the reserve
        (``--memory-headroom``)."""
        reserved = chip.reserved_memory_bytes
        total = held.per_chip_bytes(reserved)
        report = cls(per_chip_bytes=total, capacity_bytes=chip.memory_bytes, fits=True,
                     weights_bytes=held.weights_bytes, kv_bytes=held.kv_bytes,
                     activation_bytes=held.activation_bytes, reserved_bytes=reserved,
                     memory_headroom=memory_headroom)
        return replace(report, fits=total <= report.usable_bytes)

    def simulated(self, peak_bytes: int, kv_bytes: int, transient_peak_bytes: int
                  ) -> MemoryReport:
        """This lower bound's chip with the simulated peak of its live buffers (KV included)
        on the fullest chip, whose KV at the phase's end is ``kv_bytes``: activations are what
        the peak holds beyond it."""
        total = self.weights_bytes + peak_bytes + self.reserved_bytes
        return replace(self, per_chip_bytes=total, kv_bytes=kv_bytes,
                       activation_bytes=max(peak_bytes - kv_bytes, 0),
                       transient_peak_bytes=transient_peak_bytes,
                       activation_source="simulated", fits=total <= self.usable_bytes)


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

    asked: str                   # "pass-kv" | "pass-q" | "all-gather" | "auto"
    used: str                    # "pass-kv" | "pass-q" | "all-gather"
    heuristic: str               # what the heuristic picks (between pass-kv and pass-q)
    miss_rate: float             # T / (T + P)
    threshold: float             # KV bytes / query bytes per token
    ttft_pass_kv_s: float | None = None  # "auto": each simulated (a ring no layer runs: the
    ttft_pass_q_s: float | None = None   # pass-kv graph, its figure)
    ttft_all_gather_s: float | None = None   # "auto" on a model with DeepSeek-V4's kinds
    # A chunked prefill: the ring of each chunk, in order (under "auto" each by Meta's rule
    # at the chunk's own miss rate; ``used`` is then "per-chunk" when they differ).
    chunks: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if d["ttft_all_gather_s"] is None:
            del d["ttft_all_gather_s"]   # as stored before the all-gather existed
        if not self.chunks:
            del d["chunks"]
        else:
            d["chunks"] = list(self.chunks)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RingChoice:
        return cls(**{**d, "chunks": tuple(d.get("chunks", ()))})


@dataclass(frozen=True)
class MoeChoice:
    """Which way the MoE layers ran over the pool (``moe_parallel``): "ep" (an all-to-all to
    the experts spread over the pool) or "tp" (the hidden states all-gathered, every expert
    split over the pool); with "auto" both simulated, the faster kept (ep on a tie)."""

    asked: str                   # "ep" | "tp" | "auto"
    used: str                    # "ep" | "tp"
    latency_ep_s: float | None = None   # "auto": both simulated (at the ring used)
    latency_tp_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MoeChoice:
        return cls(**d)


@dataclass(frozen=True)
class ChunkChoice:
    """Prefill: how the prompt entered (``prefill_chunk``): in one pass, or in chunks of
    ``tokens`` (docs/mapping.md, "Chunked prefill"), and why."""

    policy: str                  # "auto" | "off" | "size" (a size was given)
    tokens: int                  # tokens per chunk (the new tokens when in one pass)
    chunks: int                  # forward passes
    why: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChunkChoice:
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
    decode_chip: str = ""        # the decode pool's chip and cluster ("": stored before them)
    decode_cluster: str = ""
    decode_dp: int = 1           # the decode pool's DP attention ranks
    decode_pp: int = 1           # the decode pool's pipeline stages


@dataclass(frozen=True)
class PPComm:
    """The transfers between pipeline stages (mapping/pipeline.py): every handover's shares
    and the receiving TP groups' all-gathers, simulated and by the closed form."""

    handovers: int               # (pp - 1) per chunk (prefill) or per micro-batch (decode)
    analytic_bytes: int
    simulated_bytes: int
    micro_batches: int = 1       # decode: the micro-batches the batch flows in

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PPComm:
        return cls(**d)


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
    moe: MoeChoice | None = None  # a MoE model run with moe_parallel other than "ep"
    # Decode with mtp_speculation: the tokens a step yields on average (latency_s is the step's
    # makespan over them); 1.0 otherwise.
    tokens_per_step: float = 1.0
    prefill_chunk: ChunkChoice | None = None   # prefill: one pass or chunks, and why
    pp: int = 1                  # pipeline stages (chips = pp x cp x tp)
    # (first, last) layer of each stage; () for results stored before the pipeline existed
    stages: tuple[tuple[int, int], ...] = ()
    pp_comm: PPComm | None = None   # pp > 1: the transfers between stages
    dp: int = 1                  # decode: DP attention ranks (chips = pp x dp x cp x tp)
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
            "cp": self.cp, "tp": self.tp, "pp": self.pp, "dp": self.dp, "chips": self.chips,
            "mla_mode": self.mla_mode, "stages": [list(s) for s in self.stages],
        }
        d["ttft_s" if self.phase == "prefill" else "tpot_s"] = self.latency_s
        d["simulated"] = self.simulated
        d["reason"] = self.reason
        d["memory"] = self.memory.to_dict()
        d["comm"] = self.comm.to_dict() if self.comm else None
        d["pp_comm"] = self.pp_comm.to_dict() if self.pp_comm else None
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
        if self.moe is not None:
            d["moe"] = self.moe.to_dict()
        if self.tokens_per_step != 1.0:
            d["tokens_per_step"] = self.tokens_per_step
        if self.prefill_chunk is not None:
            d["prefill_chunk"] = self.prefill_chunk.to_dict()
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
            moe=MoeChoice.from_dict(d["moe"]) if d.get("moe") else None,
            tokens_per_step=d.get("tokens_per_step", 1.0),
            prefill_chunk=(ChunkChoice.from_dict(d["prefill_chunk"])
                           if d.get("prefill_chunk") else None),
            pp=d.get("pp", 1), stages=tuple(tuple(s) for s in d.get("stages", ())),
            pp_comm=PPComm.from_dict(d["pp_comm"]) if d.get("pp_comm") else None,
            warnings=tuple(d.get("warnings", ())), dp=d.get("dp", 1),
        )


@dataclass
class Trace:
    """The simulated graph and its timings, for the Perfetto export."""

    builder: GraphBuilder
    result: SimResult
