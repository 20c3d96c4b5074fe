"""The task graph as data: flat arrays, built in blocks, tiled where a structure repeats.

Model
-----
* A **resource** is anything that does one thing at a time: a chip's compute engine, one
  direction of a link, a switch port.
* A **task** has a duration, a set of resources it holds for that duration, dependencies, an
  optional ``tail_ns`` and a byte count. It becomes *ready* when every dependency has completed,
  *starts* when it is ready and all of its resources are free (it takes them all at once, never
  a partial set, so there is no hold-and-wait deadlock), releases its resources after
  ``duration_ns`` and *completes* ``tail_ns`` later. The tail models latency that does not
  occupy a resource (a link's propagation and switch latency: the next message may enter the
  wire while this one is still in flight).
* **Contention** is exclusive and work-conserving: when several ready tasks want a resource, the
  one with the lowest task id (emission order = program order) goes first; a task whose
  resources are free is never kept waiting for a lower-priority reason (no reservation, so a
  small task may overtake a blocked one). Two equal transfers on one link therefore take twice
  as long as one.
* **Time** advances in rounds. In a round at time t the kernel first applies every event at t
  (releases and completions), then dispatches ready tasks in priority order. A zero-duration
  task started in that dispatch completes at t and triggers another round at the same t.

Overlap of compute and communication is never written down anywhere: it appears because a
transfer and a compute that do not depend on each other hold different resources.

Storage
-------
Graphs reach tens of millions of tasks, so a task is a row of flat numpy arrays, never an
object: duration (int64), tail (int32), bytes (int64), and its resources and dependencies in
CSR form (int32 ids). Tasks are added one at a time (:meth:`TaskGraph.add_task`, for tests and
small graphs), in blocks of arrays (:meth:`TaskGraph.add_block`, what the emitters use), or as
tiled copies of a block range (:meth:`TaskGraph.add_tiles`: a model layer that repeats is built
once and copied with shifted ids). :meth:`TaskGraph.freeze` lays everything out once; copies are
written straight into the final arrays, so building costs memory bandwidth, not Python.

This module imports nothing from the rest of ctxplan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxplan.sim.notice import compile_notice
from ctxplan.sim.result import EventLimitError, SimResult, SimulationError

I32 = np.int32
I64 = np.int64
_MAX_TAIL_NS = np.iinfo(I32).max
_MAX_ID = np.iinfo(I32).max

KERNELS = ("compiled", "reference")
_MAX_LANES = 16


class CSRView:
    """Row access to a CSR pair: ``view[t]`` is the tuple of ids of row t."""

    def __init__(self, ptr: npt.NDArray[np.integer], idx: npt.NDArray[np.integer]) -> None:
        self.ptr = ptr
        self.idx = idx

    def __getitem__(self, t: int) -> tuple[int, ...]:
        return tuple(int(x) for x in self.idx[self.ptr[t]:self.ptr[t + 1]])

    def __len__(self) -> int:
        return len(self.ptr) - 1

    def rows(self) -> list[tuple[int, ...]]:
        """Every row as a tuple of Python ints, converted at once (a trace reads them all)."""
        ptr, idx = self.ptr.tolist(), self.idx.tolist()
        return [tuple(idx[ptr[t]:ptr[t + 1]]) for t in range(len(ptr) - 1)]


@dataclass
class _Block:
    first: int
    duration: npt.NDArray[I64]
    tail: npt.NDArray[I32]
    nbytes: npt.NDArray[I64]
    res_ptr: npt.NDArray[I64]      # local to the block
    res_idx: npt.NDArray[I32]
    dep_ptr: npt.NDArray[I64]      # local to the block
    dep_idx: npt.NDArray[I32]      # global task ids

    @property
    def n(self) -> int:
        return len(self.duration)


@dataclass
class _Tiles:
    first: int        # id of the first copied task
    src_first: int    # the copied range [src_first, src_first + period)
    period: int
    times: int


class TaskGraph:
    """Build a task graph, then :meth:`run` it (the first run freezes it; no adds after)."""

    # The compiled kernel's first guesses of the room it needs (it asks for twice as much
    # when one is too small); tests set them tiny to exercise the regrowth.
    initial_lane_cap = 1024
    initial_pool_cap_per_resource = 16
    initial_pool_extra = 4096
    initial_pool_tasks_per_slot = 2   # one wait-queue slot per two tasks: 2 B per task

    def __init__(self, namer: Callable[[int], str] | None = None) -> None:
        # Names are optional: a builder that keeps its own per-task metadata gives none and a
        # ``namer`` that makes a task's name on demand (only error messages and traces need it).
        self.namer = namer
        self.resource_names: list[str] = []
        self._names: dict[int, str] = {}
        self._parts: list[_Block | _Tiles] = []
        self._n = 0
        # Tasks added one at a time gather here until a block or a freeze seals them.
        self._loose_first = 0
        self._loose: list[tuple[int, int, int, tuple[int, ...], list[int]]] = []
        self._extra_deps: list[tuple[int, int]] = []   # add_dep on tasks already in blocks
        self._frozen = False
        # The laid-out arrays (by freeze()); read them through the properties below.
        self._duration_ns: npt.NDArray[I64] = np.zeros(0, I64)
        self._tail_ns: npt.NDArray[I32] = np.zeros(0, I32)
        self._nbytes: npt.NDArray[I64] = np.zeros(0, I64)
        self._res_ptr: npt.NDArray[I32] = np.zeros(1, I32)
        self._res_idx: npt.NDArray[I32] = np.zeros(0, I32)
        self.dep_ptr: npt.NDArray[I32] | None = np.zeros(1, I32)
        self.dep_idx: npt.NDArray[I32] | None = np.zeros(0, I32)
        self.succ_ptr: npt.NDArray[I32] | None = None
        # Per task, its number of dependencies: counted while the successor lists are built
        # (the kernel consumes a copy), so no second pass over the edges is needed.
        self._dep_counts: npt.NDArray[I32] | None = None
        self.succ_idx: npt.NDArray[I32] | None = None

    # -- building ---------------------------------------------------------------------------

    def add_resource(self, name: str) -> int:
        self.resource_names.append(name)
        return len(self.resource_names) - 1

    def add_task(
        self,
        name: str,
        duration_ns: int,
        resources: Sequence[int] = (),
        deps: Sequence[int] = (),
        *,
        tail_ns: int = 0,
        nbytes: int = 0,
    ) -> int:
        """Add one task and return its id (ids are dense, in order; lower id = higher priority)."""
        self._check_open()
        if duration_ns < 0 or tail_ns < 0:
            raise ValueError(f"task {name!r}: negative duration ({duration_ns} ns, tail {tail_ns})")
        if tail_ns > _MAX_TAIL_NS:
            raise ValueError(f"task {name!r}: tail {tail_ns} ns exceeds {_MAX_TAIL_NS} ns")
        n_res = len(self.resource_names)
        res = tuple(int(r) for r in resources)
        for r in res:
            if not 0 <= r < n_res:
                raise ValueError(f"task {name!r}: unknown resource id {r}")
        if len(set(res)) != len(res):
            raise ValueError(f"task {name!r}: resource listed twice in {res}")
        if not self._loose:
            self._loose_first = self._n
        self._loose.append((int(duration_ns), int(tail_ns), int(nbytes), res,
                            [int(d) for d in deps]))
        if name:
            self._names[self._n] = name
        self._n += 1
        return self._n - 1

    def add_dep(self, task: int, dep: int) -> None:
        """Make ``task`` wait for ``dep`` (may create a cycle; :meth:`run` reports it). Only for
        tasks added by :meth:`add_task` since the last block."""
        self._check_open()
        if not 0 <= task < self._n:
            raise ValueError(f"task {task} does not exist")
        i = task - self._loose_first
        if self._loose and 0 <= i < len(self._loose):
            self._loose[i][4].append(int(dep))
        else:
            self._extra_deps.append((int(task), int(dep)))

    def add_block(
        self,
        duration_ns: npt.ArrayLike,
        resources: npt.ArrayLike,
        deps: npt.ArrayLike,
        *,
        tail_ns: npt.ArrayLike | None = None,
        nbytes: npt.ArrayLike | None = None,
    ) -> int:
        """Add ``n = len(duration_ns)`` tasks at once and return the id of the first.

        ``resources``: (n, k) resource ids padded with -1 (or (n,) for one each, -1 = none).
        ``deps``: (n, w) task ids padded with -1 (or (n,)). ``tail_ns`` and ``nbytes``: (n,) or
        a scalar; default 0.
        """
        n = len(np.asarray(duration_ns).reshape(-1))
        res = np.asarray(resources, I64).reshape(n, -1) if n else np.zeros((0, 0), I64)
        dep = np.asarray(deps, I64).reshape(n, -1) if n else np.zeros((0, 0), I64)
        if (res < -1).any() or (dep < -1).any():
            raise ValueError("block: ids must be >= 0 (-1 pads)")
        return self.add_block_csr(duration_ns, (res >= 0).sum(axis=1), res[res >= 0],
                                  (dep >= 0).sum(axis=1), dep[dep >= 0], tail_ns=tail_ns,
                                  nbytes=nbytes)

    def add_block_csr(
        self,
        duration_ns: npt.ArrayLike,
        res_count: npt.ArrayLike,
        res_ids: npt.ArrayLike,
        dep_count: npt.ArrayLike,
        dep_ids: npt.ArrayLike,
        *,
        tail_ns: npt.ArrayLike | None = None,
        nbytes: npt.ArrayLike | None = None,
    ) -> int:
        """:meth:`add_block` with resources and dependencies given as per-task counts and the
        ids of all tasks one after the other (CSR without the pointer array)."""
        self._check_open()
        self._seal_loose()
        dur = np.asarray(duration_ns, I64).reshape(-1)
        n = len(dur)
        if n == 0:
            return self._n
        tail = np.broadcast_to(np.asarray(0 if tail_ns is None else tail_ns, I64), (n,))
        nb = np.broadcast_to(np.asarray(0 if nbytes is None else nbytes, I64), (n,))
        res_ptr = np.zeros(n + 1, I64)
        np.cumsum(res_count, out=res_ptr[1:])
        dep_ptr = np.zeros(n + 1, I64)
        np.cumsum(dep_count, out=dep_ptr[1:])
        res = np.asarray(res_ids, I64)
        dep = np.asarray(dep_ids, I64)
        if dur.min() < 0 or tail.min() < 0:
            raise ValueError("block: negative duration or tail")
        if tail.max() > _MAX_TAIL_NS:
            raise ValueError(f"block: tail above {_MAX_TAIL_NS} ns")
        if len(res) != res_ptr[-1] or len(dep) != dep_ptr[-1]:
            raise ValueError("block: counts do not match the ids given")
        if res.size and (res.max() >= len(self.resource_names) or res.min() < 0):
            raise ValueError("block: unknown resource id")
        if dep.size and (dep.max() > _MAX_ID or dep.min() < 0):
            raise ValueError("block: dependency id out of range")
        _check_distinct(res, res_ptr)
        first = self._n
        self._parts.append(_Block(first, dur, tail.astype(I32), nb.astype(I64, copy=True),
                                  res_ptr, res.astype(I32), dep_ptr, dep.astype(I32)))
        self._n += n
        return first

    def add_tiles(self, src_first: int, times: int) -> int:
        """Append ``times`` copies of the tasks [src_first, n_tasks) and return the first new id.

        Copy q (1-based) is the range shifted by q * period (period = n_tasks - src_first), with
        every dependency shifted by the same amount. So a dependency of the range must point into
        the range or into the period just before it (a layer waits on the layer before): the
        copies then chain, each waiting on the one before. Anything else is refused.
        """
        self._check_open()
        self._seal_loose()
        period = self._n - src_first
        if times <= 0 or period <= 0:
            return self._n
        lo = src_first - period
        for part in self._parts:
            if not isinstance(part, _Block) or part.first + part.n <= src_first:
                if isinstance(part, _Tiles) and part.first + part.period * part.times > src_first:
                    raise ValueError("add_tiles: the copied range must consist of blocks")
                continue
            if part.first < src_first:
                raise ValueError("add_tiles: the copied range must start at a block boundary")
            if part.dep_idx.size and (part.dep_idx.min() < lo or part.dep_idx.max() >= self._n):
                raise ValueError("add_tiles: a task of the copied range depends on a task outside "
                                 "it and the period before it")
        first = self._n
        self._parts.append(_Tiles(first, src_first, period, times))
        self._n += period * times
        return first

    def _seal_loose(self) -> None:
        if not self._loose:
            return
        loose, self._loose = self._loose, []
        n = len(loose)
        res_ptr = np.zeros(n + 1, I64)
        dep_ptr = np.zeros(n + 1, I64)
        np.cumsum([len(x[3]) for x in loose], out=res_ptr[1:])
        np.cumsum([len(x[4]) for x in loose], out=dep_ptr[1:])
        dep_idx = np.array([d for x in loose for d in x[4]], I64)
        self._parts.append(_Block(
            self._loose_first,
            np.array([x[0] for x in loose], I64),
            np.array([x[1] for x in loose], I32),
            np.array([x[2] for x in loose], I64),
            res_ptr, np.array([r for x in loose for r in x[3]], I32),
            # Ids out of int32 range cannot exist; keep them visible as "does not exist".
            dep_ptr, np.clip(dep_idx, -1, _MAX_ID).astype(I32),
        ))

    def _check_open(self) -> None:
        if self._frozen:
            raise ValueError("the graph is frozen (it has run); build a new one")

    def freeze(self) -> None:
        """Lay every part out in the final flat arrays (once; later calls do nothing)."""
        if self._frozen:
            return
        self._seal_loose()
        self._frozen = True
        n = self._n
        if n > _MAX_ID:
            raise ValueError(f"graph of {n:,} tasks exceeds the {_MAX_ID:,} task ids")
        blocks = {p.first: p for p in self._parts if isinstance(p, _Block)}
        n_res_e = 0
        n_dep_e = 0
        for p in self._parts:
            if isinstance(p, _Block):
                n_res_e += len(p.res_idx)
                n_dep_e += len(p.dep_idx)
            else:
                src = _blocks_in(blocks, p.src_first, p.period)
                n_res_e += p.times * sum(len(b.res_idx) for b in src)
                n_dep_e += p.times * sum(len(b.dep_idx) for b in src)
        if max(n_res_e, n_dep_e) > _MAX_ID:
            raise ValueError("graph has more edges than int32 ids can index")
        self._duration_ns = np.empty(n, I64)
        self._tail_ns = np.empty(n, I32)
        self._nbytes = np.empty(n, I64)
        # CSR pointers written directly (a block's local pointers plus its offset; a tile's
        # copies of the source's, shifted by the edges before them): no per-task counts and
        # no prefix sum over the whole graph.
        self._res_ptr = np.empty(n + 1, I32)
        self.dep_ptr = np.empty(n + 1, I32)
        self._res_ptr[n] = n_res_e
        self.dep_ptr[n] = n_dep_e
        self._res_idx = np.empty(n_res_e, I32)
        self.dep_idx = np.empty(n_dep_e, I32)
        re = de = 0
        for p in self._parts:
            if isinstance(p, _Block):
                a, z = p.first, p.first + p.n
                self._duration_ns[a:z] = p.duration
                self._tail_ns[a:z] = p.tail
                self._nbytes[a:z] = p.nbytes
                np.add(p.res_ptr[:-1], re, out=self._res_ptr[a:z], casting="unsafe")
                np.add(p.dep_ptr[:-1], de, out=self.dep_ptr[a:z], casting="unsafe")
                self._res_idx[re:re + len(p.res_idx)] = p.res_idx
                self.dep_idx[de:de + len(p.dep_idx)] = p.dep_idx
                re += len(p.res_idx)
                de += len(p.dep_idx)
                continue
            # Tiles: the source range is already laid out (it precedes the copies).
            t, s, q = p.period, p.src_first, p.times
            a, z = p.first, p.first + t * q
            for arr in (self._duration_ns, self._tail_ns, self._nbytes):
                arr[a:z].reshape(q, t)[:] = arr[s:s + t]
            src_res = self._res_idx[self._res_ptr[s]:re]
            src_dep = self.dep_idx[self.dep_ptr[s]:de]
            e_res, e_dep = len(src_res), len(src_dep)
            steps = np.arange(1, q + 1, dtype=I64)[:, None]
            np.add(self._res_ptr[s:s + t][None, :], steps * e_res,
                   out=self._res_ptr[a:z].reshape(q, t), casting="unsafe")
            np.add(self.dep_ptr[s:s + t][None, :], steps * e_dep,
                   out=self.dep_ptr[a:z].reshape(q, t), casting="unsafe")
            self._res_idx[re:re + q * e_res].reshape(q, -1)[:] = src_res
            shifts = (np.arange(1, q + 1, dtype=I32) * I32(t))[:, None]
            np.add(src_dep[None, :], shifts, out=self.dep_idx[de:de + q * e_dep].reshape(q, -1))
            re += q * e_res
            de += q * e_dep
        self._parts = []
        if self._extra_deps:
            self._merge_extra_deps()

    def _merge_extra_deps(self) -> None:
        """Fold the edges of add_dep calls on block tasks into the dependency CSR."""
        assert self.dep_ptr is not None and self.dep_idx is not None
        extra = np.array(self._extra_deps, I64)
        self._extra_deps = []
        owner = np.repeat(np.arange(self._n, dtype=I64), np.diff(self.dep_ptr))
        task = np.concatenate([owner, extra[:, 0]])
        dep = np.concatenate([self.dep_idx.astype(I64), np.clip(extra[:, 1], -1, _MAX_ID)])
        order = np.argsort(task, kind="stable")
        self.dep_idx = dep[order].astype(I32)
        self.dep_ptr = np.zeros(self._n + 1, I32)
        np.cumsum(np.bincount(task, minlength=self._n), out=self.dep_ptr[1:])

    # -- reading ----------------------------------------------------------------------------
    # Per-task arrays (reading one freezes the graph).

    @property
    def duration_ns(self) -> npt.NDArray[I64]:
        self.freeze()
        return self._duration_ns

    @property
    def tail_ns(self) -> npt.NDArray[I32]:
        self.freeze()
        return self._tail_ns

    @property
    def nbytes(self) -> npt.NDArray[I64]:
        self.freeze()
        return self._nbytes

    @property
    def res_ptr(self) -> npt.NDArray[I32]:
        self.freeze()
        return self._res_ptr

    @property
    def res_idx(self) -> npt.NDArray[I32]:
        self.freeze()
        return self._res_idx


    @property
    def n_tasks(self) -> int:
        return self._n

    @property
    def n_resources(self) -> int:
        return len(self.resource_names)

    def dependencies(self) -> tuple[npt.NDArray[I32], npt.NDArray[I32]]:
        """(dep_ptr, dep_idx): the dependency CSR (freezes the graph). After a run the graph
        keeps successors instead and rebuilds this on demand (then ids come in id order)."""
        self.freeze()
        if self.dep_ptr is None or self.dep_idx is None:
            assert self.succ_ptr is not None and self.succ_idx is not None
            self.dep_ptr, self.dep_idx, _, _ = _transpose(self._n, self.succ_ptr, self.succ_idx)
        return self.dep_ptr, self.dep_idx

    @property
    def deps(self) -> CSRView:
        """``deps[t]``: the ids task t waits for (freezes the graph)."""
        return CSRView(*self.dependencies())

    @property
    def resources(self) -> CSRView:
        """``resources[t]``: the resource ids task t holds (freezes the graph)."""
        self.freeze()
        return CSRView(self.res_ptr, self.res_idx)

    def name_of(self, t: int) -> str:
        """A task's name: the one it was given, else the namer's."""
        name = self._names.get(t, "")
        return name if name or self.namer is None else self.namer(t)

    # -- running ----------------------------------------------------------------------------

    def successors(self) -> tuple[npt.NDArray[I32], npt.NDArray[I32]]:
        """(succ_ptr, succ_idx), built from the dependencies on first use. The kernel needs
        only these, so the dependency arrays are dropped then (half the edge memory of a
        large graph); :meth:`dependencies` rebuilds them if anyone asks."""
        self.freeze()
        if self.succ_ptr is None or self.succ_idx is None:
            dep_ptr, dep_idx = self.dependencies()
            succ_ptr, succ_idx, dep_counts, bad = _transpose(self._n, dep_ptr, dep_idx)
            if bad >= 0:
                missing = [d for d in self.deps[int(bad)] if not 0 <= d < self._n]
                raise SimulationError(
                    f"task {self.name_of(int(bad))!r} (id {bad}) depends on task id "
                    f"{missing[0]}, which does not exist: it can never start")
            self.succ_ptr, self.succ_idx = succ_ptr, succ_idx
            self._dep_counts = dep_counts
            self.dep_ptr = self.dep_idx = None
        return self.succ_ptr, self.succ_idx

    def run(self, event_limit: int | None = None, kernel: str = "compiled") -> SimResult:
        """Simulate the graph with the compiled kernel (default) or the pure-Python reference.
        ``event_limit`` caps the events processed: N allows exactly N (0 allows none)."""
        if kernel not in KERNELS:
            raise ValueError(f"unknown kernel {kernel!r}; use one of {KERNELS}")
        self.freeze()
        limit = np.iinfo(I64).max if event_limit is None else int(event_limit)
        if kernel == "reference":
            from ctxplan.sim.reference import run_reference
            out = run_reference(self, limit)
        else:
            from ctxplan.sim import compiled  # noqa: F401  (numba loaded before the notice)
            with compile_notice():   # one line on stderr while numba compiles (cold cache)
                out = self._run_compiled(limit)
        status, end, busy, res_bytes, events, done, now, binder = out
        n = self._n
        if status:
            raise EventLimitError(
                f"event limit {event_limit} reached at t = {now} ns after {done} of {n} "
                "tasks; raise the limit if the graph is really this large",
                int(event_limit or 0), int(events), int(done), n)
        if done != n:
            raise SimulationError(self._diagnose_stuck(end))
        return SimResult(int(end.max()) if n else 0, end, busy, res_bytes, int(events),
                         self.duration_ns, self.tail_ns, binder)

    def _run_compiled(self, limit: int) -> tuple[Any, ...]:
        from ctxplan.sim import compiled
        succ_ptr, succ_idx = self.successors()
        pending = self._dep_counts
        if pending is None:   # successor lists given directly: count the edges
            pending = np.bincount(succ_idx, minlength=self._n).astype(I32)
        # Completions after a tail go through FIFO lanes, one per distinct tail value (a few:
        # one per link level), if there are not too many of them.
        tails = np.unique(self.tail_ns[self.tail_ns > 0])
        lanes = (tails if len(tails) <= _MAX_LANES else tails[:0]).astype(I32)
        # Room for in-flight tail completions per lane and for the wait queues; the kernel
        # says when one was too small (rare), and runs again with twice as much.
        lane_cap = self.initial_lane_cap
        pool_cap = (self.initial_pool_cap_per_resource * self.n_resources
                    + self.initial_pool_extra + self._n // self.initial_pool_tasks_per_slot)
        while True:
            out = compiled.run_compiled(
                self.duration_ns, self.tail_ns, self.nbytes, self.res_ptr, self.res_idx,
                succ_ptr, succ_idx, pending.copy(), self.n_resources, limit, lanes, lane_cap,
                pool_cap)
            if out[0] == compiled.LANE_FULL:
                lane_cap *= 2
            elif out[0] == compiled.POOL_FULL:
                pool_cap = max(2 * pool_cap, 8 * self.n_resources + 64)
            else:
                return out

    def _diagnose_stuck(self, end: npt.NDArray[I64]) -> str:
        """Name a task on a dependency cycle (or, failing that, the first unfinished task)."""
        unfinished = [int(t) for t in np.flatnonzero(end < 0)]
        deps = self.deps
        # Depth-first search over the dependency edges of unfinished tasks for a back edge.
        colour = dict.fromkeys(unfinished, 0)  # 0 new, 1 on stack, 2 finished
        for root in unfinished:
            if colour[root]:
                continue
            stack = [(root, iter(deps[root]))]
            colour[root] = 1
            path = [root]
            while stack:
                node, it = stack[-1]
                nxt = next((d for d in it if d in colour and colour[d] != 2), None)
                if nxt is None:
                    colour[node] = 2
                    stack.pop()
                    path.pop()
                elif colour[nxt] == 1:
                    cycle = path[path.index(nxt):]
                    names = " -> ".join(f"{self.name_of(c)!r}" for c in [*cycle, nxt])
                    return (
                        f"dependency cycle through task {self.name_of(nxt)!r} "
                        f"(id {nxt}): {names}"
                    )
                else:
                    colour[nxt] = 1
                    stack.append((nxt, iter(deps[nxt])))
                    path.append(nxt)
        t = unfinished[0]
        waiting = sum(1 for d in deps[t] if d in colour)
        return (
            f"task {self.name_of(t)!r} (id {t}) can never start: "
            f"{waiting} dependencies never complete"
        )


def _transpose(n: int, ptr: npt.NDArray[I32], idx: npt.NDArray[I32]
               ) -> tuple[npt.NDArray[I32], npt.NDArray[I32], npt.NDArray[I32], int]:
    """The transposed CSR (compiled counting sort); see compiled.build_successors."""
    from ctxplan.sim import compiled
    with compile_notice():
        return compiled.build_successors(n, ptr, idx)


def _check_distinct(res: npt.NDArray[I64], ptr: npt.NDArray[I64]) -> None:
    """No task may list one resource twice (it would wait for itself)."""
    widths = np.diff(ptr)
    for w in np.unique(widths[widths > 1]):
        rows = res[ptr[:-1][widths == w][:, None] + np.arange(w)[None, :]]
        rows.sort(axis=1)
        if (rows[:, 1:] == rows[:, :-1]).any():
            raise ValueError("block: a task lists one resource twice")


def _blocks_in(blocks: dict[int, _Block], first: int, n: int) -> list[_Block]:
    """The blocks that exactly tile [first, first + n)."""
    out = []
    at = first
    while at < first + n:
        b = blocks[at]
        out.append(b)
        at += b.n
    return out
