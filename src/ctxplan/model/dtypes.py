"""Weight dtypes: what memory holds (storage) apart from what the matmul computes at (compute).

A weight's *storage dtype* decides the bytes it occupies and the bytes a matmul reads; its
*matmul dtype* decides which peak FLOP/s of the chip the matmul runs at. They coincide for the
plain formats (BF16 weights run BF16 matmuls) and differ for the packed ones:

- ``mxfp4`` (OCP Microscaling v1.0: 32 FP4 E2M1 values share one 8-bit E8M0 scale, so
  4 + 8 / 32 = 4.25 bits per parameter; gpt-oss ships its MoE experts so, model card
  arXiv:2508.10925): FP4 matmuls where the chip lists an FP4 peak, else the weights are
  dequantised in the kernel and the matmul runs at BF16 (weight-only W4A16, what vLLM's Marlin /
  triton ``matmul_ogs`` MXFP4 MoE kernels do on Hopper, which has no FP4 tensor cores).
  Caveat: the FP4 peak assumes both operands in FP4; a kernel keeping activations in FP8
  (Blackwell ``tcgen05.mma kind::f8f6f4``) runs at the FP8 rate instead.
- ``nvfp4`` (NVIDIA's NVFP4: 16 FP4 E2M1 values share one FP8 E4M3 scale, plus one FP32 scale
  per tensor, so 4 + 8 / 16 = 4.5 bits per parameter; TensorRT Model Optimizer's FP4
  checkpoints): as ``mxfp4``, FP4 matmuls where the chip lists an FP4 peak (Blackwell), else
  weight-only at BF16 (vLLM's FP4 Marlin kernels on Hopper).
- ``int4`` (GPTQ / AWQ, two values per byte, group scales not counted): no chip here lists an
  INT4 peak and these checkpoints are served weight-only (Marlin W4A16), so BF16.
- ``fp8-block128`` (DeepSeek-V3 / V3.2, Kimi K2: FP8 E4M3 with one FP32 scale per 128 x 128
  block, ``quantization_config.weight_block_size``): 1 + 4 / 16384 bytes per parameter, FP8
  matmuls (every chip file lists an FP8 peak).
- ``fp16``: the FP16 peak, else BF16 (equal rates on every GPU we know; chip files often list
  only BF16).

Sources for the packed formats: OCP Microscaling Formats (MX) v1.0 specification (2023); NVIDIA,
"Introducing NVFP4 for efficient and accurate low-precision inference" (developer blog, 2025);
DeepSeek-V3 config.json ``quantization_config``; vLLM ``mxfp4`` / ``marlin`` quantization code.
"""

from __future__ import annotations

from collections.abc import Collection

MXFP4_BITS_PER_PARAM = 4 + 8 / 32  # E2M1 values + one E8M0 scale per 32 (OCP MX v1.0)
NVFP4_BITS_PER_PARAM = 4 + 8 / 16  # E2M1 values + one E4M3 scale per 16 (NVIDIA NVFP4)
FP8_BLOCK = 128  # DeepSeek's weight_block_size [128, 128]

# Bytes per stored weight element.
_BYTES_PER_PARAM: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "fp8-block128": 1.0 + 4.0 / (FP8_BLOCK * FP8_BLOCK),
    "int8": 1.0,
    "int4": 0.5,
    "mxfp4": MXFP4_BITS_PER_PARAM / 8,
    "nvfp4": NVFP4_BITS_PER_PARAM / 8,
}
WEIGHT_DTYPES = tuple(_BYTES_PER_PARAM)

# Storage dtype -> matmul dtypes in order of preference; the first the chip has a peak for wins.
_MATMUL_DTYPES: dict[str, tuple[str, ...]] = {
    "fp32": ("fp32",),
    "bf16": ("bf16",),
    "fp16": ("fp16", "bf16"),
    "fp8": ("fp8",),
    "fp8-block128": ("fp8",),
    "int8": ("int8",),
    "int4": ("bf16",),
    "mxfp4": ("fp4", "bf16"),
    "nvfp4": ("fp4", "bf16"),
}

# Bytes per element of a matmul's activation operand in each matmul dtype: what a quantisation
# of the inputs writes (FP4 as MXFP4, with its E8M0 scale per 32 values; OCP MX v1.0).
_MATMUL_INPUT_BYTES: dict[str, float] = {
    "fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0,
    "fp4": MXFP4_BITS_PER_PARAM / 8,
}

# Bytes per value of activations-like tensors (recurrent states, caches) by dtype name.
_BYTES_PER_VALUE: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


def bytes_per_param(dtype: str) -> float:
    """Storage bytes of one weight element of ``dtype`` (bf16 2, fp8 1, mxfp4 0.53125, ...)."""
    try:
        return _BYTES_PER_PARAM[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(WEIGHT_DTYPES)}") from None


def matmul_dtype_preference(storage_dtype: str) -> tuple[str, ...]:
    """The matmul dtypes a weight stored in ``storage_dtype`` can run at, best first."""
    try:
        return _MATMUL_DTYPES[storage_dtype]
    except KeyError:
        raise ValueError(
            f"unknown dtype {storage_dtype!r}; known: {', '.join(WEIGHT_DTYPES)}"
        ) from None


def matmul_dtype(storage_dtype: str, chip_peaks: Collection[str]) -> str | None:
    """The dtype whose peak a matmul on weights stored in ``storage_dtype`` runs at on a chip
    with peaks for ``chip_peaks``: the first of :func:`matmul_dtype_preference` the chip has.
    None when it has none of them (the caller names its field in the error)."""
    for dtype in matmul_dtype_preference(storage_dtype):
        if dtype in chip_peaks:
            return dtype
    return None


def matmul_input_bytes(dtype: str) -> float:
    """Bytes of one activation element fed to a matmul running at ``dtype`` (bf16 2, fp8 1,
    fp4 0.53125)."""
    try:
        return _MATMUL_INPUT_BYTES[dtype]
    except KeyError:
        known = ", ".join(_MATMUL_INPUT_BYTES)
        raise ValueError(f"unknown matmul dtype {dtype!r}; known: {known}") from None


def bytes_per_value(dtype: str) -> int:
    """Bytes of one element of a state or cache tensor kept in ``dtype`` (fp32 4, bf16 2, fp8 1)."""
    try:
        return _BYTES_PER_VALUE[dtype]
    except KeyError:
        known = ", ".join(_BYTES_PER_VALUE)
        raise ValueError(f"unknown state dtype {dtype!r}; known: {known}") from None
