"""The buffers a phase's graph implies, and the peak of live bytes per chip after a run.

Emitters declare each buffer beside the tasks that make and use it (docs/mapping.md, "Memory
from the schedule"): the chip that holds it, its bytes, the task(s) whose start allocates it
and the task(s) whose end releases it. A transfer's buffer lives on its receiver; KV written by
a layer is released by nothing (it stays to the end of the phase); weights are static and not
declared here. Dependency edges that carry no data (the all-to-all window, the fixed costs of
operations, a ring's "buffer free" edge) declare nothing.

Memory never changes the schedule, so the peak is computed after the run from the tasks'
start and end times, in numpy, outside the kernel (:meth:`BufferLog.peaks`): one +bytes event
at each buffer's allocation, one -bytes event at its release, sorted per chip (a release before
an allocation at the same instant: the space is reused), and the running sum's maximum.

A buffer is stored as rows of task ids padded with -1, like dependencies: allocated at the
earliest start of its ``alloc`` row (no task: at the phase's start), released at the latest
end of its ``release`` row (no task: at the phase's end). Tiled layers (:meth:`GraphBuilder.tile`)
copy the buffers declared in the copied period, their task ids shifted as the tasks' are, so
only the written layers' buffers are stored (a few bytes per task; docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]


def _rows(ids: Any, n: int) -> IntArray:
    arr = np.asarray(ids, np.int64)
    if arr.ndim == 0:
        return np.full((n, 1), int(arr), np.int64)
    if arr.ndim == 1:
        return arr.reshape(n, 1)
    return arr.reshape(n, -1)


@dataclass(frozen=True)
class _Block:
    mark: int               # tasks emitted when it was declared (decides which tiles copy it)
    chips: npt.NDArray[np.int32]
    nbytes: IntArray
    alloc: IntArray         # (n, w) task ids, -1 padded: allocated at the earliest start
    release: IntArray       # (n, w) task ids, -1 padded: released at the latest end
    kv: bool                # KV (or a kind's state): kept apart in transient_peak


@dataclass(frozen=True)
class LivePeaks:
    """Per chip: the peak of all live bytes (KV and transient buffers together), the peak of
    the transient buffers alone, and the KV held at the phase's end."""

    total: IntArray
    transient: IntArray
    kv_end: IntArray


class BufferLog:
    """The buffers declared on one graph (see the module docstring)."""

    def __init__(self, n_chips: int) -> None:
        self.n_chips = n_chips
        self._blocks: list[_Block] = []
        self._tiles: list[tuple[int, int, int, int]] = []   # (first block, blocks, period, times)

    def __len__(self) -> int:
        return len(self._blocks)

    def add(self, mark: int, chips: Any, nbytes: Any, alloc: Any, release: Any, *,
            kv: bool = False) -> None:
        chips_arr = np.atleast_1d(np.asarray(chips, np.int32))
        n = len(chips_arr)
        size = np.broadcast_to(np.asarray(nbytes, np.float64), (n,))
        keep = size > 0
        if not keep.any():
            return
        self._blocks.append(_Block(
            mark, chips_arr[keep], np.round(size[keep]).astype(np.int64),
            _rows(alloc, n)[keep], _rows(release, n)[keep], kv))

    def tile(self, first_task: int, period: int, times: int) -> None:
        """The tasks from ``first_task`` were copied ``times`` times, ``period`` ids apart:
        so are the buffers declared since."""
        first = next((i for i, blk in enumerate(self._blocks) if blk.mark > first_task),
                     len(self._blocks))
        if first < len(self._blocks) and times > 0:
            self._tiles.append((first, len(self._blocks) - first, period, times))

    def peaks(self, start_ns: IntArray, end_ns: IntArray, makespan_ns: int) -> LivePeaks:
        """The peaks per chip over the simulated schedule (see the module docstring)."""
        c, b, ta, tr, k = self._intervals(start_ns, end_ns, makespan_ns)
        zero = np.zeros(self.n_chips, np.int64)
        if not len(c):
            return LivePeaks(zero, zero.copy(), zero.copy())
        kv_end = np.bincount(c[k], weights=b[k], minlength=self.n_chips).astype(np.int64)
        # One sort serves both peaks: the transient buffers' events, in the order of all the
        # events, are in their own order (the key is the same), and a KV event counted as 0
        # repeats the transient sum before it, so it cannot raise the maximum.
        chip, order, delta = self._order(c, b, ta, tr)
        starts = np.flatnonzero(np.r_[True, chip[1:] != chip[:-1]])
        kv_event = np.concatenate([k, k])[order]
        total = self._segment_max(chip, starts, np.cumsum(delta))
        transient = self._segment_max(chip, starts, np.cumsum(np.where(kv_event, 0, delta)))
        return LivePeaks(total, transient, kv_end)

    def _segment_max(self, chip: IntArray, starts: IntArray, running: IntArray) -> IntArray:
        """Per chip, the maximum of ``running`` over its events (0 at least; 0 for a chip with
        none)."""
        out = np.zeros(self.n_chips, np.int64)
        out[chip[starts]] = np.maximum.reduceat(running, starts)
        return np.maximum(out, 0)

    def series(self, start_ns: IntArray, end_ns: IntArray, makespan_ns: int
               ) -> dict[int, tuple[IntArray, IntArray]]:
        """Per chip with buffers: the instants its live bytes change and the bytes live from
        each (the trace's memory counter track)."""
        c, b, ta, tr, _ = self._intervals(start_ns, end_ns, makespan_ns)
        chip, t, running = self._running(c, b, ta, tr)
        out = {}
        for x in np.unique(chip).tolist():
            sel = chip == x
            tx, vx = t[sel], running[sel]
            last = np.r_[tx[1:] != tx[:-1], True]   # the value after every event at an instant
            out[int(x)] = (tx[last], vx[last])
        return out

    def _intervals(self, start_ns: IntArray, end_ns: IntArray, makespan_ns: int
                   ) -> tuple[npt.NDArray[np.int32], IntArray, IntArray, IntArray,
                              npt.NDArray[np.bool_]]:
        """Every buffer, tiled copies included: (chip, bytes, allocated at, released at, kv)."""
        chips, nbytes, t_alloc, t_release, kv = [], [], [], [], []

        def times(rows: IntArray, of: IntArray, pick: Any, none: int) -> IntArray:
            valid = rows >= 0
            got = np.where(valid, of[np.where(valid, rows, 0)], none)
            return np.asarray(pick(got, axis=-1), np.int64)

        def add(blk: _Block, shift: IntArray | None) -> None:
            alloc, release = blk.alloc, blk.release
            reps = 1
            if shift is not None:   # copies: (times, n, w) ids, each copy shifted
                reps = len(shift)
                alloc = np.where(alloc >= 0, alloc[None] + shift[:, None, None], -1)
                release = np.where(release >= 0, release[None] + shift[:, None, None], -1)
            big = np.iinfo(np.int64).max
            ta = times(alloc, start_ns, np.min, big).ravel()
            ta = np.where(ta == big, 0, ta)
            tr = times(release, end_ns, np.max, -1).ravel()
            tr = np.where(tr < 0, makespan_ns, tr)
            chips.append(np.tile(blk.chips, reps))
            nbytes.append(np.tile(blk.nbytes, reps))
            t_alloc.append(ta)
            t_release.append(np.maximum(tr, ta))
            kv.append(np.full(len(ta), blk.kv))

        for blk in self._blocks:
            add(blk, None)
        for first, count, period, n_times in self._tiles:
            shift = np.arange(1, n_times + 1, dtype=np.int64) * period
            for blk in self._blocks[first:first + count]:
                add(blk, shift)
        if not chips:
            e = np.zeros(0, np.int64)
            return e.astype(np.int32), e, e, e, e.astype(bool)
        c, b, ta, tr, k = (np.concatenate(x) for x in (chips, nbytes, t_alloc, t_release, kv))
        return c, b, ta, tr, k

    @staticmethod
    def _order(chips: npt.NDArray[np.int32], nbytes: IntArray, t_alloc: IntArray,
               t_release: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """Every chip's events sorted by time (a release before an allocation at the same
        instant: the space is reused): (chip, the order over [allocations, releases], bytes
        added), the last two in that order."""
        chip = np.concatenate([chips, chips]).astype(np.int64)
        t = np.concatenate([t_alloc, t_release])
        delta = np.concatenate([nbytes, -nbytes])
        # One sort on one int64 key (chip, then time, then releases first) where it fits,
        # else three: the order within a run of equal keys (all allocations or all releases
        # at one instant on one chip) cannot change a running maximum.
        span = 2 * (int(t.max(initial=0)) + 1)
        if len(chip) and (int(chip.max()) + 1) * span < 2**62:
            order = np.argsort(chip * span + 2 * t + (delta > 0))
        else:
            order = np.lexsort((delta, t, chip))
        return chip[order], order, delta[order]

    @classmethod
    def _running(cls, chips: npt.NDArray[np.int32], nbytes: IntArray, t_alloc: IntArray,
                 t_release: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """Every chip's events sorted as :meth:`_order` sorts them, with the live bytes after
        each: (chip, time, live)."""
        chip, order, delta = cls._order(chips, nbytes, t_alloc, t_release)
        t = np.concatenate([t_alloc, t_release])[order]
        # every chip's allocations are all released by the phase's end: its running sum
        # starts and ends at 0, so one cumulative sum serves every chip
        return chip, t, np.cumsum(delta)
