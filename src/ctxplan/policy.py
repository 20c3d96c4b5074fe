"""How a layout executes: the frozen :class:`Policy`, carried whole from the edge to the emitters.

A pool's *layout* says where things are (``ctxplan.mapping.layout.Layout``: the phase, the CP and
TP degrees, the batch, the context and its cached prefix, the KV tier); its *policy* says how the
layout runs them: the MLA mode, the dtypes, how decode moves queries and prefill moves blocks
around its ring, how the KV reaches the decode pool, how much memory a plan may fill, and how
the simulation is run. The API (and a study or point file) builds one ``Policy`` from the
options (declared once in ``ctxplan.config.options``), checks it once at the edge
(``ctxplan.config.checks``), and hands it unchanged through ``SolveRequest`` and ``EvalConfig``
to the ``Layout`` the emitters read (``lay.policy.pass_q``).

**Adding an execution option** is: declare it in ``config/options.py``, add one field here (its
default the option's), check its value in ``config/checks.check_policy`` if it has choices or
bounds, and read it where it matters (an emitter: ``lay.policy.<name>``). The API builds the
policy from every option that names one of its fields, the key of every cache and store leaves
a field out while it has its default (:meth:`Policy.key_fields`), so stored results keep their
keys, and the results that report a policy report all of it. A new *parallel dimension* (pp,
dp) is a field of the layout instead: where things are, not how they run.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:   # the option declarations import this module at the CLI's start: keep it light
    from ctxplan.model.precision import Precision

MLA_MODES = ("standard", "absorbed")
# How decode moves each new query to the KV shards (docs/mapping.md, "Decode"): "broadcast"
# sends it from its home rank to every shard at once; "ring" forwards it rank to rank (Nd - 1
# hops in sequence), as Meta's pass-Q implementation does (arXiv:2411.01783, section 3.3).
PASS_Q_PATTERNS = ("broadcast", "ring")
# How prefill's full-attention layers move data around the CP ring (docs/mapping.md, "A cached
# prefix"): KV blocks (pass-KV, the default) or the new tokens' query blocks, whose partial
# outputs then go home in an all-to-all (pass-Q; Meta, arXiv:2411.01783, section 3).
# "all-gather" (DeepSeek-V4's CSA and HCA layers, as SGLang runs them): every rank's
# compressed entries all-gathered over the CP ranks before the attention
# (mapping/kinds/compressed_prefill.py). A kind runs the rings it knows (its ``rings``) and its
# first one under another value (DSA, V4: pass-kv under pass-q; full attention: pass-kv under
# all-gather). Evaluation also takes "auto" (simulate each that applies, keep the fastest):
# PREFILL_RING_CHOICES.
PREFILL_RINGS = ("pass-kv", "pass-q", "all-gather")
PREFILL_RING_CHOICES = (*PREFILL_RINGS, "auto")
# How the MoE layers run over the pool (docs/mapping.md, "The FFN half"): "ep" (the experts
# spread over the pool, the tokens to them by an all-to-all) or "tp" ("attention CP, MoE TP":
# the hidden states all-gathered over the pool, every expert split over its chips, the partial
# sums reduce-scattered after; SGLang runs DeepSeek-V4-Pro so). Evaluation also takes "auto".
MOE_PARALLEL = ("ep", "tp")
MOE_PARALLEL_CHOICES = (*MOE_PARALLEL, "auto")
# When the KV handoff moves the cache to the decode pool (docs/handoff.md): layer by layer as
# prefill proceeds, or after its last layer; a solve may also leave it out ("off").
HANDOFF_MODES = ("after", "streamed")
KV_HANDOFF_CHOICES = ("off", *HANDOFF_MODES)
DEFAULT_EVENT_LIMIT = 200_000_000
# The reason of a point whose graph is estimated over host_memory_budget (not built, not stored).
TOO_LARGE = "too large to simulate here"

# How a field enters the key of every cache and store (Policy.key_fields), its ``metadata``:
# ALWAYS for the fields keys held before the policy existed, WITH_HANDOFF (only when a handoff
# is simulated), NEVER (cannot change a finished simulation's figures); a field without one
# (every new field) enters only when it is not at its default, so keys stored before it hold.
_KEY = "key"


ALWAYS = {_KEY: "always"}
WITH_HANDOFF = {_KEY: "with-handoff"}
NEVER = {_KEY: "never"}


@dataclass(frozen=True)
class Policy:
    """How a layout executes (see the module docstring). Frozen, checked once at the edge."""

    # MLA: "standard" | "absorbed"; None: standard prefill, absorbed decode (DSA: absorbed).
    mla_mode: str | None = field(default=None, metadata=ALWAYS)
    # The storage dtypes of the weights and the attention's; None: the model's own.
    precision: Precision | None = field(default=None, metadata=ALWAYS)
    pass_q: str = field(default="broadcast", metadata=ALWAYS)      # decode: PASS_Q_PATTERNS
    prefill_ring: str = field(default="pass-kv", metadata=ALWAYS)  # PREFILL_RING_CHOICES
    moe_parallel: str = "ep"        # MoE layers: MOE_PARALLEL_CHOICES (issue 27)
    # Decode: speculative decoding with the model's MTP layers (DeepSeek-V4), each step
    # verifying 1 + n tokens and drafting n; TPOT is the step over the tokens it yields on
    # average, 1 + a + ... + a^n at an acceptance a per draft (off by default).
    mtp_speculation: bool = False
    mtp_acceptance: float = 0.85    # DeepSeek-V3 report: the second token accepted 85-90 %
    # Simulate the first layers and extrapolate when the schedule repeats exactly (opt-in).
    periodic_shortcut: bool = field(default=False, metadata=ALWAYS)
    kv_handoff: str = field(default="streamed", metadata=WITH_HANDOFF)  # KV_HANDOFF_CHOICES
    # The decode pool a handoff goes to: on hosts of its own (False, the default: the first
    # host after the prefill pool's, as separate prefill and decode machines are), or packed
    # right after the prefill pool in one rank order (True). docs/handoff.md, "Placement".
    colocate_pools: bool = False
    memory_headroom: float = 1.0    # usable fraction of the memory after the reserve
    # Prefill: the prompt in chunks of this many tokens, one forward pass each (an int), "off"
    # (the whole prompt in one pass), or "auto" (unchunked when it fits by the simulated peak,
    # else the cluster's prefill_chunk_tokens, halved until it fits; docs/mapping.md).
    prefill_chunk: int | str = "auto"
    event_limit: int = field(default=DEFAULT_EVENT_LIMIT, metadata=NEVER)  # per simulation
    # The simulator's own memory for one graph, in bytes, or "auto" (evaluate/budget.py): a
    # graph estimated above it is not built. Never in a key: it decides only whether a
    # simulation runs, never what it measures (and a refusal is never stored).
    host_memory_budget: int | str = field(default="auto", metadata=NEVER)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The policy's fields: the options the API gathers into it."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def of(cls, options: dict[str, Any]) -> tuple[Policy, dict[str, Any]]:
        """(the policy of the options that name its fields, the other options)."""
        names = cls.names()
        return (cls(**{k: v for k, v in options.items() if k in names}),
                {k: v for k, v in options.items() if k not in names})

    def for_phase(self, phase: str) -> Policy:
        """The policy as a pool of ``phase`` runs it: the other phase's options at their
        defaults (a decode point's key does not depend on the prefill ring asked for)."""
        if phase == "prefill":
            return replace(self, pass_q=Policy.pass_q, mtp_speculation=Policy.mtp_speculation,
                           mtp_acceptance=Policy.mtp_acceptance)
        return replace(self, prefill_ring=Policy.prefill_ring,
                       prefill_chunk=Policy.prefill_chunk)

    def key_fields(self, handoff: bool) -> dict[str, Any]:
        """The fields that enter a key, by each field's rule (its metadata, above), as they are."""
        out = {}
        for f in fields(self):
            rule = f.metadata.get(_KEY, "unless-default")   # a field without metadata
            value = getattr(self, f.name)
            if (rule == "always" or (rule == "with-handoff" and handoff)
                    or (rule == "unless-default" and value != _default(f))):
                out[f.name] = value
        return out


def _default(f: Any) -> Any:
    return f.default if f.default is not MISSING else f.default_factory()


__all__ = [
    "DEFAULT_EVENT_LIMIT",
    "HANDOFF_MODES",
    "KV_HANDOFF_CHOICES",
    "MLA_MODES",
    "MOE_PARALLEL",
    "MOE_PARALLEL_CHOICES",
    "PASS_Q_PATTERNS",
    "PREFILL_RINGS",
    "PREFILL_RING_CHOICES",
    "TOO_LARGE",
    "Policy",
]
