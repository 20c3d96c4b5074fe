"""One fully specified configuration (:class:`EvalConfig`) and its key in every cache and
result store."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from ctxplan.errors import UserInputError, did_you_mean
from ctxplan.evaluate.version import SIM_VERSION
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster
from ctxplan.mapping.entry import (
    HANDOFF_MODES,
    MOE_PARALLEL_CHOICES,
    PREFILL_RING_CHOICES,
    Layout,
    make_layout,
)
from ctxplan.model.dtypes import WEIGHT_DTYPES, matmul_dtype, matmul_dtype_preference
from ctxplan.model.kv import default_kv_tiers, resolve_kv_tier
from ctxplan.model.precision import Precision
from ctxplan.model.spec import ModelSpec

DEFAULT_EVENT_LIMIT = 200_000_000


@dataclass(frozen=True)
class EvalConfig:
    """Everything that determines one evaluation."""

    model: ModelSpec
    chip: Chip
    cluster: Cluster
    phase: str                          # "prefill" | "decode"
    context_length: int                 # S, tokens per sequence
    cp: int                             # Np (prefill) or Nd (decode)
    tp: int = 1                         # chips per CP rank
    batch: int = 1
    kv_tier: str | int | None = None    # tier name or bytes per token per layer; None: default
    mla_mode: str | None = None         # None: standard for prefill, absorbed for decode
    precision: Precision | None = None  # None: the model's weight dtype, BF16 attention
    event_limit: int = DEFAULT_EVENT_LIMIT
    periodic_shortcut: bool = False     # True: simulate a few layers, extrapolate if exactly
                                        # periodic (opt-in; default: every layer simulated)
    pass_q: str = "broadcast"           # decode: "broadcast" or "ring" query movement
    cached: int = 0                     # prefill: tokens whose KV is cached (T = S - cached new)
    prefill_ring: str = "pass-kv"       # prefill: pass-kv, pass-q, all-gather or auto
    moe_parallel: str = "ep"            # MoE layers: ep, tp or auto (mapping/ffn.py)
    # Prefill only: simulate the KV handoff to a decode pool of handoff_to CP ranks x
    # handoff_tp chips placed on the chips after the prefill pool (mapping/handoff.py), moving
    # the cache layer by layer ("streamed") or after the last layer ("after"). None: no handoff.
    handoff_to: int | None = None
    handoff_tp: int = 1
    kv_handoff: str = "streamed"
    memory_headroom: float = 1.0        # usable fraction of memory after the reserve (issue 13)

    def resolved_precision(self) -> Precision:
        """The precision given, else the model's storage dtypes (the FFN in the routed experts'
        dtype when it differs: gpt-oss's MXFP4), with each weight dtype's matmul dtype resolved
        for the chip (docs/model.md, "Weight dtypes")."""
        p = self.precision
        if p is None:
            w = self.model.weight_dtype
            p = Precision(attention_weights=w, ffn_weights=self.model.expert_weight_dtype or w)
        return p.on_chip(self.chip.peak_flops_per_s)

    def kv(self) -> tuple[str, int]:
        tier = self.kv_tier if self.kv_tier is not None else default_kv_tiers(self.model)[0]
        return resolve_kv_tier(self.model, tier)

    def layout(self) -> Layout:
        """The validated layout; with ``prefill_ring = "auto"`` the pass-KV one (evaluate
        simulates both rings)."""
        _, c_kv = self.kv()
        _check_dtypes(self.resolved_precision(), self.chip)
        if self.prefill_ring not in PREFILL_RING_CHOICES:
            raise UserInputError("prefill_ring", self.prefill_ring,
                                 f"use one of {', '.join(PREFILL_RING_CHOICES)}")
        if self.moe_parallel not in MOE_PARALLEL_CHOICES:
            raise UserInputError("moe_parallel", self.moe_parallel,
                                 f"use one of {', '.join(MOE_PARALLEL_CHOICES)}")
        return make_layout(
            self.model, phase=self.phase, cp=self.cp, tp=self.tp, batch=self.batch,
            context_length=self.context_length, c_kv_bytes=c_kv, mla_mode=self.mla_mode,
            precision=self.resolved_precision(), max_chips=self.cluster.max_chips,
            pass_q=self.pass_q, cached=self.cached,
            prefill_ring="pass-kv" if self.prefill_ring == "auto" else self.prefill_ring,
            moe_parallel="ep" if self.moe_parallel == "auto" else self.moe_parallel,
        )

    def handoff_layout(self) -> Layout | None:
        """The decode pool the KV is handed to (validated), or None without a handoff."""
        if self.handoff_to is None:
            return None
        if self.phase != "prefill":
            raise UserInputError("handoff_to", self.handoff_to, "drop it, or evaluate the "
                                 "prefill phase: the handoff moves prefill's KV to decode")
        if self.kv_handoff not in HANDOFF_MODES:
            raise UserInputError("kv_handoff", self.kv_handoff,
                                 f"use one of {', '.join(HANDOFF_MODES)} with --handoff-to")
        _, c_kv = self.kv()
        lay_d = make_layout(
            self.model, phase="decode", cp=self.handoff_to, tp=self.handoff_tp,
            batch=self.batch, context_length=self.context_length, c_kv_bytes=c_kv,
            mla_mode=None, precision=self.resolved_precision(),
            max_chips=self.cluster.max_chips, pass_q=self.pass_q)
        total = self.cp * self.tp + lay_d.n_chips
        if total > self.cluster.max_chips:
            raise UserInputError(
                "handoff_to", self.handoff_to,
                f"the two pools take {self.cp * self.tp} + {lay_d.n_chips} = {total} chips and "
                f"cluster {self.cluster.name} has {self.cluster.max_chips}: pick smaller pools "
                "or a larger cluster (the handoff needs both pools on one cluster's links)")
        return lay_d

    def key_fields(self) -> dict[str, Any]:
        """What the key hashes: every field as plain JSON data, but for those that cannot
        change a finished simulation's figures or were added after keys were first stored.

        The event limit is left out: it decides only whether a simulation may finish, never
        what a finished one measured, so results under any limit are interchangeable. Without
        a handoff its fields are left out too, so keys stored before it existed still hold."""
        fields = _plain(self)
        del fields["event_limit"]
        if self.handoff_to is None:
            for name in ("handoff_to", "handoff_tp", "kv_handoff"):
                del fields[name]
        if fields["moe_parallel"] == "ep":
            del fields["moe_parallel"]   # the default, as before the option (issue 27)
        if fields["memory_headroom"] == 1.0:
            del fields["memory_headroom"]  # the default: keys from before the option still hold
        # Figures that shape a search or sit beside an answer, not what a point measures: left
        # out, so that adding them (issue 27) kept every stored key.
        del fields["chip"]["tdp_w"]
        for name in ("tp_max", "group_size"):
            del fields["cluster"][name]
        model = fields["model"]
        for name in ("max_position_embeddings", "rope_scaling_factor",
                     "original_max_position_embeddings"):
            del model[name]   # the trained context: a warning's business, not a simulation's
        for name, default in _MODEL_DEFAULTS_OUT_OF_KEY.items():
            if model[name] == default:
                del model[name]   # DeepSeek-V4's fields, absent from every model before it
        return fields

    def key(self) -> str:
        """Hash of the configuration (:meth:`key_fields`) and the simulator version: the cache
        and result-store key."""
        blob = json.dumps([SIM_VERSION, self.key_fields()], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:32]


# ModelSpec fields added by issue 27 that other models leave at these values: out of the key then.
_MODEL_DEFAULTS_OUT_OF_KEY: dict[str, Any] = {
    "compressed_attention": None, "hc_mult": 1, "num_hash_layers": 0, "mtp_layer_types": [],
}


def _check_dtypes(p: Precision, chip: Chip) -> None:
    """Every weight dtype must be a known storage dtype the chip can run a matmul for (at its
    own peak or, for packed formats, one it dequantises to), and the attention dtype a peak."""
    known = ", ".join(sorted(chip.peak_flops_per_s))
    for field_name in ("attention_weights", "ffn_weights"):
        dtype = getattr(p, field_name)
        if dtype not in WEIGHT_DTYPES:
            raise UserInputError(field_name, dtype, f"{did_you_mean(dtype, WEIGHT_DTYPES)}use "
                                 f"one of {', '.join(WEIGHT_DTYPES)}", "unknown weight dtype")
        if matmul_dtype(dtype, chip.peak_flops_per_s) is None:
            runs_at = " or ".join(matmul_dtype_preference(dtype))
            raise UserInputError(
                field_name, dtype,
                f"chip {chip.name} has peaks for {known}: store the weights in one of them "
                f"(weights stored in {dtype} run their matmuls at {runs_at})",
                "no peak FLOP/s for this dtype")
    if p.attention not in chip.peak_flops_per_s:
        raise UserInputError("attention", p.attention,
                             f"chip {chip.name} has peaks for {known}: use one of them",
                             "no peak FLOP/s for this dtype")


def _plain(obj: Any) -> Any:
    if hasattr(obj, "__dataclass_fields__"):
        return {k: _plain(v) for k, v in asdict(obj).items()}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj


