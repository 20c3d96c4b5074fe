"""One fully specified configuration (:class:`EvalConfig`) and its key in every cache and
result store."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ctxplan.evaluate.version import SIM_VERSION
from ctxplan.hardware.chip import Chip
from ctxplan.hardware.cluster import Cluster, join_clusters
from ctxplan.mapping.entry import Layout, dynamic_sizes, make_layout, pipeline_stages
from ctxplan.model.kv import default_kv_tiers, resolve_kv_tier
from ctxplan.model.precision import Precision
from ctxplan.model.spec import ModelSpec
from ctxplan.policy import Policy


@dataclass(frozen=True)
class EvalConfig:
    """Everything that determines one evaluation: the model, the system, the pool's layout and
    the policy it runs under. Built from values the edge checked (``ctxplan.config.checks``:
    ``api.eval_config`` and the solver's requests); the evaluation trusts it."""

    model: ModelSpec
    chip: Chip
    cluster: Cluster
    phase: str                          # "prefill" | "decode"
    context_length: int                 # S, tokens per sequence
    cp: int                             # Np (prefill) or Nd (decode)
    tp: int = 1                         # chips per CP rank
    batch: int = 1
    kv_tier: str | int | None = None    # tier name or bytes per token per layer; None: default
    cached: int = 0                     # prefill: tokens whose KV is cached (T = S - cached new)
    # Prefill only: simulate the KV handoff to a decode pool of handoff_to CP ranks x
    # handoff_tp chips placed from the next host on (mapping/handoff.py; colocate_pools: right
    # after the prefill pool), moving
    # the cache as the policy's kv_handoff says. None: no handoff.
    handoff_to: int | None = None
    handoff_tp: int = 1
    policy: Policy = field(default_factory=Policy)   # how the layout executes (ctxplan.policy)
    pp: int = 1                         # pipeline stages of the pool (chips = pp x cp x tp)
    handoff_pp: int = 1                 # pipeline stages of the decode pool of handoff_to
    # The decode pool of handoff_to on another chip and / or another cluster (issue 25 item
    # 3; None: the prefill's). On another cluster, it holds that cluster's chips from its chip
    # 0, joined to the prefill's by the fabric of hardware/cluster.join_level, whose bandwidth
    # handoff_link_gbps replaces (GB/s per chip per direction; None: the join's default).
    handoff_chip: Chip | None = None
    handoff_cluster: Cluster | None = None
    handoff_link_gbps: float | None = None
    # Decode: DP attention ranks (issue 25 item 1), each a CP group of cp x tp chips holding
    # its own sequences' KV; the experts over all dp x cp x tp chips (chips = pp x dp x cp x tp)
    dp: int = 1
    handoff_dp: int = 1                 # DP attention ranks of the decode pool of handoff_to

    @property
    def decode_chip(self) -> Chip:
        """The chip of the decode pool of a handoff (the prefill's unless given)."""
        return self.handoff_chip or self.chip

    def graph_cluster(self) -> Cluster:
        """The cluster a graph of this configuration runs on: its own, or with a handoff to
        a pool on another cluster the two joined (``join_clusters``)."""
        if self.handoff_to is None or self.handoff_cluster is None:
            return self.cluster
        return join_clusters(self.cluster, self.handoff_cluster, self.handoff_link_gbps)

    def with_policy(self, **changes: Any) -> EvalConfig:
        """This configuration under its policy with ``changes``."""
        return replace(self, policy=replace(self.policy, **changes))

    def resolved_precision(self) -> Precision:
        """The precision given, else the model's storage dtypes (the FFN in the routed experts'
        dtype when it differs: gpt-oss's MXFP4), with each weight dtype's matmul dtype resolved
        for the chip (docs/model.md, "Weight dtypes")."""
        p = self.policy.precision
        if p is None:
            w = self.model.weight_dtype
            p = Precision(attention_weights=w, ffn_weights=self.model.expert_weight_dtype or w)
        return p.on_chip(self.chip.peak_flops_per_s)

    def kv(self) -> tuple[str, int]:
        tier = self.kv_tier if self.kv_tier is not None else default_kv_tiers(self.model)[0]
        return resolve_kv_tier(self.model, tier)

    def layout(self) -> Layout:
        """The pool's layout; with ``prefill_ring = "auto"`` the pass-KV one and with
        ``moe_parallel = "auto"`` the EP one (evaluate simulates each)."""
        _, c_kv = self.kv()
        policy = self.policy
        if policy.prefill_ring == "auto":
            policy = replace(policy, prefill_ring="pass-kv")
        if policy.moe_parallel == "auto":
            policy = replace(policy, moe_parallel="ep")
        if policy.prefill_chunk == "auto" or self.phase != "prefill":
            policy = replace(policy, prefill_chunk="off")   # "auto": evaluate tries each
        if policy.prefill_chunk == "dynamic":
            lay = make_layout(
                self.model, phase=self.phase, cp=self.cp, tp=self.tp, batch=self.batch,
                context_length=self.context_length, c_kv_bytes=c_kv,
                precision=self.resolved_precision(), cached=self.cached, policy=policy)
            sizes = dynamic_sizes(self.model, lay, self.dynamic_chunks())
            policy = replace(policy, prefill_chunk="dynamic:" + ",".join(map(str, sizes)))
        return self._staged(make_layout(
            self.model, phase=self.phase, cp=self.cp, tp=self.tp, batch=self.batch,
            context_length=self.context_length, c_kv_bytes=c_kv,
            precision=self.resolved_precision(), cached=self.cached, policy=policy,
            dp=self.dp), self.pp)

    def dynamic_chunks(self) -> int:
        """How many chunks ``prefill_chunk = dynamic`` makes: as many as chunks of the
        cluster's ``prefill_chunk_tokens`` (raised to 2K tokens per CP rank) would, and at
        least 4 per pipeline stage so the stages fill (docs/mapping.md, "Chunked prefill")."""
        new = self.context_length - self.cached
        size = max(self.cluster.prefill_chunk_tokens, 2048 * self.cp)
        return min(new, max(-(-new // size), 4 * self.pp if self.pp > 1 else 1))

    def _staged(self, lay: Layout, pp: int, chip: Chip | None = None) -> Layout:
        """``lay`` in ``pp`` pipeline stages, balanced for its chip (this one unless given;
        mapping/stages.py)."""
        if pp == 1:
            return lay
        lay = replace(lay, pp=pp)
        return replace(lay, stages=pipeline_stages(self.model, lay, chip or self.chip))

    def handoff_layout(self) -> Layout | None:
        """The decode pool the KV is handed to, or None without a handoff."""
        if self.handoff_to is None:
            return None
        _, c_kv = self.kv()
        return self._staged(make_layout(
            self.model, phase="decode", cp=self.handoff_to, tp=self.handoff_tp,
            batch=self.batch, context_length=self.context_length, c_kv_bytes=c_kv,
            precision=self.resolved_precision(),
            policy=replace(self.policy, mla_mode=None).for_phase("decode"),
            dp=self.handoff_dp), self.handoff_pp, self.decode_chip)

    def key_fields(self) -> dict[str, Any]:
        """What the key hashes, as plain JSON data: the model, chip and cluster (but for their
        fields that cannot change a simulation, or were added after keys were first stored and
        are at their defaults), the layout's fields, and the policy's by their rules
        (:meth:`Policy.key_fields`: the event limit never, since it decides only whether a
        simulation may finish, never what a finished one measured; the handoff's timing only
        with a handoff; a field added since keys were first stored only off its default).
        Without a handoff its fields are left out, so keys stored before it existed still
        hold."""
        fields: dict[str, Any] = {
            "model": _plain(self.model), "chip": _plain(self.chip),
            "cluster": _plain(self.cluster), "phase": self.phase,
            "context_length": self.context_length, "cp": self.cp, "tp": self.tp,
            "batch": self.batch, "kv_tier": self.kv_tier, "cached": self.cached}
        if self.pp != 1:
            fields["pp"] = self.pp   # out of the key at 1, so keys stored before PP still hold
        if self.dp != 1:
            fields["dp"] = self.dp   # likewise for DP attention
        handoff = self.handoff_to is not None
        if handoff:
            fields["handoff_to"], fields["handoff_tp"] = self.handoff_to, self.handoff_tp
            if self.handoff_pp != 1:
                fields["handoff_pp"] = self.handoff_pp
            if self.handoff_dp != 1:
                fields["handoff_dp"] = self.handoff_dp
            # out of the key when not given, so keys stored before issue 25 item 3 still hold
            if self.handoff_chip is not None:
                fields["handoff_chip"] = _plain(self.handoff_chip)
                del fields["handoff_chip"]["tdp_w"]
            if self.handoff_cluster is not None:
                fields["handoff_cluster"] = _plain(self.handoff_cluster)
                for name in ("tp_max", "group_size"):
                    del fields["handoff_cluster"][name]
            if self.handoff_link_gbps is not None:
                fields["handoff_link_gbps"] = self.handoff_link_gbps
        fields.update({k: _plain(v) for k, v in self.policy.key_fields(handoff).items()})
        # Figures that shape a search or sit beside an answer, not what a point measures: left
        # out, so that adding them (issue 27) kept every stored key.
        del fields["chip"]["tdp_w"]
        for name in ("tp_max", "group_size"):
            del fields["cluster"][name]
        if not handoff:
            del fields["cluster"]["host_chips"]   # where a handoff's decode pool starts
        if fields["cluster"]["prefill_chunk_tokens"] == Cluster.prefill_chunk_tokens:
            del fields["cluster"]["prefill_chunk_tokens"]   # issue 22's figure at its default
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


def _plain(obj: Any) -> Any:
    if hasattr(obj, "__dataclass_fields__"):
        return {k: _plain(v) for k, v in asdict(obj).items()}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj
