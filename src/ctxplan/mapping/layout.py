"""The parallel layout of one pool (prefill or decode): who holds which tokens, heads and experts.

Conventions (docs/mapping.md):
* A pool has ``cp`` CP ranks, each a TP group of ``tp`` chips; chip = rank * tp + tp_index, so
  a TP group fills the innermost level of the cluster first (NVLink inside a host).
* Attention heads are split over the TP group. KV heads are split too as long as there are
  enough of them; beyond that (and always for MLA, whose latent serves every head) each TP chip
  keeps the KV of its head group in full, i.e. KV is replicated ``kv_replication`` times.
* MoE experts are spread over the whole pool (EP = every chip of the pool).
* With DP attention (``dp`` > 1): the pool is ``dp`` DP ranks of ``cp`` x ``tp`` chips,
  DP rank g on chips [g W, (g + 1) W) with W = cp x tp; the batch is split over the DP ranks
  (:meth:`Layout.dp_batches`), each sequence whole on its DP rank's CP group, which runs the
  attention layout above for its own sequences (:meth:`Layout.dp_groups`); the attention
  weights, dense FFN, routers and LM head are replicated per DP rank, the experts spread over
  every chip of the pool, whose all-to-all carries every DP rank's tokens.
* With pipeline parallelism (``pp`` > 1) the pool is ``pp`` stages of ``cp`` x ``tp`` chips,
  stage s on chips [s W, (s + 1) W) with W = cp x tp, each stage the layout above for its own
  contiguous range of layers (``stages``; mapping/stages.py), its experts over its own chips.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ctxplan.model.attention import model_default_mla_mode
from ctxplan.model.precision import Precision
from ctxplan.model.spec import ModelSpec
from ctxplan.policy import PREFILL_RINGS, Policy

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

PHASES = ("prefill", "decode")


@dataclass(frozen=True)
class Layout:
    """One pool's layout for one phase, and the policy it runs under (``lay.policy``: how
    queries and blocks move, the dtypes asked for, ...). Built by :func:`make_layout` from
    values the edge checked (``ctxplan.config.checks``)."""

    phase: str             # "prefill" | "decode"
    cp: int                # CP ranks: Np (pass-KV ring) or Nd (KV shards, pass-Q)
    tp: int                # chips per CP rank (tensor parallel)
    batch: int             # sequences processed together
    context_length: int    # tokens of context per sequence (S)
    c_kv_bytes: int        # KV bytes per token per layer of the whole model (the KV tier)
    mla_mode: str          # "standard" | "absorbed" ("" for non-MLA models): resolved
    precision: Precision   # the policy's (or the model's) dtypes, resolved for the chip
    cached: int = 0        # prefill: tokens of the context whose KV is cached (P < S)
    # How the layout executes (its prefill_ring: one of PREFILL_RINGS, "auto" resolved by the
    # evaluation).
    policy: Policy = field(default_factory=Policy)
    pp: int = 1            # pipeline stages (mapping/stages.py)
    # (first, last) layer of each stage, inclusive; () when pp = 1 (every layer on one stage)
    stages: tuple[tuple[int, int], ...] = ()
    dp: int = 1            # DP attention ranks, each a CP group of cp x tp chips

    def dp_batches(self) -> list[int]:
        """Sequences of each DP rank: the batch split as evenly as integers allow, larger
        shares first (every rank holds at least one: the edge refuses batch < dp)."""
        return split_even(self.batch, self.dp)

    def dp_groups(self) -> list[Layout]:
        """The attention layout of each DP rank (dp = 1, its own sequences), in chip order;
        ``[self]`` when dp = 1."""
        if self.dp == 1:
            return [self]
        return [replace(self, dp=1, batch=b) for b in self.dp_batches()]

    @property
    def group_chips(self) -> int:
        """Chips of one DP rank's CP group (cp x tp)."""
        return self.cp * self.tp

    @property
    def new_tokens(self) -> int:
        """Tokens the phase computes per sequence: S - P in prefill."""
        return self.context_length - self.cached

    @property
    def n_chips(self) -> int:
        """Chips of the pool: every stage's."""
        return self.pp * self.stage_chips

    @property
    def stage_chips(self) -> int:
        """Chips of one pipeline stage (the whole pool when pp = 1): dp x cp x tp."""
        return self.dp * self.cp * self.tp

    def stage_layout(self) -> Layout:
        """The layout of one stage: this one without the pipeline (what the emitters of a
        stage's layers are given, on the stage's chips)."""
        if self.pp == 1:
            return self
        return replace(self, pp=1, stages=())

    def stage_ranges(self, n_layers: int) -> list[range]:
        """The layers of each stage as ranges (one range of every layer when pp = 1)."""
        if self.pp == 1:
            return [range(n_layers)]
        return [range(a, b + 1) for a, b in self.stages]

    @property
    def is_prefill(self) -> bool:
        return self.phase == "prefill"

    def chip(self, rank: int, tp_index: int) -> int:
        """The chip of TP index ``tp_index`` of rank ``rank`` (over the DP ranks' CP ranks in
        order: rank = g x cp + CP rank)."""
        return rank * self.tp + tp_index


def kv_split(m: ModelSpec, tp: int) -> int:
    """Over how many TP chips one token's KV is split (the rest of the TP group replicates)."""
    kv_heads = 1 if m.mla is not None else m.num_key_value_heads
    return min(tp, kv_heads)


def kv_bytes_per_chip_token(m: ModelSpec, lay: Layout) -> int:
    """KV bytes per token per layer that one TP chip holds (and sends in the ring)."""
    return -(-lay.c_kv_bytes // kv_split(m, lay.tp))


def kv_replication(m: ModelSpec, lay: Layout) -> float:
    """How many copies of each token's KV a TP group holds (1 when KV heads split evenly)."""
    return lay.tp * kv_bytes_per_chip_token(m, lay) / lay.c_kv_bytes


def split_even(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` integers differing by at most one, larger ones first."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def prefill_segments(context_length: int, cp: int) -> list[int]:
    """Causal load balancing: the sequence in 2*cp segments; rank i holds segments i and
    2cp-1-i."""
    return split_even(context_length, 2 * cp)


def prefill_rank_tokens(context_length: int, cp: int) -> list[int]:
    segments = prefill_segments(context_length, cp)
    return [segments[i] + segments[2 * cp - 1 - i] for i in range(cp)]


def decode_shard_tokens(context_length: int, cp: int) -> list[int]:
    """Decode: each rank holds a contiguous S / Nd share of every sequence's KV."""
    return split_even(context_length, cp)


def route_matrix(slots: npt.NDArray[np.int64], n_dest: int) -> npt.NDArray[np.int64]:
    """``route_matrix(slots, n)[x, d]``: routed token-slots chip x sends chip d under uniform
    routing, for every sender x at once.

    Chip x's ``slots[x]`` are spread as evenly as integers allow; the r left over after the
    even share go one each to the chips r spread evenly over the pool from x on (offsets
    floor(k n / r), k < r), as random top-k routing lands a few slots on chips all over the
    pool, not on x's neighbours (which would keep a small batch's dispatch inside x's host);
    the remainders of different senders land on different chips. Deterministic and conserving
    (each row sums to its slots).
    """
    import numpy as np

    base, extra = np.divmod(np.asarray(slots, np.int64), n_dest)
    x = np.arange(len(base))[:, None]
    offset = (np.arange(n_dest)[None, :] - x) % n_dest
    r = extra[:, None]
    # offset o is one of {floor(k n / r) : k < r} iff k = ceil(o r / n) is < r and maps back
    k = -(-(offset * r) // n_dest)
    chosen = (r > 0) & (k < r) & ((k * n_dest) // np.maximum(r, 1) == offset)
    return base[:, None] + chosen.astype(np.int64)


def make_layout(
    m: ModelSpec,
    *,
    phase: str,
    cp: int,
    tp: int,
    batch: int,
    context_length: int,
    c_kv_bytes: int,
    precision: Precision,
    cached: int = 0,
    policy: Policy | None = None,
    dp: int = 1,
) -> Layout:
    """The layout of checked values (``ctxplan.config.checks`` refuses the others with their
    field): the MLA mode resolved from the policy's, the model's and the phase's."""
    policy = policy or Policy()
    assert phase in PHASES and cp >= 1 and tp >= 1 and batch >= 1, (phase, cp, tp, batch)
    assert 1 <= dp <= batch, (dp, batch)
    assert 0 <= cached < context_length and (cached == 0 or phase == "prefill"), cached
    assert policy.prefill_ring in PREFILL_RINGS, policy.prefill_ring
    if m.mla is not None:
        mode = policy.mla_mode or model_default_mla_mode(m, phase == "prefill")
    else:
        assert not policy.mla_mode, policy.mla_mode
        mode = ""
    return Layout(phase, cp, tp, batch, context_length, c_kv_bytes, mode, precision, cached,
                  policy, dp=dp)
