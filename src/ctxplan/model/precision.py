"""The data types of what a layout's ops read and compute: weight storage dtypes per part, the
attention dtype, the activations' bytes, and each weight dtype's matmul dtype on a chip."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace

from ctxplan.model.dtypes import WEIGHT_DTYPES, matmul_dtype, matmul_dtype_preference


@dataclass(frozen=True)
class Precision:
    """Data types of what the ops read and compute.

    The weight fields are *storage* dtypes (what memory holds and a matmul reads); the peak a
    matmul runs at is :meth:`matmul_dtype` of its storage dtype, which :meth:`on_chip` resolves
    for a chip (docs/model.md, "Weight dtypes": MXFP4 at FP4 where the chip has it, else BF16).
    """

    attention_weights: str = "bf16"  # q/k/v/o projections (storage dtype)
    ffn_weights: str = "bf16"        # dense FFN, shared and routed experts (storage dtype)
    attention: str = "bf16"          # the attention core (FlashAttention-style BF16)
    activation_bytes: int = 2        # activations and messages between chips (BF16)
    # (storage, matmul) dtype pairs for a chip (on_chip); a storage dtype not listed computes
    # at its first preference (FP8 weights run FP8 GEMMs with activations quantised on the fly).
    matmul_dtypes: tuple[tuple[str, str], ...] = ()

    def matmul_dtype(self, storage: str) -> str:
        """The dtype whose peak a matmul over weights stored in ``storage`` runs at: as
        resolved by :meth:`on_chip`, else the storage dtype's first preference."""
        for stored, computed in self.matmul_dtypes:
            if stored == storage:
                return computed
        return matmul_dtype_preference(storage)[0] if storage in WEIGHT_DTYPES else storage

    def on_chip(self, chip_peaks: Collection[str]) -> Precision:
        """This precision with the matmul dtype of each weight dtype it uses (and of BF16, the
        embedding / head / router dtype) resolved for a chip with peaks for ``chip_peaks``;
        dtypes the chip cannot run are left out (``evaluate`` refuses them with their field)."""
        pairs = []
        for storage in sorted({self.attention_weights, self.ffn_weights, "bf16"}):
            if storage in WEIGHT_DTYPES:
                computed = matmul_dtype(storage, chip_peaks)
                if computed is not None:
                    pairs.append((storage, computed))
        return replace(self, matmul_dtypes=tuple(pairs))
