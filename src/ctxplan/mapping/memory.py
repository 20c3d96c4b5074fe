"""Per-chip memory of a layout: weight shard + KV shard + activations + reserve.

Computed for the fullest chip of the pool (the answer to "does it fit" is about the worst chip).
No simulation is needed, which is what lets the solver prune by capacity before simulating.
See docs/mapping.md ("Memory") for each term and its reasoning.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from ctxplan.hardware.chip import Chip
from ctxplan.mapping.compressed_memory import compressed_decode_scores, compressed_kv_by_rank
from ctxplan.mapping.layout import Layout, decode_shard_tokens, kv_bytes_per_chip_token
from ctxplan.mapping.placement import placement
from ctxplan.model.attention import attention_dims
from ctxplan.model.kinds import (
    INDEXER_SCORE_BYTES,
    TOPK_ENTRY_BYTES,
    kv_tokens,
    linear_state_bytes,
)
from ctxplan.model.linear import (
    attention_linears,
    dense_ffn_linears,
    embedding_params,
    expert_linears,
    lm_head_params,
    mtp_extra_linears,
    router_linear,
    shared_expert_linears,
)
from ctxplan.model.params import bytes_per_param
from ctxplan.model.spec import (
    CHUNKED_ATTENTION,
    FULL_ATTENTION,
    INDEXED_ATTENTION,
    LINEAR_ATTENTION,
    SLIDING_ATTENTION,
    ModelSpec,
)

# Activation tensors of width hidden_size live at once per token in a layer's forward pass:
# residual stream, normed input, attention output, FFN input/output. An estimate (inference
# frees each layer's activations before the next), documented in docs/mapping.md.
LIVE_HIDDEN_TENSORS = 4


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


def _tp_share(params: int, shard: str, tp: int) -> float:
    return params if shard == "replicated" else params / tp


def experts_per_chip(m: ModelSpec, n_chips: int) -> int:
    """Routed experts held per chip with EP over the pool (replicated when chips > experts)."""
    assert m.moe is not None
    return -(-m.moe.n_routed_experts // n_chips)


def weight_bytes_per_chip(m: ModelSpec, lay: Layout) -> int:
    """Weights on one chip: attention and dense FFN TP-sharded and replicated over CP ranks;
    routed experts spread over the pool; shared experts and routers replicated; embedding and
    LM head vocab-sharded over TP (BF16, as shipped even in FP8 checkpoints)."""
    p = lay.precision
    tp = lay.tp
    total = 0.0
    for layer_type, n in m.layer_type_counts.items():
        attn = sum(_tp_share(x.params, x.shard, tp) for x in attention_linears(m, layer_type))
        total += n * attn * bytes_per_param(p.attention_weights)
    ffn_b = bytes_per_param(p.ffn_weights)
    total += m.n_dense_layers * sum(x.params / tp for x in dense_ffn_linears(m)) * ffn_b
    # The MTP layers a model carries (DeepSeek-V4) are loaded like decoder layers of their kind
    # with a MoE FFN, plus eh_proj (docs/model.md, "DeepSeek-V4").
    for layer_type in m.mtp_layer_types:
        attn = sum(_tp_share(x.params, x.shard, tp)
                   for x in [*attention_linears(m, layer_type), *mtp_extra_linears(m)])
        total += attn * bytes_per_param(p.attention_weights)
    if m.moe is not None:
        expert = sum(x.params for x in expert_linears(m))
        shared = sum(x.params for x in shared_expert_linears(m))
        per_layer = experts_per_chip(m, lay.n_chips) * expert + shared
        moe_layers = m.n_moe_layers + len(m.mtp_layer_types)
        gated = moe_layers - m.num_hash_layers   # hash-routed layers have no router
        total += moe_layers * per_layer * ffn_b + gated * router_linear(m).params * 2
    total += (embedding_params(m) + lm_head_params(m)) / tp * 2
    return int(total)


def _overlap(start: int, length: int, lo: int, hi: int) -> int:
    """Tokens of [start, start + length) inside [lo, hi)."""
    return max(0, min(start + length, hi) - max(start, lo))


def _prefill_messages(m: ModelSpec, lay: Layout) -> tuple[int, int]:
    """Prefill pass-Q: bytes per new token per TP chip of a query and of a partial output with
    its FP32 LSE (as :func:`ctxplan.mapping.prefill_passq.message_bytes`)."""
    mode = lay.mla_mode or "standard"
    dims = attention_dims(m, mode)
    heads = dims.q_heads // lay.tp
    act = lay.precision.activation_bytes
    return heads * dims.qk_dim * act, heads * (dims.v_dim * act + 4)


def linear_state_bytes_per_chip(m: ModelSpec, tp: int) -> int:
    """One sequence's state of one linear-attention layer on one TP chip: the value heads are
    split over the TP group (vLLM shards Gated DeltaNet by heads), replicated beyond them."""
    la = m.linear_attention
    assert la is not None
    return -(-linear_state_bytes(m) // min(tp, la.linear_num_value_heads))


def kv_bytes_per_chip(m: ModelSpec, lay: Layout) -> int:
    """KV and linear-attention state on the fullest chip (:func:`kv_bytes_by_rank`)."""
    return max(kv_bytes_by_rank(m, lay))


def kv_bytes_by_rank(m: ModelSpec, lay: Layout) -> list[int]:
    """KV and linear-attention state on each TP chip of each CP rank, summed over the layers
    of each kind (the TP chips of a rank hold equal shares).

    Full and DSA layers keep every token a rank holds (in prefill its cached and new chunks,
    :mod:`ctxplan.mapping.placement`). Sliding-window and chunked layers keep the last
    min(S, w) (min(S, c)) tokens of each sequence: in decode on the sequence's home rank
    (k mod Nd, as decode_local.py places it; a window holding the whole context is full
    attention, sharded like it), in prefill on the rank(s) holding those tokens (the rank's
    chunks). Linear layers keep one state per sequence: in decode on the sequence's home rank,
    in prefill on every rank (each carries the running state of its chunks: a bound that
    over-counts by the states handed on, < 0.1 % of a chip). Prefill also holds, for the one
    layer being computed, the largest transient of its kinds: two ring blocks (full; pass-Q:
    two query blocks and every rank's partial outputs), DSA's buffer of the whole sequence's
    latents and index keys plus the running top-k, the rank's own tokens and a window of
    context per chunk (windowed), or a state in and one out (linear). See docs/mapping.md
    ("Memory"). DeepSeek-V4's caches are placed by
    :func:`ctxplan.mapping.compressed_memory.compressed_kv_by_rank` and added."""
    pooled = compressed_kv_by_rank(m, lay)
    S, b, cp = lay.context_length, lay.batch, lay.cp
    c_chip = kv_bytes_per_chip_token(m, lay)
    counts = m.layer_type_counts
    growing = counts.get(FULL_ATTENTION, 0) + counts.get(INDEXED_ATTENTION, 0)
    windowed = [(n, kv_tokens(m, t, S)) for t, n in counts.items()
                if t in (SLIDING_ATTENTION, CHUNKED_ATTENTION)]
    n_linear = counts.get(LINEAR_ATTENTION, 0)
    state = linear_state_bytes_per_chip(m, lay.tp) if n_linear else 0
    by_rank = []
    if lay.is_prefill:
        pl = placement(S, lay.cached, cp)
        kv_held = pl.kv_tokens
        # A ring block, sized as two of the largest chunks (cached and new): a bound on
        # every rank's block.
        sizes = pl.k_hi - pl.k_lo
        block = 2 * int(sizes[:, 2:].max()) + 2 * int(sizes[:, :2].max())
        transients = []
        if counts.get(FULL_ATTENTION, 0):
            if lay.prefill_ring == "pass-q":
                # Two query blocks, and the partial outputs of every rank's queries held
                # until the all-to-all sends them home.
                q_msg, o_msg = _prefill_messages(m, lay)
                transients.append(2 * int(pl.new_tokens.max()) * q_msg
                                  + lay.new_tokens * o_msg)
            else:
                transients.append(2 * block * c_chip)   # the block attended, the one arriving
        if counts.get(INDEXED_ATTENTION, 0):
            # The ring's blocks are kept for the sparse attention after it (the whole
            # sequence's latents and index keys for one layer), and each query's running
            # top-k (an index and a score per entry).
            assert m.dsa is not None
            topk = min(m.dsa.index_topk, S)
            transients.append(S * c_chip + int(pl.new_tokens.max()) * topk * TOPK_ENTRY_BYTES)
        if n_linear:
            transients.append(2 * state)
        for i in range(cp):
            own = list(zip(pl.k_lo[i].tolist(), pl.k_hi[i].tolist(), strict=True))
            own_new = int(pl.new_tokens[i])
            tokens = growing * int(kv_held[i]) + sum(
                n * _overlap(lo, hi - lo, S - keep, S) for n, keep in windowed
                for lo, hi in own)
            rank_transients = list(transients)
            if windowed:
                span = max(keep for _, keep in windowed)
                rank_transients.append((own_new + 2 * span) * c_chip)
            peak = max(rank_transients, default=0)   # none: DeepSeek-V4 (its own, below)
            by_rank.append(b * (tokens * c_chip + n_linear * state + peak))
        return [a + c for a, c in zip(by_rank, pooled, strict=True)]
    shards = decode_shard_tokens(S, cp)
    # A window holding the whole context runs as full attention, sharded like it; a shorter
    # one lives on each sequence's home (mapping/decode_local.py).
    as_full = sum(n for n, keep in windowed if keep >= S)
    window_tokens = sum(n * keep for n, keep in windowed if keep < S)
    for r in range(cp):
        homes = len(range(r, b, cp))  # sequences whose home is rank r (decode.home_counts)
        tokens = b * (growing + as_full) * shards[r] + homes * window_tokens
        by_rank.append(tokens * c_chip + n_linear * homes * state)
    return [a + c for a, c in zip(by_rank, pooled, strict=True)]


def _live_width(m: ModelSpec) -> int:
    """Values per token of the live hidden-width tensors: LIVE_HIDDEN_TENSORS, one of them the
    residual stream, which mHC makes hc_mult times wider (DeepSeek-V4: 4)."""
    return (LIVE_HIDDEN_TENSORS - 1) * m.hidden_size + m.residual_width


def memory_report(m: ModelSpec, lay: Layout, chip: Chip,
                  memory_headroom: float = 1.0) -> MemoryReport:
    """Memory of the fullest chip; it fits when it is at most the reserve plus
    ``memory_headroom`` of the memory after the reserve (``--memory-headroom``)."""
    b = lay.batch
    act = lay.precision.activation_bytes
    weights = weight_bytes_per_chip(m, lay)
    kv = kv_bytes_per_chip(m, lay)
    if lay.is_prefill:
        tokens = int(placement(lay.context_length, lay.cached, lay.cp).new_tokens.max())
        ffn_width = m.intermediate_size / lay.tp
        if m.moe is not None:
            # Routed slots land evenly on the pool's chips: top_k * tokens per chip on average.
            ffn_width = max(ffn_width, m.moe.num_experts_per_tok * m.moe.moe_intermediate_size)
        activations = b * tokens * (_live_width(m) + 2 * ffn_width) * act
    else:
        heads = m.num_attention_heads // lay.tp
        # The partial output per head is v_dim wide (head_dim for GQA, which need not be
        # hidden / heads; kv_lora for absorbed MLA), as in the merge messages of decode.py.
        v_dim = attention_dims(m, lay.mla_mode or "standard").v_dim
        # New tokens' hidden states, plus partial attention outputs and log-sum-exp from every
        # shard gathered for the merge.
        activations = b * (_live_width(m) * act
                           + lay.cp * heads * (v_dim * act + 4))
        if m.n_layers_of_type(INDEXED_ATTENTION) and m.dsa is not None:
            # DSA (one layer at a time): every query's FP32 scores over the chip's shard, kept
            # until the selection's boundary arrives, and on a home the Nd candidate lists
            # (mapping/decode_dsa.py).
            shard = decode_shard_tokens(lay.context_length, lay.cp)[0]
            select = lay.cp > 1 and lay.context_length > m.dsa.index_topk
            cands = lay.cp * min(m.dsa.index_topk, shard) if select else 0
            activations += b * (shard * INDEXER_SCORE_BYTES + cands * TOPK_ENTRY_BYTES)
        activations += compressed_decode_scores(m, lay)
    reserved = chip.reserved_memory_bytes
    total = int(weights + kv + activations + reserved)
    report = MemoryReport(
        per_chip_bytes=total,
        capacity_bytes=chip.memory_bytes,
        fits=True,
        weights_bytes=int(weights),
        kv_bytes=int(kv),
        activation_bytes=int(activations),
        reserved_bytes=reserved,
        memory_headroom=memory_headroom,
    )
    return replace(report, fits=total <= report.usable_bytes)
