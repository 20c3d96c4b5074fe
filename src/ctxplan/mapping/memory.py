"""Per-chip memory of a layout: weight shard + KV shard + activations + reserve.

Computed for the fullest chip of the pool (the answer to "does it fit" is about the worst chip).
No simulation is needed, which is what lets the solver prune by capacity before simulating.
See docs/mapping.md ("Memory") for each term and its reasoning.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ctxplan.hardware.chip import Chip
from ctxplan.mapping.layout import (
    Layout,
    decode_shard_tokens,
    kv_bytes_per_chip_token,
    prefill_chunks,
    prefill_rank_tokens,
)
from ctxplan.model.attention import attention_dims
from ctxplan.model.linear import (
    attention_linears,
    dense_ffn_linears,
    embedding_params,
    expert_linears,
    lm_head_params,
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
class MemoryReport:
    per_chip_bytes: int     # everything on the fullest chip
    capacity_bytes: int     # the chip's memory
    fits: bool
    weights_bytes: int
    kv_bytes: int
    activation_bytes: int
    reserved_bytes: int

    def to_dict(self) -> dict[str, int | bool]:
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
    attn = sum(_tp_share(x.params, x.shard, tp) for x in attention_linears(m))
    total = m.num_hidden_layers * attn * bytes_per_param(p.attention_weights)
    ffn_b = bytes_per_param(p.ffn_weights)
    total += m.n_dense_layers * sum(x.params / tp for x in dense_ffn_linears(m)) * ffn_b
    if m.moe is not None:
        expert = sum(x.params for x in expert_linears(m))
        shared = sum(x.params for x in shared_expert_linears(m))
        per_layer = experts_per_chip(m, lay.n_chips) * expert + shared
        total += m.n_moe_layers * (per_layer * ffn_b + router_linear(m).params * 2)
    total += (embedding_params(m) + lm_head_params(m)) / tp * 2
    return int(total)


def memory_report(m: ModelSpec, lay: Layout, chip: Chip) -> MemoryReport:
    L = m.num_hidden_layers
    b = lay.batch
    act = lay.precision.activation_bytes
    c_chip = kv_bytes_per_chip_token(m, lay)
    weights = weight_bytes_per_chip(m, lay)
    if lay.is_prefill:
        tokens = max(prefill_rank_tokens(lay.context_length, lay.cp))
        block = max(prefill_chunks(lay.context_length, lay.cp)) * 2
        # The rank's own KV for every layer is kept (it is the cache handed to decode), plus
        # two ring buffers of one layer: the block being attended and the one arriving.
        kv = b * tokens * c_chip * L + 2 * b * block * c_chip
        ffn_width = m.intermediate_size / lay.tp
        if m.moe is not None:
            # Routed slots land evenly on the pool's chips: top_k * tokens per chip on average.
            ffn_width = max(ffn_width, m.moe.num_experts_per_tok * m.moe.moe_intermediate_size)
        activations = b * tokens * (LIVE_HIDDEN_TENSORS * m.hidden_size + 2 * ffn_width) * act
    else:
        shard = max(decode_shard_tokens(lay.context_length, lay.cp))
        kv = b * shard * c_chip * L
        heads = m.num_attention_heads // lay.tp
        # The partial output per head is v_dim wide (head_dim for GQA, which need not be
        # hidden / heads; kv_lora for absorbed MLA), as in the merge messages of decode.py.
        v_dim = attention_dims(m, lay.mla_mode or "standard").v_dim
        # New tokens' hidden states, plus partial attention outputs and log-sum-exp from every
        # shard gathered for the merge.
        activations = b * (LIVE_HIDDEN_TENSORS * m.hidden_size * act
                           + lay.cp * heads * (v_dim * act + 4))
    reserved = chip.reserved_memory_bytes
    total = int(weights + kv + activations + reserved)
    return MemoryReport(
        per_chip_bytes=total,
        capacity_bytes=chip.memory_bytes,
        fits=total <= chip.memory_bytes,
        weights_bytes=int(weights),
        kv_bytes=int(kv),
        activation_bytes=int(activations),
        reserved_bytes=reserved,
    )
