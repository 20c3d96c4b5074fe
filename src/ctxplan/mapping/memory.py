"""Per-chip memory of a layout: weight shard + KV shard + activations (the reserve is the chip's).

Computed for the fullest chip of the pool (the answer to "does it fit" is about the worst chip).
No simulation is needed, which is what lets the solver prune by capacity before simulating.
See docs/mapping.md ("Memory") for each term and its reasoning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ctxplan.mapping import kinds
from ctxplan.mapping.layout import Layout
from ctxplan.mapping.placement import placement
from ctxplan.model.attention import attention_dims
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
from ctxplan.model.spec import ModelSpec

# Activation tensors of width hidden_size live at once per token in a layer's forward pass:
# residual stream, normed input, attention output, FFN input/output. An estimate (inference
# frees each layer's activations before the next), documented in docs/mapping.md.
LIVE_HIDDEN_TENSORS = 4


@dataclass(frozen=True)
class ChipMemory:
    """What the fullest chip of a pool holds, by part (the reserve and the capacity are the
    chip's: ``ctxplan.evaluate``'s ``MemoryReport`` adds them)."""

    weights_bytes: int
    kv_bytes: int
    activations: float        # bytes (a float: an MoE's FFN width per chip need not be whole)

    @property
    def activation_bytes(self) -> int:
        return int(self.activations)

    def per_chip_bytes(self, reserved_bytes: int) -> int:
        """Everything on the chip with its reserve."""
        return int(self.weights_bytes + self.kv_bytes + self.activations + reserved_bytes)


def _tp_share(params: int, shard: str, tp: int) -> float:
    return params if shard == "replicated" else params / tp


def experts_per_chip(m: ModelSpec, n_chips: int) -> int:
    """Routed experts held per chip with EP over the pool (replicated when chips > experts)."""
    assert m.moe is not None
    return -(-m.moe.n_routed_experts // n_chips)


def layer_type_counts(m: ModelSpec, layers: range) -> dict[str, int]:
    """Layers of each attention kind among ``layers`` (a pipeline stage's), in the order of
    ``m.layer_type_counts`` (kinds absent from the range left out)."""
    if len(layers) == m.num_hidden_layers:
        return dict(m.layer_type_counts)
    got: dict[str, int] = {}
    for j in layers:
        t = m.layer_type(j)
        got[t] = got.get(t, 0) + 1
    return {t: got[t] for t in m.layer_type_counts if t in got}


def stages_of(m: ModelSpec, lay: Layout) -> list[tuple[Layout, range, bool, bool]]:
    """Per pipeline stage: its layout (the stage's own, pp = 1), its layers, whether it holds
    the embedding (the first) and the LM head and MTP layers (the last). One entry when
    pp = 1."""
    ranges = lay.stage_ranges(m.num_hidden_layers)
    stage = lay.stage_layout()
    return [(stage, r, s == 0, s == len(ranges) - 1) for s, r in enumerate(ranges)]


def weight_bytes_per_chip(m: ModelSpec, lay: Layout) -> int:
    """Weights on the fullest chip (:func:`weight_bytes_by_stage`)."""
    return max(weight_bytes_by_stage(m, lay))


def weight_bytes_by_stage(m: ModelSpec, lay: Layout) -> list[int]:
    """Weights on one chip of each pipeline stage (one entry when pp = 1): attention and dense
    FFN TP-sharded and replicated over CP ranks; routed experts spread over the stage's chips;
    shared experts and routers replicated; embedding (first stage) and LM head (last stage)
    vocab-sharded over TP (BF16, as shipped even in FP8 checkpoints)."""
    return [_stage_weights(m, st, layers, embed, head)
            for st, layers, embed, head in stages_of(m, lay)]


def _stage_weights(m: ModelSpec, lay: Layout, layers: range, embed: bool, head: bool) -> int:
    p = lay.precision
    tp = lay.tp
    total = 0.0
    for layer_type, n in layer_type_counts(m, layers).items():
        attn = sum(_tp_share(x.params, x.shard, tp) for x in attention_linears(m, layer_type))
        total += n * attn * bytes_per_param(p.attention_weights)
    ffn_b = bytes_per_param(p.ffn_weights)
    moe_here = sum(1 for j in layers if m.is_moe_layer(j))
    dense_here = len(layers) - moe_here
    total += dense_here * sum(x.params / tp for x in dense_ffn_linears(m)) * ffn_b
    # The MTP layers a model carries (DeepSeek-V4) are loaded like decoder layers of their kind
    # with a MoE FFN, plus eh_proj (docs/model.md, "DeepSeek-V4"), after the last layer.
    mtp = list(m.mtp_layer_types) if head else []
    for layer_type in mtp:
        attn = sum(_tp_share(x.params, x.shard, tp)
                   for x in [*attention_linears(m, layer_type), *mtp_extra_linears(m)])
        total += attn * bytes_per_param(p.attention_weights)
    if m.moe is not None:
        expert = sum(x.params for x in expert_linears(m))
        shared = sum(x.params for x in shared_expert_linears(m))
        if lay.policy.moe_parallel == "tp":
            # every expert, shared and routed, split over the stage's chips
            per_layer = (m.moe.n_routed_experts * expert + shared) / lay.stage_chips
        else:
            per_layer = experts_per_chip(m, lay.stage_chips) * expert + shared
        moe_layers = moe_here + len(mtp)
        hashed = sum(1 for j in layers if m.is_moe_layer(j) and j < m.num_hash_layers)
        gated = moe_layers - hashed   # hash-routed layers have no router
        total += moe_layers * per_layer * ffn_b + gated * router_linear(m).params * 2
    total += ((embedding_params(m) if embed else 0) + (lm_head_params(m) if head else 0)) \
        / tp * 2
    return int(total)


def kv_bytes_per_chip(m: ModelSpec, lay: Layout) -> int:
    """KV and linear-attention state on the fullest chip (:func:`kv_bytes_by_rank`; of every
    stage's layers with pipeline stages)."""
    return max(max(kv_bytes_by_rank(m, st, layer_type_counts(m, r)))
               for st, r, _, _ in stages_of(m, lay))


def kv_bytes_by_rank(m: ModelSpec, lay: Layout,
                     counts: Mapping[str, int] | None = None) -> list[int]:
    """KV and linear-attention state on each TP chip of each CP rank, summed over the layers
    of each kind (the TP chips of a rank hold equal shares): each kind's ``prefill_kv`` /
    ``decode_kv`` (:mod:`ctxplan.mapping.kinds`). Full and DSA layers keep every token a rank
    holds (in prefill its cached and new chunks, :mod:`ctxplan.mapping.placement`); windows and
    states live where that kind's module says. Prefill also holds, for the one layer being
    computed, the largest transient of its kinds. See docs/mapping.md ("Memory"). ``counts``:
    the layers of each kind summed over (default: the model's; a pipeline stage's)."""
    counts = m.layer_type_counts if counts is None else counts
    if lay.dp > 1:   # DP attention: each DP rank's CP group holds its own sequences' KV
        return [x for g in lay.dp_groups() for x in kv_bytes_by_rank(m, g, counts)]
    if lay.is_prefill:
        pl = placement(lay.context_length, lay.cached, lay.cp)
        parts = [kinds.kind_of(t).prefill_kv(m, lay, t, n, pl) for t, n in counts.items()]
        return [sum(p.held[i] for p in parts) + max(p.transient[i] for p in parts)
                for i in range(lay.cp)]
    by_kind = [kinds.kind_of(t).decode_kv(m, lay, t, n) for t, n in counts.items()]
    return [sum(col) for col in zip(*by_kind, strict=True)]


def live_width(m: ModelSpec) -> int:
    """Values per token of the live hidden-width tensors: LIVE_HIDDEN_TENSORS, one of them the
    residual stream, which mHC makes hc_mult times wider (DeepSeek-V4: 4)."""
    return (LIVE_HIDDEN_TENSORS - 1) * m.hidden_size + m.residual_width


def moe_tp_activations(m: ModelSpec, lay: Layout) -> float:
    """With ``moe_parallel = tp``, a MoE layer's buffers on every chip: the pool's hidden states
    gathered (the padded all-gather) and their partial sums before the reduce-scatter, and every
    routed slot's gate and up activations on the chip's 1 / n of the columns."""
    if m.moe is None or lay.policy.moe_parallel != "tp":
        return 0.0
    n, act = lay.n_chips, lay.precision.activation_bytes
    lay = lay.dp_groups()[0]   # (DP attention: the largest DP rank's sequences per home)
    if lay.is_prefill:
        per_rank = lay.batch * int(placement(lay.context_length, lay.cached,
                                             lay.cp).new_tokens.max())
    else:
        per_rank = -(-lay.batch // lay.cp)            # the most sequences a home holds
    total = n * -(-per_rank // lay.tp)                # every chip's share padded to the largest
    slots = total * m.moe.num_experts_per_tok
    return (2.0 * total * m.hidden_size + 2.0 * slots * m.moe.moe_intermediate_size / n) * act


def chip_memory_bound(m: ModelSpec, lay: Layout) -> ChipMemory:
    """The capacity wall's lower bound on the fullest chip: weights and the KV kept at the
    phase's end, no transient (the simulated peak, mapping/buffers.py, is never below it:
    tests/mapping/test_buffers.py); with pipeline stages, of the stage where they are
    largest."""
    parts = [ChipMemory(w, max(kv_held_by_rank(m, st, layer_type_counts(m, r))), 0.0)
             for w, (st, r, _, _) in zip(weight_bytes_by_stage(m, lay), stages_of(m, lay),
                                         strict=True)]
    return max(parts, key=lambda c: c.weights_bytes + c.kv_bytes)


def weights_by_chip(m: ModelSpec, lay: Layout) -> list[int]:
    """Weight bytes on each chip of the pool (its stage's)."""
    return [w for w in weight_bytes_by_stage(m, lay) for _ in range(lay.stage_chips)]


def chip_memory(m: ModelSpec, lay: Layout) -> ChipMemory:
    """Weights, KV and activations of the fullest chip by closed forms: the cross-check of the
    simulated peak (docs/mapping.md, "Memory"), not the answer. With pipeline stages: the
    fullest stage's, each stage's activations those of its micro-batch (decode) or of the
    whole phase (prefill)."""
    if lay.pp > 1:
        parts = []
        for w, (st, r, _, _) in zip(weight_bytes_by_stage(m, lay), stages_of(m, lay),
                                    strict=True):
            one = chip_memory(m, st)
            kv = max(kv_bytes_by_rank(m, st, layer_type_counts(m, r)))
            parts.append(ChipMemory(w, kv, one.activations))
        return max(parts, key=lambda c: c.per_chip_bytes(0))
    b = lay.dp_groups()[0].batch   # (DP attention: the largest DP rank's sequences)
    act = lay.precision.activation_bytes
    weights = weight_bytes_per_chip(m, lay)
    kv = kv_bytes_per_chip(m, lay)
    if lay.is_prefill:
        tokens = int(placement(lay.context_length, lay.cached, lay.cp).new_tokens.max())
        ffn_width = m.intermediate_size / lay.tp
        if m.moe is not None:
            # Routed slots land evenly on the pool's chips: top_k * tokens per chip on average.
            ffn_width = max(ffn_width, m.moe.num_experts_per_tok * m.moe.moe_intermediate_size)
        activations = b * tokens * (live_width(m) + 2 * ffn_width) * act
        activations += moe_tp_activations(m, lay)
    else:
        activations = decode_layer_activations(m, lay) + moe_tp_activations(m, lay)
    return ChipMemory(weights, kv, activations)


def decode_layer_activations(m: ModelSpec, lay: Layout) -> float:
    """Decode: what a layer keeps live on a chip besides the FFN's buffers: the new tokens'
    hidden states, the partial attention outputs and log-sum-exp from every shard gathered for
    the merge, and what a kind keeps of its own (DSA: scores and candidate lists)."""
    lay = lay.dp_groups()[0]   # DP attention: the largest DP rank's sequences
    act = lay.precision.activation_bytes
    heads = m.num_attention_heads // lay.tp
    # The partial output per head is v_dim wide (head_dim for GQA, which need not be
    # hidden / heads; kv_lora for absorbed MLA), as in the merge messages of decode.py.
    v_dim = attention_dims(m, lay.mla_mode or "standard").v_dim
    activations = lay.batch * (live_width(m) * act + lay.cp * heads * (v_dim * act + 4))
    return activations + sum(kinds.kind_of(t).decode_activations(m, lay)
                             for t in m.layer_type_counts)


def kv_held_by_rank(m: ModelSpec, lay: Layout,
                    counts: Mapping[str, int] | None = None) -> list[int]:
    """Per CP rank (on each TP chip): the KV its layers keep at the phase's end, without any
    transient: the capacity wall's part, a lower bound on the simulated peak (``counts``: as
    :func:`kv_bytes_by_rank`'s)."""
    counts = m.layer_type_counts if counts is None else counts
    if not lay.is_prefill:
        return kv_bytes_by_rank(m, lay, counts)   # (DP attention included)
    if lay.dp > 1:
        return [x for g in lay.dp_groups() for x in kv_held_by_rank(m, g, counts)]
    from ctxplan.mapping.chunking import chunk_layouts  # (chunking imports layout only)
    last = chunk_layouts(lay)[-1]
    pl = placement(last.context_length, last.cached, last.cp)
    parts = [kinds.kind_of(t).prefill_kv(m, last, t, n, pl) for t, n in counts.items()]
    return [sum(p.held[i] for p in parts) for i in range(lay.cp)]
