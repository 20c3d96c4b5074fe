"""Pydantic schemas of chip and cluster files (presets and user files), in readable units.

Units in files: TFLOP/s, GB (1e9 bytes), GB/s (1e9 bytes/s), microseconds. The loaders in
``hardware_presets`` convert to the plain dataclasses of :mod:`ctxplan.hardware` (bytes, ns).
Every model forbids unknown keys, is strict about types (``"yes"`` is not a bool, ``"80"`` is not
a number) and rejects NaN / infinity.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from ctxplan.config.loader import STRICT

# Dtypes a chip may list a peak for. A closed set so a typo ("bf61") is an error, not a new dtype.
KNOWN_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4")
REQUIRED_DTYPES = ("bf16", "fp8")

# Upper bounds keep absurd figures (1e300 GB) from overflowing the unit conversions (GB -> int
# bytes) and the simulator's integer nanoseconds; they are far above any real chip or cluster.
# Lower bounds keep products of tiny figures (1e-300 GB/s x 1e-300 efficiency) from underflowing
# to zero and dividing by it.
MAX_FIGURE = 1e9          # TFLOP/s, GB, GB/s, us: the units of the files
MIN_FIGURE = 1e-6
MIN_FRACTION = 1e-3       # efficiencies: 0.1% .. 100%
MAX_CHIPS = 2**20         # chips in one group of a cluster level

PositiveFloat = Annotated[float, Field(ge=MIN_FIGURE, le=MAX_FIGURE)]
Balance = Annotated[float, Field(ge=0, le=1)]                 # bytes per FLOP
Shape = Annotated[float, Field(ge=0, le=MAX_FIGURE)]          # rows or tokens; 0 = no loss
Fraction = Annotated[float, Field(ge=MIN_FRACTION, le=1)]
NonEmptyStr = Annotated[str, Field(min_length=1)]

_STRICT = STRICT


def _non_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must be a non-empty text")
    return value


def _check_note_keys(notes: dict[str, str], fields: set[str]) -> dict[str, str]:
    # A note key names the figure it explains: a field ("memory_gb") or a sub-figure
    # ("peak_tflops.fp8", "efficiency.matmul").
    for key in notes:
        if key.split(".", 1)[0] not in fields:
            raise ValueError(f"note key {key!r} names no field; use one of {sorted(fields)}")
    return notes


class MatmulEfficiencySchema(BaseModel):
    """Efficiency-model parameters of GEMMs; each one omitted takes the model's default."""

    model_config = _STRICT

    ceiling: Fraction | None = None
    balance_bytes_per_flop: Balance | None = None
    half_rows: Shape | None = None
    half_rows_per_intensity: Shape | None = None   # > 0: half_rows = this x P / B
    tile_rows: Shape | None = None       # rows of one tensor-core tile; fewer are padded to it
    depth_half: Shape | None = None      # K steps a tile's fixed work costs
    overlap: Annotated[float, Field(ge=0, le=1)] | None = None   # unhidden share of the shorter
    # us per piece a GEMM streams (a grouped GEMM: per group) before its stream runs at rate
    stream_ramp_us: Annotated[float, Field(ge=0, le=MAX_FIGURE)] | None = None


class AttentionEfficiencySchema(BaseModel):
    """Efficiency-model parameters of attention; each one omitted takes the model's default."""

    model_config = _STRICT

    ceiling: Fraction | None = None
    balance_bytes_per_flop: Balance | None = None
    half_kv_tokens: Shape | None = None          # a block with a causal mask
    half_kv_tokens_full: Shape | None = None     # a block without one
    tile_q_rows: Shape | None = None     # query rows of one Q tile; fewer are padded to it
    balance_head_dim: Shape | None = None   # the head dim the balance is given at (0: any)
    overlap: Annotated[float, Field(ge=0, le=1)] | None = None   # unhidden share of the shorter
    # us per kernel before its KV stream runs at rate (on the memory side only)
    stream_ramp_us: Annotated[float, Field(ge=0, le=MAX_FIGURE)] | None = None


class EfficiencySchema(BaseModel):
    """A chip's efficiencies (docs/hardware.md, "The efficiency model"). Every key is optional:
    what is omitted comes from the efficiency model's defaults.

    ``matmul`` / ``attention``: a number is the large-block fraction of peak on this chip in
    every dtype (the form of chip files before the model; the shape losses still apply), a
    mapping overrides model parameters. ``memory``: the achievable fraction of HBM bandwidth.
    """

    model_config = _STRICT

    matmul: Fraction | MatmulEfficiencySchema | None = None
    attention: Fraction | AttentionEfficiencySchema | None = None
    memory: Fraction | None = None


Micros = Annotated[float, Field(ge=0, le=MAX_FIGURE)]


class KernelFloorSchema(BaseModel):
    """The fixed device cost of one kernel per op class, in us (docs/hardware.md, "Kernel
    floors and launch"); each one omitted takes ``op_overhead_us`` if the file gives it, else
    the model's default."""

    model_config = _STRICT

    matmul: Micros | None = None
    attention: Micros | None = None
    memory: Micros | None = None


class EfficiencyDefaultsSchema(BaseModel):
    """``presets/efficiency-model.yaml``: the model's default parameters and the defaults of the
    other chip figures a spec-sheet-only chip file may omit."""

    model_config = _STRICT

    source: NonEmptyStr
    matmul: MatmulEfficiencySchema
    attention: AttentionEfficiencySchema
    memory: Fraction
    kernel_floor_us: KernelFloorSchema
    launch_gap_us: Micros
    eager_dispatch_us: Micros
    reserved_memory_gb: PositiveFloat             # below large_memory_gb of capacity
    reserved_memory_gb_large: PositiveFloat       # at or above it
    large_memory_gb: PositiveFloat
    notes: dict[str, str] = Field(default_factory=dict)

    @field_validator("matmul", "attention", "kernel_floor_us")
    @classmethod
    def _complete(cls, params: BaseModel) -> BaseModel:
        missing = [k for k, v in params.model_dump().items() if v is None]
        if missing:
            raise ValueError(f"the defaults must give every parameter; add {missing[0]!r}")
        return params


class ChipSchema(BaseModel):
    """A chip file: ``presets/chips/<name>.yaml`` or a user's own.

    Only the spec-sheet figures are required (peaks, memory, bandwidth); the rest have defaults
    (docs/hardware.md, "Files and units")."""

    model_config = _STRICT

    name: NonEmptyStr | None = None   # defaults to the preset / file name
    peak_tflops: dict[str, PositiveFloat]   # dtype -> dense TFLOP/s
    memory_gb: PositiveFloat
    memory_bandwidth_gbps: PositiveFloat    # GB/s
    efficiency: EfficiencySchema = Field(default_factory=EfficiencySchema)
    # The kernel floor of every op class kernel_floor_us does not name (the key of chip files
    # before issue 26, when it was the one fixed cost of every kernel, launch included: a file
    # that gives it and no launch_gap_us has no separate gap). 0: idealised.
    op_overhead_us: Micros | None = None
    kernel_floor_us: KernelFloorSchema = Field(default_factory=KernelFloorSchema)
    launch_gap_us: Micros | None = None      # per kernel, between kernels on the device
    eager_dispatch_us: Micros | None = None  # per kernel, the host's issue time without a graph
    reserved_memory_gb: Annotated[float, Field(ge=0, le=MAX_FIGURE)] | None = None
    default_cluster: NonEmptyStr | None = None
    source: NonEmptyStr | None = None
    verified: bool = False     # spec-sheet figures from a datasheet or a paper
    calibrated: bool = False   # efficiencies and overhead fitted to measurements on this chip
    # Board power (TDP), W; null where no figure is published (power figures then say
    # "unknown" for the chip). Every preset states it, with its source in notes.tdp_w.
    tdp_w: PositiveFloat | None = None
    notes: dict[str, str] = Field(default_factory=dict)

    @field_validator("peak_tflops")
    @classmethod
    def _dtypes(cls, peaks: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(peaks) - set(KNOWN_DTYPES))
        if unknown:
            raise ValueError(f"unknown dtype {unknown[0]!r}; use one of {list(KNOWN_DTYPES)}")
        missing = [dtype for dtype in REQUIRED_DTYPES if dtype not in peaks]
        if missing:
            raise ValueError(f"add a peak for {missing[0]!r} (bf16 and fp8 are required)")
        return peaks

    @field_validator("reserved_memory_gb")
    @classmethod
    def _reserve_below_capacity(cls, reserved_gb: float | None,
                                info: ValidationInfo) -> float | None:
        memory_gb = info.data.get("memory_gb")
        if reserved_gb is not None and memory_gb is not None and reserved_gb >= memory_gb:
            raise ValueError(f"must be below memory_gb ({memory_gb})")
        return reserved_gb

    @field_validator("source", "default_cluster")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        return None if value is None else _non_blank(value)

    @field_validator("notes")
    @classmethod
    def _notes(cls, notes: dict[str, str]) -> dict[str, str]:
        return _check_note_keys(notes, set(cls.model_fields) - {"notes"})


class AlgorithmSchema(BaseModel):
    """The fixed cost of one all-reduce of an algorithm: ``overhead_us`` plus ``per_peer_us``
    per peer of the group."""

    model_config = _STRICT

    overhead_us: Micros
    per_peer_us: Micros = 0.0
    efficiency: Fraction = 1.0       # of the link's effective bandwidth


class AllReduceSchema(BaseModel):
    """All-reduce algorithms a level offers besides the ring (docs/hardware.md, "Collectives by
    size and algorithm"); each omitted one is not offered."""

    model_config = _STRICT

    one_shot: AlgorithmSchema | None = None
    two_shot: AlgorithmSchema | None = None


class LevelSchema(BaseModel):
    """One level of a cluster, innermost first."""

    model_config = _STRICT

    name: NonEmptyStr
    chips_per_group: Annotated[int, Field(ge=1, le=MAX_CHIPS)]  # cumulative: chips per group
    fabric: Literal["full_mesh", "switch"]
    bandwidth_gbps: PositiveFloat     # GB/s per chip per direction at this level
    latency_us: PositiveFloat         # one-way, switch hops included
    efficiency: Fraction              # achievable fraction of bandwidth_gbps
    # Fixed cost of one point-to-point operation (SendRecv) crossing this level (launch, proxy,
    # synchronisation), apart from the per-hop latency. 0 (the default): not modelled.
    op_overhead_us: Annotated[float, Field(ge=0, le=MAX_FIGURE)] = 0.0
    # Fixed cost of one collective operation (all-reduce, all-to-all, ...) crossing this level;
    # omitted: the same as op_overhead_us.
    collective_overhead_us: Annotated[float, Field(ge=0, le=MAX_FIGURE)] | None = None
    # All-reduce algorithms offered besides the ring (the engines' custom all-reduce inside an
    # NVLink domain); omitted: the ring only.
    allreduce: AllReduceSchema | None = None
    # Fixed cost of one MoE dispatch / combine crossing this level (low-latency expert-parallel
    # kernels); omitted: collective_overhead_us.
    dispatch_overhead_us: Micros | None = None
    combine_overhead_us: Micros | None = None
    # This level's group is one host (one machine): the prefill and decode pools of a
    # disaggregated plan start on separate ones (docs/handoff.md). At most one level says so.
    host: bool = False
    notes: str | None = None


class ClusterSchema(BaseModel):
    """A cluster file: ``presets/clusters/<name>.yaml`` or a user's own."""

    model_config = _STRICT

    name: NonEmptyStr | None = None   # defaults to the preset / file name
    chip: NonEmptyStr                 # default chip preset
    source: NonEmptyStr
    verified: bool
    levels: Annotated[list[LevelSchema], Field(min_length=1)]
    # Peers a rank has transfers in flight to during one all-to-all (its k-th transfer waits
    # for its (k - w)-th); 8 as NCCL batches point-to-point work; 0: no window.
    all_to_all_peers_in_flight: Annotated[int, Field(ge=0, le=MAX_CHIPS)] = 8
    # The solve's search on this cluster: the largest TP degree it tries (default 8), and the
    # step of the "group" candidate set in chips (default: the innermost group).
    tp_max: Annotated[int, Field(ge=1, le=MAX_CHIPS)] = 8
    group_size: Annotated[int, Field(ge=1, le=MAX_CHIPS)] | None = None
    # The chunk of a chunked prefill under prefill_chunk = auto, in tokens (16K: SGLang's and
    # vLLM's setting on large GPUs).
    prefill_chunk_tokens: Annotated[int, Field(ge=1, le=2**31)] = 16384
    # Chips per host when the host is not one of the levels (an NVL72 rack's 4-GPU compute
    # tray); a level's ``host: true`` says it otherwise; neither: the innermost level.
    host_chips: Annotated[int, Field(ge=1, le=MAX_CHIPS)] | None = None
    notes: dict[str, str] = Field(default_factory=dict)

    @field_validator("source", "chip")
    @classmethod
    def _text(cls, value: str) -> str:
        return _non_blank(value)

    @field_validator("levels")
    @classmethod
    def _nested_groups(cls, levels: list[LevelSchema]) -> list[LevelSchema]:
        names = [level.name for level in levels]
        for index, name in enumerate(names):
            if name in names[:index]:
                raise ValueError(f"level names must be unique; {name!r} appears twice")
        for index in range(1, len(levels)):
            inner, outer = levels[index - 1].chips_per_group, levels[index].chips_per_group
            if outer <= inner or outer % inner:
                raise ValueError(
                    f"levels[{index}].chips_per_group = {outer} must be a larger multiple of "
                    f"levels[{index - 1}].chips_per_group = {inner} (groups nest)"
                )
        hosts = [level.name for level in levels if level.host]
        if len(hosts) > 1:
            raise ValueError(f"levels {hosts[0]!r} and {hosts[1]!r} both say host: true; mark "
                             "one level (the group that is one machine)")
        return levels

    @field_validator("host_chips")
    @classmethod
    def _host(cls, host_chips: int | None, info: ValidationInfo) -> int | None:
        levels: list[LevelSchema] = info.data.get("levels") or []
        marked = [level.name for level in levels if level.host]
        if host_chips is not None and marked:
            raise ValueError(f"give the host once: level {marked[0]!r} says host: true; drop "
                             "one of the two")
        if host_chips is not None and levels and levels[-1].chips_per_group % host_chips:
            raise ValueError(f"must divide the outermost group "
                             f"({levels[-1].chips_per_group} chips)")
        return host_chips

    @field_validator("notes")
    @classmethod
    def _notes(cls, notes: dict[str, str]) -> dict[str, str]:
        return _check_note_keys(notes, set(cls.model_fields) - {"notes"})
