"""Op kinds, and the roofline work of the compute ops both phases share.

Op kinds are plain strings recorded per task (see GraphBuilder). The CP communication kinds of
the two phases are disjoint on purpose: prefill emits pass-KV, decode emits pass-Q and the merge
of partial attention, and nothing else produces either.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ctxplan.mapping.builder import Work
from ctxplan.mapping.layout import Layout
from ctxplan.model.dtypes import matmul_input_bytes
from ctxplan.model.linear import Linear
from ctxplan.model.params import bytes_per_param
from ctxplan.model.spec import ModelSpec

# -- CP communication (the pattern each phase is judged on) ----------------------------------
PASS_KV_SEND = "passkv_send"      # prefill: a KV block moving one hop around the ring (full
                                  # attention; DSA's carries the indexer keys too)
PREFILL_Q_SEND = "prefill_q_send"  # prefill pass-Q: a block of new queries, one hop
PREFILL_OUT_SEND = "prefill_out_send"  # prefill pass-Q: partial outputs + LSE going home
HALO_SEND = "halo_send"           # prefill, windowed kinds / conv1d: keys before a chunk
STATE_SEND = "state_send"         # prefill, linear attention: the state, chunk to chunk
PASS_Q_SEND = "passq_send"        # decode: a query sent from its home rank to a KV shard
MERGE_SEND = "merge_send"         # decode: a partial output + LSE sent back for the merge
DSA_CAND_SEND = "dsa_cand_send"   # decode, DSA: a shard's local top-k candidates to the home
DSA_SELECT_SEND = "dsa_select_send"  # decode, DSA: the home's selection boundary to a shard
ENTRY_GATHER = "entry_gather"     # prefill, DeepSeek-V4 (all-gather): a rank's compressed
                                  # entries to every other rank (one ring all-gather step)
PREFILL_CP_KINDS = (PASS_KV_SEND, PREFILL_Q_SEND, PREFILL_OUT_SEND, HALO_SEND, STATE_SEND,
                    ENTRY_GATHER)
DECODE_CP_KINDS = (PASS_Q_SEND, MERGE_SEND, DSA_CAND_SEND, DSA_SELECT_SEND)

# -- compute ---------------------------------------------------------------------------------
QKV_PROJ = "qkv_proj"             # prefill: q / kv projections of the rank's local tokens
PASS_KV_ATTN = "passkv_attn"      # prefill: local queries against one ring block
PREFILL_Q_ATTN = "prefill_q_attn"  # prefill pass-Q: one ring block of queries, local KV
PREFILL_MERGE = "prefill_merge"   # prefill pass-Q: merge of a rank's partial outputs
WINDOW_ATTN = "window_attn"       # prefill, windowed kinds: local keys (step 0), halo (step 1)
DSA_INDEX = "dsa_index"           # DSA: indexer scores against a ring block / a decode shard
DSA_ATTN = "dsa_attn"             # DSA: sparse MLA attention over the selected tokens (prefill:
                                  # with the last block's scores and the top-k)
DSA_SELECT = "dsa_select"         # decode, DSA: the home merges the shards' candidate lists
COMPRESS = "compress"             # DeepSeek-V4: pooling the compressors' rows into entries
CSA_INDEX = "csa_index"           # DeepSeek-V4 CSA: the lightning indexer over the entries
                                  # (and, after the last block, the top-k selection)
CSA_ATTN = "csa_attn"             # CSA: attention over the window and the selected entries
HCA_ATTN = "hca_attn"             # HCA: attention over the window and every visible entry
GDN_CHUNK = "gdn_chunk"           # linear attention: conv1d + chunkwise pass of local tokens
GDN_STATE = "gdn_state"           # linear attention: S_out = A S_in + B of one chunk
GDN_CORRECT = "gdn_correct"       # linear attention: outputs += Q' S_in
GDN_STEP = "gdn_step"             # linear attention, decode: one recurrent step on the home
Q_PROJ = "q_proj"                 # decode: projections of the new token(s) on the home rank
PARTIAL_ATTN = "partial_attn"     # decode: the new queries against the local KV shard
ATTN_MERGE = "attn_merge"         # decode: merge of the partial outputs by their LSE
O_PROJ = "o_proj"
FFN = "ffn"
ROUTER_SHARED = "router_shared"   # MoE gate + shared experts
EXPERTS = "experts"
LM_HEAD = "lm_head"
MTP_PROJ = "mtp_proj"             # decode with speculation: an MTP layer's eh_proj and norms

# -- other communication ---------------------------------------------------------------------
TP_ALLREDUCE = "tp_allreduce"
TP_REDUCESCATTER = "tp_reducescatter"
TP_ALLGATHER = "tp_allgather"
MOE_DISPATCH = "moe_dispatch"
MOE_COMBINE = "moe_combine"
# "attention CP, MoE TP" (``moe_parallel = tp``): the hidden states all-gathered over the pool
# before a tensor-parallel MoE, its partial sums reduce-scattered after
MOE_ALLGATHER = "moe_allgather"
MOE_REDUCESCATTER = "moe_reducescatter"

# Pipeline parallelism (mapping/pipeline.py): each TP chip's share of the activations to the
# same chip of the next stage, then the all-gather of the shares inside its TP group
PP_SEND = "pp_send"
PP_ALLGATHER = "pp_allgather"
PP_KINDS = (PP_SEND, PP_ALLGATHER)

COMM_KINDS = frozenset({*PREFILL_CP_KINDS, *DECODE_CP_KINDS, TP_ALLREDUCE, TP_REDUCESCATTER,
                        TP_ALLGATHER, MOE_DISPATCH, MOE_COMBINE, MOE_ALLGATHER,
                        MOE_REDUCESCATTER, *PP_KINDS})

# -- the fixed cost of each communication operation ------------------------------------------
# Every collective or point-to-point operation (docs/mapping.md, "Operations") pays, on each
# chip taking part, a fixed cost (launch, proxy, synchronisation) as a task of kind
# ``<transfer kind>.op`` that holds no resource; the operation's transfers wait for it on both
# ends. These tasks are not transfers (no peer, no bytes).
OP_SUFFIX = ".op"


def op_kind(kind: str) -> str:
    """The kind of the fixed-cost tasks of an operation whose transfers are of ``kind``."""
    return kind + OP_SUFFIX


def base_kind(kind: str) -> str:
    """The transfer kind an op-cost kind belongs to (other kinds unchanged)."""
    return kind[:-len(OP_SUFFIX)] if kind.endswith(OP_SUFFIX) else kind


OP_KINDS = frozenset(op_kind(k) for k in COMM_KINDS)


def linear_work(linears: Iterable[Linear], tokens: Any, lay: Layout, weight_dtype: str,
                tp: int | None = None) -> Work:
    """Matmuls of ``linears`` over ``tokens`` rows on one TP chip, as ONE kernel (a fused GEMM:
    callers pass separate lists for separate kernels, :func:`linear_kernels`).

    FLOPs: 2 * params_on_chip * tokens. Bytes: the weight shard once in its storage dtype
    ``weight_dtype`` (weights are streamed from HBM once per op, whatever the token count) plus
    the input and output activations. The peak is that of the storage dtype's matmul dtype on
    the chip (``Precision.matmul_dtype``): FP8 weights run FP8 GEMMs with activations quantised
    on the fly, as DeepSeek-V3 and Meta's row-wise FP8 do; MXFP4 weights run at FP4 where the
    chip has it, else dequantised to BF16 (docs/model.md, "Weight dtypes"). The depth (K) is the
    input width on the chip, FLOP-weighted over the fused linears.
    """
    tp = lay.tp if tp is None else tp
    act = lay.precision.activation_bytes
    wb = bytes_per_param(weight_dtype)
    flops = 0.0
    mem = 0.0
    params_sum = 0.0
    depth_sum = 0.0
    for x in linears:
        share = 1 if x.shard == "replicated" else tp
        params = x.params / share
        flops += 2.0 * params * tokens
        # A grouped column-parallel matrix (DeepSeek-V4's wo_a) splits whole groups over TP,
        # so a chip reads only its groups' slice of the input.
        split_in = x.shard == "row" or (x.shard == "col" and x.groups > 1)
        in_f = x.in_features / share if split_in else x.in_features
        out_f = x.out_features / share if x.shard == "col" else x.out_features
        mem += params * wb + tokens * (in_f + out_f) * act
        params_sum += params
        depth_sum += params * in_f
    depth = depth_sum / params_sum if params_sum else 0.0
    return Work("matmul", flops, mem, lay.precision.matmul_dtype(weight_dtype), m_rows=tokens,
                k_depth=depth)


def linear_kernels(linears: Iterable[Linear]) -> list[list[Linear]]:
    """The GEMM kernels an engine runs for ``linears``: linears reading the same input (the
    same ``in_features``) fuse into one GEMM, as vLLM and SGLang fuse q / k / v, and MLA's
    q_a_proj with kv_a_proj_with_mqa (both read the normed hidden state); the others are
    kernels of their own (q_b_proj reads q_a's normed output, kv_b_proj the latent). In the
    order of each kernel's first linear."""
    out: dict[int, list[Linear]] = {}
    for x in linears:
        out.setdefault(x.in_features, []).append(x)
    return list(out.values())


def grouped_gemm_work(groups: Any, rows: Any, in_features: float, out_features: float,
                      weight_bytes: float, act_bytes: float, dtype: str) -> Work:
    """One grouped GEMM kernel: ``groups`` GEMMs (experts) of ``rows`` rows each (per group,
    after the routing), each (rows x in) @ (in x out) with its own weights. FLOPs 2 groups rows
    in out; bytes: every group's weights once and the rows' inputs and outputs. Its tile shape
    is one group's: ``rows`` rows of depth ``in_features`` (each expert is its own piece of the
    kernel, padded to a tile on its own), and each group's weights are their own stream
    (``pieces``: each pays the stream ramp, so a small expert's weights stream more slowly)."""
    params = in_features * out_features
    slots = groups * rows
    return Work("matmul", 2.0 * params * slots,
                groups * params * weight_bytes + slots * (in_features + out_features) * act_bytes,
                dtype, m_rows=rows, k_depth=in_features, pieces=groups)


# -- elementwise (memory-bound) traffic around the matmuls -----------------------------------
# Not separate ops: each rides as a "memory" part of the compute op it precedes or follows (the
# fused op's time is the sum of its parts), so the op structure is unchanged. FLOPs are left at
# 0 (a few per element, negligible against the matmuls), so FLOP accounting is unchanged too.
# See docs/validation.md ("Elementwise traffic") for why the calibration needs them.


def rope_work(width: float, tokens: Any, lay: Layout) -> Work:
    """Rotary embedding applied in place to ``width`` query and key columns per token (read and
    write): vLLM's rotary_embedding kernel, one per layer."""
    act = lay.precision.activation_bytes
    return Work("memory", 0.0, 2.0 * tokens * width * act, "bf16")


def cache_write_work(kv_bytes_per_token: float, tokens: Any, lay: Layout) -> Work:
    """The new tokens' KV written into the cache (read from the projection's output, written
    in the cache tier's bytes; the read is counted at the same bytes): vLLM's
    reshape_and_cache, one per layer."""
    return Work("memory", 0.0, 2.0 * tokens * kv_bytes_per_token, "bf16")


def topk_work(experts: int, tokens: Any) -> Work:
    """The router's top-k over its logits: read the FP32 logits, write the chosen experts' ids
    and weights (vLLM's topk_softmax / DeepSeek's grouped top-k), one kernel."""
    return Work("memory", 0.0, tokens * experts * 4.0 + tokens * 16.0, "bf16")


def permute_work(hidden_size: int, slots: Any, tokens: Any, lay: Layout) -> Work:
    """Tokens gathered into expert order for the grouped GEMMs (moe_align_block_size and the
    gather): read each token's row once per slot it fills, write the slots."""
    act = lay.precision.activation_bytes
    return Work("memory", 0.0, (tokens + slots) * hidden_size * act, "bf16")


def unpermute_work(hidden_size: int, slots: Any, tokens: Any, lay: Layout) -> Work:
    """The experts' outputs summed back per token with the router's weights (moe_sum /
    finalize): read the slots, write the tokens."""
    act = lay.precision.activation_bytes
    return Work("memory", 0.0, (slots + tokens) * hidden_size * act, "bf16")


def norm_work(hidden_size: int, tokens: Any, lay: Layout, passes: int = 4) -> Work:
    """A fused residual add + RMSNorm over the full hidden width of ``tokens`` tokens.

    Tensor parallelism without sequence parallelism replicates it on every chip of the group.
    Reads the residual and the block output, writes the new residual and the normed input:
    4 * hidden * activation bytes per token. Two per layer (before attention, before the FFN).
    ``passes = 2``: a plain RMSNorm (read, write), as MLA's latent norms.
    """
    act = lay.precision.activation_bytes
    return Work("memory", 0.0, float(passes) * tokens * hidden_size * act, "bf16")


def residual_work(m: ModelSpec, tokens: Any, lay: Layout) -> Work:
    """What a sublayer does to the residual stream before it: :func:`norm_work`, or with
    DeepSeek-V4's mHC (``hc_mult`` n > 1) the hyper-connection's traffic around the sublayer.

    mHC (DeepSeek-V4; sglang / vLLM ``deepseek_v4.py``, ``hc_pre`` / ``hc_post``): the stream is
    n copies of the hidden state. Before the sublayer the n-wide stream is read, projected to its
    (2 + n) n mixing weights (a 20-iteration Sinkhorn on the n x n part, negligible) and mixed
    into the sublayer's normed input (written, h wide); after it the stream and the sublayer's
    output are read and the new stream written. Per token: n h + h (before), n h + h + n h
    (after) values, 14 h for n = 4 against the 4 h of a residual add and norm. Both halves are
    charged here, before the sublayer (the op that follows one sublayer precedes the next), in
    the activations' dtype. FLOPs: the mixing projection, 2 n h (2 + n) n per token, and the
    two mixes, 2 n h + 2 n^2 h."""
    n = m.hc_mult
    h = m.hidden_size
    if n == 1:
        return norm_work(h, tokens, lay)
    act = lay.precision.activation_bytes
    flops = 2.0 * n * h * (2 + n) * n + 2.0 * n * h + 2.0 * n * n * h
    return Work("memory", flops * tokens, (3.0 * n + 2.0) * h * tokens * act, "bf16")


def swiglu_work(ffn_width: float, tokens: Any, lay: Layout) -> Work:
    """silu(gate) * up on one chip's ``ffn_width`` columns: reads gate and up, writes the
    product, 3 * width * activation bytes per token (the matmuls count their own in/out)."""
    act = lay.precision.activation_bytes
    return Work("memory", 0.0, 3.0 * tokens * ffn_width * act, "bf16")


def quantise_inputs_work(width: float, tokens: Any, lay: Layout,
                         weight_dtype: str) -> Work | None:
    """:func:`quantise_work` for an input ``width`` wide (a grouped GEMM's, a dispatch's)."""
    act = lay.precision.activation_bytes
    wb = matmul_input_bytes(lay.precision.matmul_dtype(weight_dtype))
    if wb >= act:
        return None
    return Work("memory", 0.0, tokens * width * (act + wb), "bf16")


def quantise_work(linears: Iterable[Linear], tokens: Any, lay: Layout, weight_dtype: str,
                  tp: int | None = None) -> Work | None:
    """Row-wise dynamic quantisation of the inputs of ``linears`` to the matmul dtype of
    ``weight_dtype``, when it is narrower than the activations (FP8 row-wise GEMMs, Meta
    arXiv:2411.01783 and FBGEMM's f8f8bf16_rowwise): each input row is read in BF16 and written
    in the matmul dtype. None when no quantisation happens (BF16 matmuls, weight-only formats
    such as MXFP4 dequantised to BF16)."""
    tp = lay.tp if tp is None else tp
    width = 0.0
    for x in linears:
        share = 1 if x.shard == "replicated" else tp
        width += x.in_features / share if x.shard == "row" else x.in_features
    return quantise_inputs_work(width, tokens, lay, weight_dtype)
