"""Latency SLAs and how a simulated latency is judged against them.

TPS_min = 1 / tpot_max_s (20 ms -> 50 tokens/s). Two readings of "tokens per second":
  per-seq   (default)  TPS_per_seq   = 1 / TPOT >= TPS_min  <=>  TPOT <= tpot_max_s
  per-batch            TPS_per_batch = b / TPOT >= TPS_min  <=>  TPOT <= b * tpot_max_s
TTFT is optional: with none, every prefill point meets it and prefill reduces to its capacity wall.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxplan.errors import UserInputError

TPS_READINGS = ("per-seq", "per-batch")
DEFAULT_TPOT_MAX_S = 0.020  # the spec's default: 50 tokens/s per sequence


@dataclass(frozen=True)
class SLA:
    tpot_max_s: float = DEFAULT_TPOT_MAX_S
    ttft_max_s: float | None = None
    tps_reading: str = "per-seq"

    def __post_init__(self) -> None:
        if self.tps_reading not in TPS_READINGS:
            raise UserInputError("tps_reading", self.tps_reading,
                                 f"use one of {', '.join(TPS_READINGS)}")
        if not self.tpot_max_s > 0:
            raise UserInputError("tpot_max", self.tpot_max_s, "give a time > 0, such as 20ms")
        if self.ttft_max_s is not None and not self.ttft_max_s > 0:
            raise UserInputError("ttft_max", self.ttft_max_s, "give a time > 0, such as 30s")

    @property
    def tps_min(self) -> float:
        return 1.0 / self.tpot_max_s

    def tpot_limit_s(self, batch: int) -> float:
        """The TPOT a decode step may take under this reading."""
        return self.tpot_max_s * (batch if self.tps_reading == "per-batch" else 1)

    def limit_s(self, phase: str, batch: int) -> float | None:
        """The latency bound of a phase; None means no bound (prefill without a TTFT SLA)."""
        return self.tpot_limit_s(batch) if phase == "decode" else self.ttft_max_s

    def to_dict(self, batch: int) -> dict[str, float | str | None]:
        return {"tpot_max_s": self.tpot_max_s, "ttft_max_s": self.ttft_max_s,
                "tps_reading": self.tps_reading, "tps_min": self.tps_min,
                "tpot_limit_s": self.tpot_limit_s(batch)}
