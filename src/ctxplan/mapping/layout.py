"""The parallel layout of one pool (prefill or decode): who holds which tokens, heads and experts.

Conventions (docs/mapping.md):
* A pool has ``cp`` CP ranks, each a TP group of ``tp`` chips; chip = rank * tp + tp_index, so
  a TP group fills the innermost level of the cluster first (NVLink inside a host).
* Attention heads are split over the TP group. KV heads are split too as long as there are
  enough of them; beyond that (and always for MLA, whose latent serves every head) each TP chip
  keeps the KV of its head group in full, i.e. KV is replicated ``kv_replication`` times.
* MoE experts are spread over the whole pool (EP = every chip of the pool).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxplan.errors import UserInputError
from ctxplan.model.attention import model_default_mla_mode
from ctxplan.model.precision import Precision
from ctxplan.model.spec import ModelSpec

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

PHASES = ("prefill", "decode")
# How decode moves each new query to the KV shards (docs/mapping.md, "Decode"): "broadcast"
# sends it from its home rank to every shard at once; "ring" forwards it rank to rank (Nd - 1
# hops in sequence), as Meta's pass-Q implementation does (arXiv:2411.01783, section 3.3).
PASS_Q_PATTERNS = ("broadcast", "ring")
# How prefill's full-attention layers move data around the CP ring (docs/mapping.md, "A cached
# prefix"): KV blocks (pass-KV, the default) or the new tokens' query blocks, whose partial
# outputs then go home in an all-to-all (pass-Q; Meta, arXiv:2411.01783, section 3).
# "all-gather" (DeepSeek-V4's kinds, as SGLang runs them): every rank's compressed entries
# all-gathered over the CP ranks before the attention (mapping/kinds/compressed.py). A kind runs
# the rings it knows (its ``rings``) and its first one otherwise.
# Evaluation also takes "auto" (simulate each that applies, keep the fastest):
# PREFILL_RING_CHOICES.
PREFILL_RINGS = ("pass-kv", "pass-q", "all-gather")
PREFILL_RING_CHOICES = (*PREFILL_RINGS, "auto")
# How a MoE layer runs over the pool (docs/mapping.md, "The FFN half"): "ep" (experts spread over
# the pool, tokens to them by an all-to-all), or "tp" ("attention CP, MoE TP": the hidden states
# all-gathered over the pool, every expert split over its chips, the partial sums
# reduce-scattered after; SGLang's way for DeepSeek-V4). Evaluation also takes "auto".
MOE_PARALLEL = ("ep", "tp")
MOE_PARALLEL_CHOICES = (*MOE_PARALLEL, "auto")


@dataclass(frozen=True)
class Layout:
    """One pool's layout for one phase. Built by :func:`make_layout`, which validates it."""

    phase: str             # "prefill" | "decode"
    cp: int                # CP ranks: Np (pass-KV ring) or Nd (KV shards, pass-Q)
    tp: int                # chips per CP rank (tensor parallel)
    batch: int             # sequences processed together
    context_length: int    # tokens of context per sequence (S)
    c_kv_bytes: int        # KV bytes per token per layer of the whole model (the KV tier)
    mla_mode: str          # "standard" | "absorbed" ("" for non-MLA models)
    precision: Precision
    pass_q: str = "broadcast"  # decode: "broadcast" | "ring" (PASS_Q_PATTERNS)
    cached: int = 0            # prefill: tokens of the context whose KV is cached (P < S)
    prefill_ring: str = "pass-kv"  # prefill: PREFILL_RINGS (each kind runs those it knows)
    moe_parallel: str = "ep"       # MoE layers: MOE_PARALLEL

    @property
    def new_tokens(self) -> int:
        """Tokens the phase computes per sequence: S - P in prefill."""
        return self.context_length - self.cached

    @property
    def n_chips(self) -> int:
        return self.cp * self.tp

    @property
    def is_prefill(self) -> bool:
        return self.phase == "prefill"

    def chip(self, rank: int, tp_index: int) -> int:
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


def prefill_chunks(context_length: int, cp: int) -> list[int]:
    """Causal load balancing: the sequence in 2*cp chunks; rank i holds chunks i and 2cp-1-i."""
    return split_even(context_length, 2 * cp)


def prefill_rank_tokens(context_length: int, cp: int) -> list[int]:
    chunks = prefill_chunks(context_length, cp)
    return [chunks[i] + chunks[2 * cp - 1 - i] for i in range(cp)]


def decode_shard_tokens(context_length: int, cp: int) -> list[int]:
    """Decode: each rank holds a contiguous S / Nd share of every sequence's KV."""
    return split_even(context_length, cp)


def route_matrix(slots: npt.NDArray[np.int64], n_dest: int) -> npt.NDArray[np.int64]:
    """``route_matrix(slots, n)[x, d]``: routed token-slots chip x sends chip d under uniform
    routing, for every sender x at once.

    Chip x's ``slots[x]`` are spread as evenly as integers allow; the remainder goes to the
    chips from x on (d with (d - x) mod n < remainder), so the remainders of different senders
    land on different chips. Deterministic and conserving (each row sums to its slots).
    """
    import numpy as np

    base, extra = np.divmod(np.asarray(slots, np.int64), n_dest)
    x = np.arange(len(base))[:, None]
    d = np.arange(n_dest)[None, :]
    return base[:, None] + ((d - x) % n_dest < extra[:, None]).astype(np.int64)


def make_layout(
    m: ModelSpec,
    *,
    phase: str,
    cp: int,
    tp: int,
    batch: int,
    context_length: int,
    c_kv_bytes: int,
    mla_mode: str | None,
    precision: Precision,
    max_chips: int,
    pass_q: str = "broadcast",
    cached: int = 0,
    prefill_ring: str = "pass-kv",
    moe_parallel: str = "ep",
) -> Layout:
    """Validate a layout against the model and the cluster; every problem is a UserInputError."""
    if phase not in PHASES:
        raise UserInputError("phase", phase, "use 'prefill' or 'decode'")
    for field, value in (("cp", cp), ("tp", tp), ("batch", batch),
                         ("context_length", context_length)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserInputError(field, value, f"give {field} as a whole number >= 1")
    if context_length > 2**31:
        raise UserInputError("context_length", context_length,
                             "give a context length of at most 2G tokens (2^31)")
    if batch > 2**20:
        raise UserInputError("batch", batch, "give a batch of at most 1,048,576 sequences")
    heads = m.num_attention_heads
    if heads % tp:
        raise UserInputError("tp", tp, f"tp must divide the model's {heads} attention heads")
    spec = m.compressed_attention
    if spec is not None and spec.o_groups % tp:
        raise UserInputError(
            "tp", tp, f"pick a tp that divides {spec.o_groups}",
            f"{m.name}'s grouped output projection has {spec.o_groups} groups, and a TP chip "
            "holds whole groups (its heads' outputs)")
    if m.mla is None:
        kvh = m.num_key_value_heads
        if tp > kvh and tp % kvh:
            raise UserInputError("tp", tp, f"tp above the {kvh} KV heads must be a multiple of it")
    if cp * tp > max_chips:
        raise UserInputError(
            "cp", cp,
            f"cp * tp = {cp * tp} chips exceeds the cluster's {max_chips}; lower cp or tp, "
            "or pick a larger cluster",
        )
    if m.mla is not None:
        mode = mla_mode or model_default_mla_mode(m, phase == "prefill")
        if mode not in ("standard", "absorbed"):
            raise UserInputError("mla_mode", mla_mode, "use 'standard' or 'absorbed'")
        if m.dsa is not None and mode != "absorbed":
            raise UserInputError(
                "mla_mode", mla_mode, "drop it or use 'absorbed'",
                f"{m.name} runs DSA, whose selected latents every query head shares: MLA "
                "absorbed, as DeepSeek implements it")
    else:
        if mla_mode:
            raise UserInputError("mla_mode", mla_mode, f"model {m.name} has no MLA; drop it")
        mode = ""
    if pass_q not in PASS_Q_PATTERNS:
        raise UserInputError("pass_q", pass_q, f"use one of {', '.join(PASS_Q_PATTERNS)}")
    if prefill_ring not in PREFILL_RINGS:
        raise UserInputError("prefill_ring", prefill_ring,
                             f"use one of {', '.join(PREFILL_RING_CHOICES)}")
    if moe_parallel not in MOE_PARALLEL:
        raise UserInputError("moe_parallel", moe_parallel,
                             f"use one of {', '.join(MOE_PARALLEL_CHOICES)}")
    _check_cached(phase, cached, context_length)
    return Layout(phase, cp, tp, batch, context_length, c_kv_bytes, mode, precision, pass_q,
                  cached, prefill_ring, moe_parallel)


def _check_cached(phase: str, cached: int, context_length: int) -> None:
    """A cached prefix is a prefill notion and leaves at least one new token."""
    if isinstance(cached, bool) or not isinstance(cached, int) or cached < 0:
        raise UserInputError("cached", cached, "give the cached prefix as a whole number of "
                             "tokens >= 0")
    if cached and phase != "prefill":
        raise UserInputError("cached", cached, "drop it: a decode step's whole context is "
                             "cached already; --cached sizes a prefill")
    if cached >= context_length:
        raise UserInputError("cached", cached,
                             f"give fewer than the context's {context_length:,} tokens: a "
                             "prefill computes at least one new token")
