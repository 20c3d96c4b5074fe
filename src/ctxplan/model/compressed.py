"""DeepSeek-V4's compressed attention: what its cache holds and how many entries a query sees.

Every layer of a V4 model is one of three kinds over the same attention block
(:class:`ctxplan.model.spec.CompressedAttentionSpec`: MQA over one latent that is key and value):

- ``window_attention``: the last w = ``sliding_window`` tokens (128), uncompressed;
- ``compressed_sparse_attention`` (CSA): every r = 4 tokens are pooled into one compressed entry;
  a lightning indexer (DSA's: ``ModelSpec.dsa``) scores every complete entry and the query
  attends the top ``index_topk`` of them, plus the window;
- ``heavily_compressed_attention`` (HCA): every r = 128 tokens pooled into one entry, all of them
  attended, plus the window.

Entries: entry j pools the tokens [j r, (j + 1) r) and exists once its last token does, so a
query at position t (1-based) sees floor(t / r) entries and a sequence of S tokens keeps
floor(S / r) of them; the S mod r tokens of the entry being formed wait in the compressor's
rolling state. The window is attended whatever the entries cover (its keys are the last w tokens
uncompressed; an entry overlapping them is attended too).

KV tier of a V4 model (:mod:`ctxplan.model.kv`): c_kv is the bytes a CSA layer keeps per
compressed entry, the entry and its indexer key (716 with the FP8 indexer key, 652 with FP4);
a window or HCA entry is the entry alone, :func:`entry_bytes` (584 B in the engines' layout: 448
FP8 latent values, the 64 RoPE values in BF16 and 8 B of scales). Sources: sglang
``mem_cache/deepseek_v4_memory_pool.py`` and vLLM ``models/deepseek_v4.py`` (docs/model.md,
"DeepSeek-V4", has the figures).

The functions here count; :mod:`ctxplan.model.kinds` turns the counts into each kind's
``AttentionCost`` per phase and cache bytes, as for the other kinds.
"""

from __future__ import annotations

from ctxplan.model.spec import (
    COMPRESSED_LAYER_TYPES,
    COMPRESSED_SPARSE_ATTENTION,
    HEAVILY_COMPRESSED_ATTENTION,
    CompressedAttentionSpec,
    ModelSpec,
)

# The engines' cache entry: the latent's non-RoPE values in FP8 E4M3, its RoPE values in BF16,
# and 8 B of UE8M0 scales (sglang's DeepSeek-V4 pool: 584 B for a 512-wide latent with 64 RoPE
# values).
ENTRY_LATENT_BYTES_PER_VALUE = 1
ENTRY_ROPE_BYTES_PER_VALUE = 2
ENTRY_SCALE_BYTES = 8
# The indexer's key per compressed entry: index_head_dim values and one FP32 scale, in FP8
# (132 B for 128 values, the engines' default) or FP4 (two values a byte: 68 B).
INDEXER_SCALE_BYTES = 4
INDEXER_KEY_FORMATS = {"fp8": 1.0, "fp4": 0.5}   # bytes per value
# The compressor's rolling state (DeepSeek's reference implementation, ``Compressor``): the
# projected KV and the gate scores of the tokens not pooled yet, in FP32. CSA's compressor pools
# overlapping windows: each entry reads 2 r tokens, each token's projection is 2 d wide
# (COMPRESSOR_OVERLAP), so its state is 2 r rows of 2 d; HCA's is r rows of d.
STATE_BYTES_PER_VALUE = 4
COMPRESSOR_OVERLAP = {COMPRESSED_SPARSE_ATTENTION: 2, HEAVILY_COMPRESSED_ATTENTION: 1}


def _spec(m: ModelSpec) -> CompressedAttentionSpec:
    spec = m.compressed_attention
    if spec is None:
        raise ValueError(f"model {m.name} has no compressed attention")
    return spec


def _check_kind(layer_type: str) -> None:
    if layer_type not in COMPRESSED_LAYER_TYPES:
        raise ValueError(f"{layer_type!r} is not a compressed-attention kind; known: "
                         f"{COMPRESSED_LAYER_TYPES}")


def compress_ratio(m: ModelSpec, layer_type: str) -> int:
    """Tokens pooled into one entry by a ``layer_type`` layer: 0 for the window-only kind."""
    _check_kind(layer_type)
    spec = _spec(m)
    if layer_type == COMPRESSED_SPARSE_ATTENTION:
        return spec.csa_compress_ratio
    if layer_type == HEAVILY_COMPRESSED_ATTENTION:
        return spec.hca_compress_ratio
    return 0


def window(m: ModelSpec) -> int:
    """The uncompressed window every V4 layer keeps and attends (``sliding_window``)."""
    assert m.sliding_window is not None  # ModelSpec checks it
    return m.sliding_window


def window_tokens(m: ModelSpec, context: int) -> int:
    """Tokens of the window of a sequence of ``context`` tokens: min(S, w)."""
    return min(context, window(m))


def compressed_entries(m: ModelSpec, layer_type: str, context: int) -> int:
    """Complete entries a sequence of ``context`` tokens keeps: floor(S / r) (0: window only)."""
    r = compress_ratio(m, layer_type)
    return context // r if r else 0


def attended_entries(m: ModelSpec, layer_type: str, context: int) -> int:
    """Entries the query of a decode step at context S attends: all floor(S / r) (HCA), the top
    index_topk of them (CSA), none (window only)."""
    n = compressed_entries(m, layer_type, context)
    if layer_type == COMPRESSED_SPARSE_ATTENTION:
        assert m.dsa is not None
        return min(n, m.dsa.index_topk)
    return n


# -- (query, entry) pairs ------------------------------------------------------------------


def _floor_prefix(n: int, r: int) -> int:
    """sum over t = 1..n of floor(t / r): q = n // r full steps of r positions each."""
    q, rest = divmod(n, r)
    return r * q * (q - 1) // 2 + q * (rest + 1)


def _entry_prefix(n: int, r: int, cap: int | None) -> int:
    """sum over t = 1..n of min(floor(t / r), cap): the entries the first n queries see."""
    if cap is None or n < cap * r:
        return _floor_prefix(n, r)
    # from position cap * r on every query sees at least cap entries
    return _floor_prefix(cap * r - 1, r) + cap * (n - cap * r + 1)


def entry_pairs(m: ModelSpec, layer_type: str, q_tokens: int, kv_before: int = 0, *,
                capped: bool = True) -> int:
    """(query, entry) pairs of ``q_tokens`` consecutive queries after ``kv_before`` earlier
    tokens: each query at position t sees floor(t / r) entries, at most index_topk of them in
    CSA's main attention (``capped``; the indexer scores them all: ``capped=False``). Ranges
    add up: pairs(a, 0) + pairs(b, a) == pairs(a + b, 0)."""
    if q_tokens < 0 or kv_before < 0:
        raise ValueError("token counts must be >= 0")
    r = compress_ratio(m, layer_type)
    if not r:
        return 0
    cap = None
    if capped and layer_type == COMPRESSED_SPARSE_ATTENTION:
        assert m.dsa is not None
        cap = m.dsa.index_topk
    return _entry_prefix(kv_before + q_tokens, r, cap) - _entry_prefix(kv_before, r, cap)


# -- cache bytes ---------------------------------------------------------------------------


def entry_bytes(m: ModelSpec) -> int:
    """Bytes of one cached entry (a window token's or a compressed entry's latent) in the engines'
    layout: (head_dim - rope) FP8 + rope BF16 + 8 B of scales; 584 for DeepSeek-V4."""
    rope = _spec(m).qk_rope_head_dim
    return ((m.head_dim - rope) * ENTRY_LATENT_BYTES_PER_VALUE
            + rope * ENTRY_ROPE_BYTES_PER_VALUE + ENTRY_SCALE_BYTES)


def indexer_key_bytes(m: ModelSpec, key_format: str = "fp8") -> int:
    """The CSA indexer's key per compressed entry: index_head_dim values in ``key_format`` and
    one FP32 scale (132 B FP8, 68 B FP4 for DeepSeek-V4)."""
    if m.dsa is None:
        raise ValueError(f"model {m.name} has no indexer")
    try:
        per_value = INDEXER_KEY_FORMATS[key_format]
    except KeyError:
        raise ValueError(f"unknown indexer key format {key_format!r}; known: "
                         f"{', '.join(INDEXER_KEY_FORMATS)}") from None
    return int(m.dsa.index_head_dim * per_value) + INDEXER_SCALE_BYTES


def stored_entry_bytes(m: ModelSpec, layer_type: str, c_kv_bytes: int) -> int:
    """Bytes one compressed entry of a ``layer_type`` layer keeps under a tier of ``c_kv_bytes``
    (a CSA entry with its indexer key): c_kv for CSA, the entry alone for HCA."""
    _check_kind(layer_type)
    return c_kv_bytes if layer_type == COMPRESSED_SPARSE_ATTENTION else entry_bytes(m)


def tier_index_key_bytes(m: ModelSpec, c_kv_bytes: int) -> int:
    """The indexer key's bytes within a tier of ``c_kv_bytes`` per CSA entry."""
    return c_kv_bytes - entry_bytes(m)


def compressor_widths(m: ModelSpec, layer_type: str) -> list[int]:
    """The widths d of a layer's compressors: its latent's, and in CSA its indexer key's."""
    widths = [m.head_dim]
    if layer_type == COMPRESSED_SPARSE_ATTENTION:
        assert m.dsa is not None
        widths.append(m.dsa.index_head_dim)
    return widths


def compressor_state_bytes(m: ModelSpec, layer_type: str) -> int:
    """The rolling state one sequence keeps per layer (the tokens of the entries being formed):
    kv and gate scores, FP32, overlap x r rows of overlap x d values, for the layer's compressor
    and, in CSA, for its indexer's (d = index_head_dim). 0 for the window-only kind."""
    r = compress_ratio(m, layer_type)
    if not r:
        return 0
    overlap = COMPRESSOR_OVERLAP[layer_type]
    return sum(2 * overlap * r * overlap * d * STATE_BYTES_PER_VALUE
               for d in compressor_widths(m, layer_type))


def layer_cache_bytes(m: ModelSpec, layer_type: str, context: int, c_kv_bytes: int) -> int:
    """What one sequence of ``context`` tokens keeps in one ``layer_type`` layer: its window ring
    (min(S, w) entries), its complete compressed entries and its compressor state."""
    if context < 0:
        raise ValueError("token counts must be >= 0")
    ring = window_tokens(m, context) * entry_bytes(m)
    entries = compressed_entries(m, layer_type, context)
    return (ring + entries * stored_entry_bytes(m, layer_type, c_kv_bytes)
            + compressor_state_bytes(m, layer_type))


def growth_bytes_per_token(m: ModelSpec, layer_type: str, c_kv_bytes: int) -> float:
    """What one more token adds to a ``layer_type`` layer once past the window, on average: an
    entry every r tokens (CSA 716 / 4 = 179 B, HCA 584 / 128 = 4.5625 B for DeepSeek-V4)."""
    r = compress_ratio(m, layer_type)
    return stored_entry_bytes(m, layer_type, c_kv_bytes) / r if r else 0.0


# -- compressor work -----------------------------------------------------------------------


def compressor_flops_per_token(m: ModelSpec, layer_type: str) -> float:
    """The pooling beyond the compressor's projections (linears): each token's overlap x d
    projected values weighted by their softmaxed gate and summed into their entries,
    2 x overlap x d per token, for the layer's compressor and in CSA its indexer's."""
    if not compress_ratio(m, layer_type):
        return 0.0
    overlap = COMPRESSOR_OVERLAP[layer_type]
    return sum(2.0 * overlap * d for d in compressor_widths(m, layer_type))


def compressor_row_bytes(m: ModelSpec, layer_type: str) -> int:
    """Bytes a decode step writes into the compressor state: the new token's kv and score rows."""
    r = compress_ratio(m, layer_type)
    if not r:
        return 0
    return compressor_state_bytes(m, layer_type) // (COMPRESSOR_OVERLAP[layer_type] * r)
