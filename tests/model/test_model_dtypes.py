"""Weight storage dtypes apart from matmul dtypes (MXFP4, FP8 with block scales)."""

from __future__ import annotations

import pytest

from ctxplan.model import (
    WEIGHT_DTYPES,
    bytes_per_param,
    bytes_per_value,
    matmul_dtype,
    matmul_dtype_preference,
)

HOPPER = {"bf16", "fp8", "int8"}  # no FP4 tensor cores
BLACKWELL = {"bf16", "fp8", "fp4"}


def test_storage_bytes() -> None:
    assert bytes_per_param("mxfp4") == 4.25 / 8  # 32 E2M1 values share one E8M0 scale
    assert bytes_per_param("fp8-block128") == 1 + 4 / (128 * 128)  # FP32 scale per block
    assert (bytes_per_param("bf16"), bytes_per_param("fp8"), bytes_per_param("int4")) == (2, 1, 0.5)
    with pytest.raises(ValueError, match="unknown dtype 'fp5'"):
        bytes_per_param("fp5")


def test_mxfp4_runs_at_fp4_where_the_chip_has_it_else_bf16() -> None:
    assert matmul_dtype("mxfp4", BLACKWELL) == "fp4"
    assert matmul_dtype("mxfp4", HOPPER) == "bf16"  # not an input error: dequantised, W4A16
    assert matmul_dtype("int4", HOPPER) == "bf16"
    assert matmul_dtype("fp8-block128", HOPPER) == "fp8"
    assert matmul_dtype("fp16", {"bf16", "fp8"}) == "bf16"
    assert matmul_dtype("fp16", {"fp16", "bf16"}) == "fp16"


def test_plain_dtypes_compute_as_stored() -> None:
    for dtype in ("bf16", "fp8", "int8", "fp32"):
        assert matmul_dtype_preference(dtype) == (dtype,)
    assert matmul_dtype("fp32", HOPPER) is None  # the caller names its field in the error


def test_every_storage_dtype_has_a_matmul_dtype_on_a_chip_with_bf16_and_fp8() -> None:
    # chip files must list bf16 and fp8 (config/hardware_schema.py): everything but fp32 and
    # int8 (which keep their own peak) runs on such a chip
    for dtype in WEIGHT_DTYPES:
        found = matmul_dtype(dtype, {"bf16", "fp8"})
        assert (found is None) == (dtype in ("fp32", "int8")), dtype


def test_state_values() -> None:
    assert (bytes_per_value("fp32"), bytes_per_value("bf16"), bytes_per_value("fp8")) == (4, 2, 1)
    with pytest.raises(ValueError, match="unknown state dtype"):
        bytes_per_value("mxfp4")
