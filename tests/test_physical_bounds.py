"""Physical bounds the simulator may never beat, over random valid configurations.

* TTFT >= total FLOPs / (chips x peak): the work of a prefill, counted from the model alone
  (projections, FFN, the causal attention core, the LM head), split by the dtype that runs it,
  cannot finish faster than every chip of the pool at its nominal peak.
* TPOT >= bytes that must be read per step / HBM bandwidth: the chip that holds a sequence's
  token must stream its weight shard (all of it: a dense model touches every weight) and its
  own KV shard; and all chips together must read the whole model's weights once and the whole
  KV once.
* No resource is busier than the makespan (utilisation <= 100%), per the kernel's own ledger.

The bounds are computed here from the model and chip figures, not from the mapping layer, so
a mapping that drops work or a kernel that overlaps a resource with itself fails them. Small
dense models and contexts keep the run short.
"""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ctxplan.config.hardware_presets import chip_names, load_chip, load_cluster
from ctxplan.config.model_presets import load_model
from ctxplan.evaluate import EvalConfig, evaluate
from ctxplan.mapping.layout import Precision
from ctxplan.model.attention import attention_pair_flops, causal_pairs
from ctxplan.model.linear import attention_linears, dense_ffn_linears, lm_head_linear
from ctxplan.model.params import bytes_per_param
from ctxplan.model.spec import ModelSpec

MODELS = ("llama3.1-8b", "qwen2.5-7b-1m")
SETTINGS = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def valid_tps(m: ModelSpec) -> list[int]:
    heads, kvh = m.num_attention_heads, m.num_key_value_heads
    return [t for t in range(1, 9) if heads % t == 0 and (t <= kvh or t % kvh == 0)]


@st.composite
def configs(draw: st.DrawFn, phase: str) -> EvalConfig:
    m = load_model(draw(st.sampled_from(MODELS)))
    chip = load_chip(draw(st.sampled_from(sorted(chip_names()))))
    cluster = load_cluster(chip.default_cluster)
    tp = draw(st.sampled_from(valid_tps(m)))
    cp = draw(st.integers(1, 8))
    context = draw(st.integers(256, 24_576))
    batch = draw(st.integers(1, 3))
    precision = Precision(attention_weights=draw(st.sampled_from(["bf16", "fp8"])),
                          ffn_weights=draw(st.sampled_from(["bf16", "fp8"])),
                          attention=draw(st.sampled_from(["bf16", "fp8"])))
    return EvalConfig(model=m, chip=chip, cluster=cluster, phase=phase, context_length=context,
                      cp=cp, tp=tp, batch=batch, precision=precision,
                      periodic_shortcut=draw(st.booleans()))


def _simulate(cfg: EvalConfig) -> tuple[float, object]:
    res, trace = evaluate(cfg, trace=True)
    assume(res.simulated)          # a point that does not fit has nothing to bound
    assert res.latency_s is not None and trace is not None
    _check_utilisation(res, trace)
    return res.latency_s, res


def _check_utilisation(res: object, trace: object) -> None:
    sim = trace.result  # type: ignore[attr-defined]
    span = sim.makespan_ns
    assert span > 0
    for rid, busy in enumerate(sim.resource_busy_ns):
        assert busy <= span, f"resource {rid} busy {busy} ns > makespan {span} ns"
    assert 0 < res.max_compute_utilisation <= 1  # type: ignore[attr-defined]
    assert 0 <= res.max_link_utilisation <= 1  # type: ignore[attr-defined]


def prefill_flops_by_dtype(m: ModelSpec, cfg: EvalConfig) -> dict[str, float]:
    """FLOPs of one full prefill of ``batch`` sequences of S tokens, by the dtype running them."""
    p = cfg.resolved_precision()
    s, b, L = cfg.context_length, cfg.batch, m.num_hidden_layers
    out: dict[str, float] = {}

    def add(dtype: str, flops: float) -> None:
        out[dtype] = out.get(dtype, 0.0) + flops

    add(p.attention_weights, L * sum(x.flops(s * b) for x in attention_linears(m)))
    add(p.ffn_weights, L * sum(x.flops(s * b) for x in dense_ffn_linears(m)))
    add(p.attention, L * b * causal_pairs(s) * attention_pair_flops(m))
    add("bf16", lm_head_linear(m).flops(b))     # the first token's logits
    return out


@SETTINGS
@given(cfg=configs("prefill"))
def test_ttft_is_never_below_the_flops_at_peak(cfg: EvalConfig) -> None:
    ttft, _ = _simulate(cfg)
    chips = cfg.cp * cfg.tp
    peak = cfg.chip.peak_flops_per_s
    bound = sum(f / (chips * peak[d]) for d, f in prefill_flops_by_dtype(cfg.model, cfg).items())
    assert ttft >= bound * (1 - 1e-9), (ttft, bound)


def weight_bytes(m: ModelSpec, p: Precision) -> tuple[float, float]:
    """Per layer: attention projection bytes and FFN bytes (the whole layer, unsharded)."""
    attn = sum(x.params for x in attention_linears(m)) * bytes_per_param(p.attention_weights)
    ffn = sum(x.params for x in dense_ffn_linears(m)) * bytes_per_param(p.ffn_weights)
    return attn, ffn


@SETTINGS
@given(cfg=configs("decode"))
def test_tpot_is_never_below_the_bytes_read_at_full_bandwidth(cfg: EvalConfig) -> None:
    tpot, _ = _simulate(cfg)
    m = cfg.model
    L = m.num_hidden_layers
    bw = cfg.chip.memory_bandwidth_bytes_per_s
    _, c_kv = cfg.kv()
    attn, ffn = weight_bytes(m, cfg.resolved_precision())
    # The home chip of sequence 0 (rank 0, first TP chip): its weight shard, every layer, and
    # its share of every sequence's KV (the KV heads split over min(tp, kv_heads) chips).
    split = min(cfg.tp, m.num_key_value_heads)
    shard_tokens = cfg.context_length // cfg.cp
    home = L * ((attn + ffn) / cfg.tp + cfg.batch * shard_tokens * (c_kv // split))
    assert tpot >= home / bw * (1 - 1e-9), (tpot, home / bw)
    # All chips together read the model's weights once and the whole KV once.
    total = L * (attn + ffn + cfg.batch * cfg.context_length * c_kv)
    assert tpot >= total / (cfg.cp * cfg.tp * bw) * (1 - 1e-9)
