"""A matmul's bytes come from its weights' storage dtype and its peak from their matmul dtype
(ctxplan.mapping.ops, Precision.on_chip; docs/model.md, "Weight dtypes")."""

from __future__ import annotations

import pytest

from ctxplan.mapping import ops
from ctxplan.mapping.layout import Layout
from ctxplan.model.linear import Linear
from ctxplan.model.precision import Precision

HOPPER = ("bf16", "fp8")
BLACKWELL_FP4 = ("bf16", "fp8", "fp4")
W = [Linear("up", 4096, 8192, "col")]


def _layout(ffn: str, peaks: tuple[str, ...]) -> Layout:
    p = Precision(attention_weights="bf16", ffn_weights=ffn).on_chip(peaks)
    return Layout("prefill", 1, 1, 1, 1024, 2048, "", p)


@pytest.mark.parametrize(("storage", "peaks", "matmul", "bytes_per_weight"), [
    ("mxfp4", HOPPER, "bf16", 4.25 / 8),          # dequantised in the kernel: W4A16
    ("mxfp4", BLACKWELL_FP4, "fp4", 4.25 / 8),
    ("fp8-block128", HOPPER, "fp8", 1 + 4 / 16384),
    ("int4", HOPPER, "bf16", 0.5),
    ("fp8", HOPPER, "fp8", 1.0),
    ("bf16", HOPPER, "bf16", 2.0),
])
def test_linear_work_reads_storage_and_runs_at_the_matmul_dtype(
        storage: str, peaks: tuple[str, ...], matmul: str, bytes_per_weight: float) -> None:
    lay = _layout(storage, peaks)
    tokens = 16
    w = ops.linear_work(W, tokens, lay, storage)
    params = 4096 * 8192
    assert w.dtype == matmul
    assert w.flops == 2 * params * tokens
    assert w.mem_bytes == pytest.approx(params * bytes_per_weight + tokens * (4096 + 8192) * 2)


def test_inputs_are_quantised_only_for_a_narrower_matmul() -> None:
    tokens = 16
    # FP8 GEMMs read the input in BF16 and write it in FP8
    fp8 = ops.quantise_work(W, tokens, _layout("fp8-block128", HOPPER), "fp8-block128")
    assert fp8 is not None and fp8.mem_bytes == tokens * 4096 * (2 + 1)
    # MXFP4 weights dequantised to BF16 leave the activations alone; on FP4 they are quantised
    assert ops.quantise_work(W, tokens, _layout("mxfp4", HOPPER), "mxfp4") is None
    fp4 = ops.quantise_work(W, tokens, _layout("mxfp4", BLACKWELL_FP4), "mxfp4")
    assert fp4 is not None and fp4.mem_bytes == tokens * 4096 * (2 + 4.25 / 8)


def test_on_chip_leaves_out_what_the_chip_cannot_run() -> None:
    p = Precision(attention_weights="fp32", ffn_weights="mxfp4").on_chip(HOPPER)
    assert dict(p.matmul_dtypes) == {"bf16": "bf16", "mxfp4": "bf16"}  # fp32: no peak
