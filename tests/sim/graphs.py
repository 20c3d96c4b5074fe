"""Task-graph specs for the simulator tests: random generators (hypothesis and seeded random)
and structured shapes (chain, fork-join, pass-KV ring). A spec is plain data; ``build`` turns
it into a kernel :class:`TaskGraph` and ``oracle_args`` into the oracles' arguments, so neither
side reads the other's storage."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import strategies as st

from ctxplan.sim import SimResult, TaskGraph

MAX_TASKS = 60
MAX_RESOURCES = 6
MAX_DURATION = 1000
MAX_TAIL = 50


@dataclass
class Spec:
    n_resources: int
    duration: list[int] = field(default_factory=list)
    tail: list[int] = field(default_factory=list)
    resources: list[tuple[int, ...]] = field(default_factory=list)
    deps: list[tuple[int, ...]] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)

    @property
    def n_tasks(self) -> int:
        return len(self.duration)

    def add(
        self,
        duration: int,
        resources: tuple[int, ...] = (),
        deps: tuple[int, ...] = (),
        tail: int = 0,
        nbytes: int = 0,
    ) -> int:
        self.duration.append(duration)
        self.tail.append(tail)
        self.resources.append(tuple(resources))
        self.deps.append(tuple(deps))
        self.nbytes.append(nbytes)
        return self.n_tasks - 1

    def build(self) -> TaskGraph:
        g = TaskGraph()
        for r in range(self.n_resources):
            g.add_resource(f"r{r}")
        for t in range(self.n_tasks):
            g.add_task(
                f"t{t}",
                self.duration[t],
                self.resources[t],
                self.deps[t],
                tail_ns=self.tail[t],
                nbytes=self.nbytes[t],
            )
        return g

    def run(self, kernel: str = "compiled") -> SimResult:
        return self.build().run(kernel=kernel)

    def oracle_args(self) -> dict[str, Any]:
        return {
            "n_resources": self.n_resources,
            "duration": self.duration,
            "tail": self.tail,
            "resources": self.resources,
            "deps": self.deps,
        }

    def with_durations(self, duration: list[int]) -> Spec:
        return replace(self, duration=list(duration))

    def scaled(self, k: int) -> Spec:
        """Every duration and tail multiplied by k."""
        return replace(
            self,
            duration=[d * k for d in self.duration],
            tail=[x * k for x in self.tail],
        )

    def relabelled(self, rng: random.Random) -> Spec:
        """The same graph with task ids shuffled: deps may now point to higher ids, and the
        priorities (ids) no longer follow a topological order."""
        perm = list(range(self.n_tasks))
        rng.shuffle(perm)  # old id -> new id
        inv = [0] * self.n_tasks
        for old, new in enumerate(perm):
            inv[new] = old
        return Spec(
            self.n_resources,
            [self.duration[o] for o in inv],
            [self.tail[o] for o in inv],
            [self.resources[o] for o in inv],
            [tuple(perm[d] for d in self.deps[o]) for o in inv],
            [self.nbytes[o] for o in inv],
        )

    def critical_path(self) -> int:
        """Longest dependency chain, each task weighing duration + tail (Kahn's order)."""
        n = self.n_tasks
        succ: list[list[int]] = [[] for _ in range(n)]
        pending = [len(ds) for ds in self.deps]
        for t, ds in enumerate(self.deps):
            for d in ds:
                succ[d].append(t)
        ready_at = [0] * n
        finish = [0] * n
        order = [t for t in range(n) if not pending[t]]
        for t in order:  # grows while iterating
            finish[t] = ready_at[t] + self.duration[t] + self.tail[t]
            for s in succ[t]:
                ready_at[s] = max(ready_at[s], finish[t])
                pending[s] -= 1
                if not pending[s]:
                    order.append(s)
        assert len(order) == n, "not a DAG"
        return max(finish, default=0)


# -- random graphs -------------------------------------------------------------------------------
# Durations come partly from a small per-graph palette (and 0) so that ties and zero-duration
# rounds are common, partly uniform. Deps only point to lower ids, so every graph is a DAG.


@st.composite
def specs(draw: Any, max_tasks: int = MAX_TASKS, max_resources: int = MAX_RESOURCES) -> Spec:
    # Drawn as one list of per-task tuples and decoded, because hypothesis pays per draw call.
    # Duration codes < 0 pick 0 or a shared palette value (ties); resources come from a bit
    # mask (at most 3 kept); deps d map to t - 1 - d % t, so they shrink towards chains.
    n_res = draw(st.integers(1, max_resources))
    palette = draw(st.lists(st.integers(0, MAX_DURATION), min_size=1, max_size=3))
    fan_in = draw(st.integers(0, 6))
    n = draw(st.integers(1, max_tasks))  # fixed length: lists() alone averages ~4 elements
    rows = draw(
        st.lists(
            st.tuples(
                st.integers(-4, MAX_DURATION),
                st.integers(-MAX_TAIL, MAX_TAIL),
                st.integers(0, (1 << n_res) - 1),
                st.lists(st.integers(0, MAX_TASKS), max_size=fan_in),
            ),
            min_size=n,
            max_size=n,
        )
    )
    spec = Spec(n_res)
    for t, (code, tail, mask, raw_deps) in enumerate(rows):
        dur = code if code >= 0 else 0 if code == -1 else palette[(-code - 2) % len(palette)]
        res = tuple(r for r in range(n_res) if mask >> r & 1)[:3]
        deps = tuple(sorted({t - 1 - d % t for d in raw_deps})) if t else ()
        # Bytes are not drawn (they never affect the schedule); just make them vary.
        nbytes = (t * 7919 + dur) % 4099
        spec.add(dur, res, deps, tail=max(tail, 0), nbytes=nbytes)
    return spec


def random_spec(
    rng: random.Random, max_tasks: int = MAX_TASKS, max_resources: int = MAX_RESOURCES
) -> Spec:
    """The same distribution as :func:`specs`, from a plain seeded RNG."""
    n_res = rng.randint(1, max_resources)
    n = rng.randint(1, max_tasks)
    palette = [rng.randint(0, MAX_DURATION) for _ in range(rng.randint(1, 3))]
    max_fan_in = rng.randint(0, 6)
    p_dep = rng.random()  # how often a task has deps at all
    spec = Spec(n_res)
    for t in range(n):
        res = rng.sample(range(n_res), rng.randint(0, min(3, n_res)))
        deps: list[int] = []
        if t and max_fan_in and rng.random() < p_dep:
            # Random fan-in, biased towards recent tasks (long chains) half of the time.
            lo = max(0, t - 8) if rng.random() < 0.5 else 0
            deps = rng.sample(range(lo, t), rng.randint(1, min(t - lo, max_fan_in)))
        pick = rng.random()
        dur = 0 if pick < 0.15 else rng.choice(palette) if pick < 0.5 else rng.randint(0, 1000)
        tail = 0 if rng.random() < 0.5 else rng.randint(0, MAX_TAIL)
        spec.add(dur, tuple(res), tuple(deps), tail=tail, nbytes=rng.randint(0, 1 << 20))
    return spec


def random_tiefree_single_resource_spec(rng: random.Random, max_tasks: int = MAX_TASKS) -> Spec:
    """At most one resource per task, durations >= 1 drawn from a huge range (so equal sums are
    practically impossible); tails are zero for a third of the tasks, which makes some ties
    (a chain on one resource: the successor is ready the instant the predecessor releases)."""
    n_res = rng.randint(1, MAX_RESOURCES)
    n = rng.randint(1, max_tasks)
    spec = Spec(n_res)
    for t in range(n):
        res = (rng.randrange(n_res),) if rng.random() < 0.85 else ()
        k = rng.randint(0, min(t, 3)) if rng.random() < 0.7 else 0
        deps = tuple(rng.sample(range(t), k))
        tail = 0 if rng.random() < 0.33 else rng.randint(1, 10**9)
        spec.add(rng.randint(1, 10**12), res, deps, tail=tail)
    return spec


# -- structured shapes ----------------------------------------------------------------------------


def chain(durations: list[int], tails: list[int], n_resources: int, rng: random.Random) -> Spec:
    """t0 -> t1 -> ... each on a random (possibly shared) resource."""
    spec = Spec(n_resources)
    for i, (d, x) in enumerate(zip(durations, tails, strict=True)):
        res = (rng.randrange(n_resources),) if rng.random() < 0.8 else ()
        spec.add(d, res, (i - 1,) if i else (), tail=x)
    return spec


def fork_join(branches: list[list[int]], tail: int) -> Spec:
    """source -> k branches (branch b's tasks in a chain, all on resource b) -> sink.

    One resource per task class (= branch): tasks on a resource are totally ordered by deps.
    """
    spec = Spec(len(branches) + 1)
    src = spec.add(1, (len(branches),))
    lasts = []
    for b, durs in enumerate(branches):
        prev = src
        for d in durs:
            prev = spec.add(d, (b,), (prev,), tail=tail)
        lasts.append(prev)
    spec.add(1, (len(branches),), tuple(lasts))
    return spec


def pass_kv_ring(
    compute: list[list[int]], transfer: list[list[int]], tail: int
) -> tuple[Spec, list[int]]:
    """Ring attention's pass-KV pipeline on P chips for S steps (compute[i][j], transfer[i][j]).

    Chip i has a compute engine and an outgoing link to chip i+1. At step j chip i computes on
    its current KV block (C[i,j]) while sending that block on (T[i,j]); step j+1 on chip i waits
    for its own compute and send of step j and for the block arriving from chip i-1 (T[i-1,j]).
    With P = 1 this is one link's transfers interleaved with compute. Returns the spec and the
    ids of the transfer tasks.
    """
    p, s = len(compute), len(compute[0])
    spec = Spec(2 * p)
    c_id = [[-1] * s for _ in range(p)]
    t_id = [[-1] * s for _ in range(p)]
    xfers = []
    for j in range(s):
        for i in range(p):
            deps = () if j == 0 else (c_id[i][j - 1], t_id[i][j - 1], t_id[(i - 1) % p][j - 1])
            c_id[i][j] = spec.add(compute[i][j], (2 * i,), deps)
            t_id[i][j] = spec.add(transfer[i][j], (2 * i + 1,), deps, tail=tail)
            xfers.append(t_id[i][j])
    return spec, xfers
