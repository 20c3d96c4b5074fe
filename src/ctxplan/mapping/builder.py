"""GraphBuilder: turns "compute this on chips C" and "send bytes from A to B" into kernel tasks.

It is the one place where ops meet hardware: compute ops get their duration from the chip's
roofline, transfers get their route (the link resources they hold) and duration from the
topology. It also keeps, per task, what the op was (kind, chip, peer, layer, step, FLOPs) so
results can be accounted by op kind and a trace can say what ran.

Everything is vectorised: one call emits a block of tasks (arrays of chips, FLOPs, bytes,
dependencies), so a ring step over 256 ranks is one call, not 256. Dependencies are 2-D int
arrays, one row per task, padded with -1 (:data:`NONE`). Calls buffer their arrays; the buffer
goes to the task graph as one block when someone needs the graph, or when a layer is tiled
(:meth:`GraphBuilder.tile`: a repeating model layer is emitted once and copied).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxplan.hardware.chip import GRAPH, Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.hardware.topology import Topology
from ctxplan.mapping.buffers import BufferLog
from ctxplan.sim import SimResult, TaskGraph

NONE = -1  # padding in dependency rows
IdArray = npt.NDArray[np.int64]
Num = float | npt.NDArray[np.float64] | npt.NDArray[np.int64]

_META_DTYPES = {"kind": np.uint8, "chip": np.int32, "peer": np.int32, "layer": np.int16,
                "step": np.int16, "flops": np.float64}
_META_FIELDS = tuple(_META_DTYPES)

# Roles of resources (GraphBuilder.resource_role).
COMPUTE = "compute"


@dataclass(frozen=True)
class Work:
    """One roofline part of a compute op; FLOPs, bytes and shapes may be per-task arrays."""

    op_class: str      # "matmul" | "attention" | "memory": selects the chip efficiency
    flops: Any         # float or array: FLOPs of the part
    mem_bytes: Any     # float or array: HBM bytes read + written
    dtype: str         # compute dtype, selects the peak
    m_rows: Any = 0.0      # matmul: rows of the GEMM; attention: query tokens (0: unknown)
    kv_tokens: Any = 0.0   # attention: KV length per sequence in the block (0: unknown)
    k_depth: Any = 0.0     # matmul: the GEMM's K, its input width on the chip (0: unknown)
    q_rows: Any = 0.0      # attention: query rows sharing one KV head in one sequence: query
                           # heads per KV head x new tokens (0: unknown)
    causal: bool = True    # attention: the block has a causal mask (prefill's diagonal)
    head_dim: float = 0.0  # attention: the kernel's head dim, FLOPs per (query, key, head) / 4
                           # (0: the reference the balance is given at)
    pieces: Any = 0.0      # the streams the kernel runs one after another (a grouped GEMM: its
                           # groups), each paying its class's stream ramp (0: one)


def op_device_ns(chip: Chip, parts: Sequence[Work], n: int = 1) -> npt.NDArray[np.int64]:
    """The device time of an op of ``parts`` (one kernel each, in sequence) on ``n`` chips
    at once: the sum of the kernels' :meth:`Chip.compute_ns_array`."""
    duration = np.zeros(n, np.int64)
    for w in parts:
        duration += chip.compute_ns_array(w.op_class, w.flops, w.mem_bytes, w.dtype,
                                          m_rows=w.m_rows, kv_tokens=w.kv_tokens,
                                          k_depth=w.k_depth, q_rows=w.q_rows,
                                          causal=w.causal, head_dim=w.head_dim,
                                          pieces=w.pieces)
    return duration


def deps_of(*columns: Any, n: int | None = None) -> IdArray:
    """Dependency rows from columns: each column is a scalar id, an (n,) array or an (n, w)
    array (-1 = none). Returns an (n, total width) int64 array."""
    cols = [np.asarray(c, np.int64) for c in columns]
    if n is None:
        n = max((c.shape[0] for c in cols if c.ndim), default=1)
    parts = []
    for c in cols:
        if c.size == 0:
            continue
        if c.ndim == 0:
            parts.append(np.full((n, 1), c, np.int64))
        elif c.ndim == 1:
            parts.append(c.reshape(n, 1))
        else:
            parts.append(c.reshape(n, -1))
    if not parts:
        return np.full((n, 0), NONE, np.int64)
    return np.concatenate(parts, axis=1)


def _rows(deps: Any, n: int) -> IdArray:
    """Dependency rows for n tasks from what emitters pass: an (n, w) array, an (n,) array or
    a scalar (one dependency each), None / () (none), or for a single task a flat sequence of
    ids and id arrays."""
    if deps is None:
        return np.full((n, 0), NONE, np.int64)
    if isinstance(deps, (list, tuple)):
        if not deps:
            return np.full((n, 0), NONE, np.int64)
        if n != 1:
            raise ValueError(f"dependencies for {n} tasks must be an array of rows")
        return np.concatenate([np.ravel(np.asarray(d, np.int64)) for d in deps]).reshape(1, -1)
    arr = np.asarray(deps, np.int64)
    if arr.ndim == 2 and arr.shape[0] == n:
        return arr
    if arr.ndim == 1 and n == 1:
        return arr.reshape(1, -1)
    return deps_of(arr, n=n)


def _column(value: npt.NDArray[Any], shape: tuple[int]) -> npt.NDArray[Any]:
    """``value`` as a column of ``shape`` (a scalar repeated): np.broadcast_to's result,
    cheaper for the scalars and whole columns the emitters mostly pass (a hot path of the
    graph build)."""
    if value.shape == shape:
        return value
    if value.ndim == 0:
        return np.full(shape, value, value.dtype)
    return np.broadcast_to(value, shape)


class _Buffer:
    """Per-task arrays of the calls not yet handed to the graph (resources and dependencies
    already in CSR form: rows of different calls have different widths)."""

    def __init__(self) -> None:
        self.parts: dict[str, list[npt.NDArray[Any]]] = {
            k: [] for k in ("duration", "tail", "nbytes", "res_n", "res", "dep_n", "deps",
                            "kind", "chip", "peer", "layer", "step", "flops")}
        self.n = 0

    def add(self, res: npt.NDArray[np.int64], deps: npt.NDArray[np.int64],
            **cols: npt.NDArray[Any]) -> None:
        for k, v in cols.items():
            self.parts[k].append(v)
        for name, rows in (("res", res), ("dep", deps)):
            mask = rows >= 0
            self.parts[f"{name}_n"].append(mask.sum(axis=1))
            self.parts["res" if name == "res" else "deps"].append(rows[mask])
        self.n += len(cols["duration"])


_WORK_ARRAYS = ("flops", "mem_bytes", "m_rows", "kv_tokens", "k_depth", "q_rows", "pieces")


def _work_key(w: Work) -> tuple[Any, ...]:
    """What determines a part's durations: its class, dtype and flags, and the bytes of its
    (scalar or per-chip) numbers."""
    return (w.op_class, w.dtype, w.causal, w.head_dim,
            *(_number_key(getattr(w, name)) for name in _WORK_ARRAYS))


def _number_key(x: Any) -> Any:
    if isinstance(x, (int, float)):
        return x
    a = np.asarray(x)
    return (a.dtype.str, a.shape, a.tobytes())


class _StageTopology:
    """The topology seen from a pipeline stage: chip arguments of its chip queries are the
    stage's own, shifted by its first chip; everything else is the topology's."""

    def __init__(self, topology: Topology, base: int) -> None:
        self._topology = topology
        self._base = base

    def levels_of(self, src: Any, dst: Any) -> npt.NDArray[np.int64]:
        return self._topology.levels_of(np.asarray(src, np.int64) + self._base,
                                        np.asarray(dst, np.int64) + self._base)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._topology, name)


class GraphBuilder:
    """Emit compute and transfer tasks for one phase on ``n_chips`` chips of a cluster."""

    def __init__(self, chip: Chip, cluster: Cluster, n_chips: int, launch: str = GRAPH) -> None:
        self.chip = chip
        self.n_chips = n_chips
        # How compute ops launch their kernels (Chip.launched_ns): decode replays CUDA graphs,
        # prefill runs eager, as engines run them (docs/mapping.md, "What a layer launches").
        self.launch = launch
        # The graph and the topology refer back to the builder only weakly: a cycle would keep
        # a large graph's arrays alive until the next full garbage collection, which the
        # simulation pauses (a solve's memory then grew by each graph it built, issue 24).
        self._graph = TaskGraph(namer=_weak_namer(self))
        self.resource_chip: list[int] = []   # chip owning each resource (its trace process)
        self.resource_role: list[str] = []   # COMPUTE, or the link role the topology gives
        # Compute engines first so resource id c is chip c's compute engine.
        self.compute_res = np.array([self.add_resource(f"chip{c}.compute", c, COMPUTE)
                                     for c in range(n_chips)], np.int64)
        self._topology = Topology(cluster, n_chips, weakref.proxy(self))
        # A pipeline stage being emitted (:meth:`stage`): its first chip and its chips; chip
        # arguments are the stage's own (0 .. width - 1) while it is set.
        self._base = 0
        self._width = n_chips
        self._stage_topology: _StageTopology | None = None
        # Op durations by their parts (:meth:`compute`).
        self._durations: dict[tuple[Any, ...], tuple[IdArray, npt.NDArray[np.float64]]] = {}
        self.kinds: list[str] = []           # kind code -> name
        self._kind_code: dict[str, int] = {}
        self._buf = _Buffer()
        # Per-task metadata in parts: a dict of arrays per flushed block, or a tiling record
        # (first task copied, period, copies, layers per copy). A field is laid out in full
        # only when someone reads it (evaluate reads the kinds; tests and traces read more).
        self._meta_parts: list[dict[str, npt.NDArray[Any]] | tuple[int, int, int, int]] = []
        self._meta_cache: dict[str, npt.NDArray[Any]] = {}
        self._kind_names: list[str] | None = None
        # The buffers the graph implies (mapping/buffers.py): memory from the schedule.
        self.buffers = BufferLog(n_chips)
        # A chunked prefill: the first task of its last chunk (what a streamed handoff waits
        # on: a layer's KV is whole once the last chunk has projected it).
        self.last_chunk_first_task = 0
        # A pipelined decode: the task ids [first, end) of each micro-batch, in order (a
        # sequence's TPOT is its micro-batch's span, mapping/decode.py).
        self.micro_batches: list[tuple[int, int]] = []
        # A pipelined prefill: (chunk, stage, first task, end task) of each stage's pass over
        # each chunk, in emission order (for tests and traces).
        self.pipeline_spans: list[tuple[int, int, int, int]] = []

    @property
    def topology(self) -> Topology:
        """The cluster's links; inside :meth:`stage`, seen from the stage (chip arguments its
        own)."""
        if self._stage_topology is not None:
            return self._stage_topology  # type: ignore[return-value]
        return self._topology

    @contextmanager
    def stage(self, first_chip: int, n_chips: int) -> Iterator[None]:
        """Emit on chips ``first_chip`` .. ``first_chip + n_chips - 1`` as if they were a pool
        of their own (a pipeline stage): inside the block every chip argument (compute,
        transfers, buffers, topology queries) is an index into the stage, and
        :meth:`first_task_since` answers for the stage's chips."""
        saved = self._base, self._width, self._stage_topology
        self._base, self._width = first_chip, n_chips
        self._stage_topology = _StageTopology(self._topology, first_chip) if first_chip else None
        try:
            yield
        finally:
            self._base, self._width, self._stage_topology = saved

    def _chips(self, chips: Any) -> IdArray:
        out = np.atleast_1d(np.asarray(chips, np.int64))
        return out + self._base if self._base else out

    # ResourceSink protocol for the topology.
    def add_resource(self, name: str, chip: int = -1, role: str = "link") -> int:
        self.resource_chip.append(chip)
        self.resource_role.append(role)
        return self._graph.add_resource(name)

    @property
    def graph(self) -> TaskGraph:
        """The task graph, with every task emitted so far."""
        self.flush()
        return self._graph

    @property
    def n_tasks(self) -> int:
        return self._graph.n_tasks + self._buf.n

    def _code(self, kind: str) -> int:
        code = self._kind_code.get(kind)
        if code is None:
            code = self._kind_code[kind] = len(self.kinds)
            self.kinds.append(kind)
        return code

    def _emit(self, n: int, kind: str, chip: Any, peer: Any, duration: Any, res: Any,
              deps: Any, layer: int, step: Any, flops: Any, tail: Any = 0,
              nbytes: Any = 0) -> IdArray:
        first = self.n_tasks
        if n == 0:
            return np.zeros(0, np.int64)
        full = _column
        self._buf.add(
            duration=np.asarray(duration, np.int64).reshape(n),
            tail=full(np.asarray(tail, np.int64), (n,)),
            nbytes=full(np.asarray(nbytes, np.int64), (n,)),
            res=np.asarray(res, np.int64).reshape(n, -1),
            deps=_rows(deps, n),
            kind=np.full(n, self._code(kind), np.uint8),
            chip=full(np.asarray(chip, np.int32), (n,)),
            peer=full(np.asarray(peer, np.int32), (n,)),
            layer=np.full(n, layer, np.int16),
            step=full(np.asarray(step, np.int16), (n,)),
            flops=full(np.asarray(flops, np.float64), (n,)),
        )
        return np.arange(first, first + n, dtype=np.int64)

    def flush(self) -> None:
        """Hand the buffered tasks to the graph as one block."""
        buf = self._buf
        if not buf.n:
            return
        p = buf.parts
        cat = np.concatenate
        self._graph.add_block_csr(cat(p["duration"]), cat(p["res_n"]), cat(p["res"]),
                                 cat(p["dep_n"]), cat(p["deps"]), tail_ns=cat(p["tail"]),
                                 nbytes=cat(p["nbytes"]))
        self._meta_parts.append({k: cat(p[k]) for k in _META_FIELDS})
        self._meta_cache.clear()
        self._buf = _Buffer()

    # -- emitting ---------------------------------------------------------------------------

    def compute(self, chips: Any, kind: str, parts: Sequence[Work], deps: Any = None, *,
                layer: int = -1, step: Any = -1) -> IdArray:
        """A compute op on each of ``chips``: its parts run one after another on the chip's
        compute engine, each one kernel, so the op takes the sum of the parts' device times
        (roofline and the class's kernel floor), launched as the builder's mode says
        (docs/mapping.md, "Per-op cost"). Part fields may be scalars or arrays aligned with
        ``chips``."""
        chips = self._chips(chips)
        n = len(chips)
        # The same op with the same parts recurs on every stage of a pipeline and every chunk
        # of a chunked prefill: its durations are looked up rather than recomputed (the
        # roofline of small numpy arrays is most of a graph's build then). Same values, so
        # the schedule is the same task for task.
        key = (n, tuple(_work_key(w) for w in parts))
        got = self._durations.get(key)
        if got is None:
            duration = op_device_ns(self.chip, parts, n)
            total_flops = np.zeros(n, np.float64)
            for w in parts:
                total_flops += w.flops
            duration = np.asarray(self.chip.launched_ns(duration, len(parts), self.launch),
                                  np.int64)
            got = self._durations[key] = (duration, total_flops)
        duration, total_flops = got
        return self._emit(n, kind, chips, -1, duration, self.compute_res[chips], deps, layer,
                          step, total_flops)

    def sync(self, chips: Any, kind: str, deps: Any = None, *, layer: int = -1) -> IdArray:
        """Zero-time joins (no resource): each completes when its row of ``deps`` has."""
        chips = self._chips(chips)
        n = len(chips)
        return self._emit(n, kind, chips, -1, np.zeros(n, np.int64),
                          np.full((n, 0), NONE, np.int64), deps, layer, -1, 0.0)

    def delay(self, chips: Any, kind: str, duration_ns: Any, deps: Any = None, *,
              layer: int = -1, step: Any = -1) -> IdArray:
        """Tasks that take ``duration_ns`` and hold no resource: latency on the dependency path
        that occupies neither a compute engine nor a link (the fixed cost of a communication
        operation: launch, proxy, synchronisation; docs/mapping.md, "Operations")."""
        chips = self._chips(chips)
        n = len(chips)
        duration = np.broadcast_to(np.asarray(duration_ns, np.int64), (n,))
        return self._emit(n, kind, chips, -1, duration, np.full((n, 0), NONE, np.int64), deps,
                          layer, step, 0.0)

    def send(self, src: Any, dst: Any, nbytes: Any, kind: str, deps: Any = None, *,
             layer: int = -1, step: Any = -1, rate: float = 1.0) -> IdArray:
        """Point-to-point transfers: each holds every link of its route for bytes / bandwidth
        (``rate``: the fraction of it the sending kernel reaches), then completes one route
        latency later (latency does not hold the link)."""
        src = self._chips(src)
        n = len(src)
        dst = np.broadcast_to(np.asarray(dst, np.int64) + self._base, (n,))
        nb = np.broadcast_to(np.asarray(nbytes, np.int64), (n,))
        res, hold_ns, latency_ns = self._topology.routes(src, dst, nb, rate)
        return self._emit(n, kind, src, dst, hold_ns, res, deps, layer, step, 0.0,
                          tail=latency_ns, nbytes=nb)

    def buffer(self, chips: Any, nbytes: Any, alloc: Any, release: Any = -1, *,
               kv: bool = False) -> None:
        """Declare a buffer on each of ``chips`` (mapping/buffers.py): ``nbytes`` each,
        allocated at the earliest start of its ``alloc`` task(s), released at the latest end of
        its ``release`` task(s) (-1: at the phase's end, as KV is); ``kv`` marks KV."""
        self.buffers.add(self.n_tasks, self._chips(chips), nbytes, alloc, release, kv=kv)

    def first_task_since(self, mark: int) -> npt.NDArray[np.int64]:
        """Per chip of the pool (of the stage, inside :meth:`stage`): its first task emitted
        since task count ``mark`` (-1 if none), from the calls not yet handed to the graph
        (an emitter asks within a layer)."""
        out = np.full(self.n_chips, NONE, np.int64)
        buf = self._buf
        if mark < self._graph.n_tasks or not buf.n:
            return out[self._base:self._base + self._width]
        chips = np.concatenate(buf.parts["chip"]).astype(np.int64)
        ids = self._graph.n_tasks + np.arange(buf.n, dtype=np.int64)
        keep = ids >= mark
        chips, ids = chips[keep], ids[keep]
        ok = (chips >= 0) & (chips < self.n_chips)
        chips, ids = chips[ok], ids[ok]
        # the first of each chip: ids ascend, so a reversed assignment keeps the first
        out[chips[::-1]] = ids[::-1]
        return out[self._base:self._base + self._width]

    def tile(self, first_task: int, times: int, layers_per_copy: int) -> int:
        """Copy the tasks emitted since ``first_task`` ``times`` times (see
        :meth:`TaskGraph.add_tiles`: each copy waits on the one before); the copies' layer
        numbers advance by ``layers_per_copy``. Returns the id shift of the last copy."""
        self.flush()
        period = self.graph.n_tasks - first_task
        self.graph.add_tiles(first_task, times)
        self.buffers.tile(first_task, period, times)
        self._meta_parts.append((first_task, period, times, layers_per_copy))
        self._meta_cache.clear()
        return period * times

    # -- reading ----------------------------------------------------------------------------

    def _field(self, name: str) -> npt.NDArray[Any]:
        """One metadata field for every task, laid out (and kept) on first use."""
        got = self._meta_cache.get(name)
        if got is not None and len(got) == self.n_tasks:
            return got
        self.flush()
        pieces: list[npt.NDArray[Any]] = []
        done = 0
        for part in self._meta_parts:
            if isinstance(part, dict):
                pieces.append(part[name])
                done += len(part[name])
                continue
            first, period, times, layers = part
            src = np.concatenate(pieces)[first:first + period] if pieces else np.zeros(0)
            rep = np.tile(src, times)
            if name == "layer":
                rep += np.repeat(np.arange(1, times + 1, dtype=np.int16) * np.int16(layers),
                                 period)
            pieces.append(rep)
            done += len(rep)
        out = np.concatenate(pieces) if pieces else np.zeros(0, _META_DTYPES[name])
        self._meta_cache[name] = out
        return out

    @property
    def kind_code(self) -> npt.NDArray[np.uint8]:
        """Per task: index into :attr:`kinds`."""
        return self._field("kind")

    @property
    def kind(self) -> list[str]:
        """Per task: its op kind (a list of names, built once; for large graphs prefer
        :attr:`kind_code` and :meth:`mask_of`)."""
        codes = self.kind_code
        cached = self._kind_names
        if cached is None or len(cached) != len(codes):
            names = self.kinds
            cached = self._kind_names = [names[c] for c in codes.tolist()]
        return cached

    @property
    def chip_of(self) -> npt.NDArray[np.int32]:
        """Per task: the chip (compute) or the sender (transfer)."""
        return self._field("chip")

    @property
    def peer(self) -> npt.NDArray[np.int32]:
        """Per task: the receiver (transfer), -1 for compute."""
        return self._field("peer")

    @property
    def layer(self) -> npt.NDArray[np.int16]:
        return self._field("layer")

    @property
    def step(self) -> npt.NDArray[np.int16]:
        return self._field("step")

    @property
    def flops(self) -> npt.NDArray[np.float64]:
        return self._field("flops")

    def mask_of(self, kinds: Sequence[str]) -> npt.NDArray[np.bool_]:
        """Per task: is its kind one of ``kinds``."""
        codes = [self._kind_code[k] for k in kinds if k in self._kind_code]
        return np.isin(self.kind_code, np.array(codes, np.uint8))

    def count_kinds(self, kinds: Sequence[str], layer: int) -> int:
        """Tasks of the given kinds in one layer."""
        return int((self.mask_of(kinds) & (self.layer == layer)).sum())

    def most_per_layer(self, kinds: Sequence[str]) -> int:
        """The most tasks of the given kinds in any one layer (0 when there are none)."""
        layers = self.layer[self.mask_of(kinds)]
        layers = layers[layers >= 0]
        return int(np.bincount(layers).max()) if layers.size else 0

    def task_name(self, t: int) -> str:
        """What task ``t`` ran: "L3.passkv_attn[2]" or "L3.passkv_send[2] 0->1".

        Built on demand from the metadata rather than stored per task: graphs reach millions
        of tasks, and a string each would be most of their memory.
        """
        step = int(self.step[t])
        peer = int(self.peer[t])
        where = f"[{step}]" if step >= 0 else ""
        name = f"L{int(self.layer[t])}.{self.kinds[int(self.kind_code[t])]}{where}"
        return f"{name} {int(self.chip_of[t])}->{peer}" if peer >= 0 else name

    def run(self, event_limit: int | None = None, kernel: str = "compiled") -> SimResult:
        self.flush()
        return self.graph.run(event_limit=event_limit, kernel=kernel)


def _weak_namer(builder: GraphBuilder) -> Callable[[int], str]:
    """``builder.task_name`` without a strong reference to the builder (see its ``__init__``);
    once the builder is gone a task is named by its id."""
    ref = weakref.ref(builder)

    def name(task: int) -> str:
        b = ref()
        return f"task {task}" if b is None else b.task_name(task)

    return name
