"""The registry of attention kinds (ctxplan.mapping.kinds): every kind of the model layer has
every hook and is simulated in both phases; a kind outside ``SIMULATED`` is refused with one
error on layer_types; a new kind is one module and its registration."""

from __future__ import annotations

import dataclasses

import pytest

from ctxplan.config.hardware_presets import load_chip, load_cluster
from ctxplan.errors import UserInputError
from ctxplan.mapping import kinds
from ctxplan.mapping.kinds import check_simulated_kinds, unsimulated_kinds
from ctxplan.model.spec import LAYER_TYPES, LINEAR_ATTENTION, ModelSpec
from tests.model.family_specs import FAMILIES


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_every_kind_is_simulated_in_both_phases(phase: str) -> None:
    assert kinds.SIMULATED[phase] == frozenset(LAYER_TYPES)
    for name, m in sorted(FAMILIES.items()):
        for context in (1, 129, 2**20):
            assert unsimulated_kinds(m, context, phase) == {}, name
            check_simulated_kinds(m, context, phase)


def test_a_kind_without_emitters_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    # as a kind added to the model layer before its emitters would be
    monkeypatch.setitem(kinds.SIMULATED, "decode", frozenset(LAYER_TYPES) - {LINEAR_ATTENTION})
    m = FAMILIES["qwen3-next-80b-a3b"]
    assert unsimulated_kinds(m, 131072) == {LINEAR_ATTENTION: 36}
    check_simulated_kinds(m, 131072, "prefill")
    with pytest.raises(UserInputError) as info:
        check_simulated_kinds(m, 131072)
    msg = str(info.value)
    assert msg.startswith("layer_types = 'qwen3-next-80b-a3b': decode is not simulated for its "
                          "36 linear_attention layers (of 48)")
    assert "\n" not in msg and "check_memory" in msg


# -- the registry ---------------------------------------------------------------------------

HOOKS = ("prefill_emitter", "prefill_comm", "decode_emitter", "decode_comm", "prefill_kv",
         "decode_kv", "handoff_pairs", "decode_activations")


def test_every_kind_of_the_model_layer_is_registered_with_every_hook() -> None:
    assert set(kinds.REGISTRY) == set(LAYER_TYPES)
    for layer_type in LAYER_TYPES:
        kind = kinds.kind_of(layer_type)
        assert kind.layer_type == layer_type
        assert all(callable(getattr(kind, hook)) for hook in HOOKS), layer_type
        assert kind.phases <= {"prefill", "decode"}
        assert kind.handoff_ready.op_kinds
        for m in FAMILIES.values():
            if m.n_layers_of_type(layer_type):
                for context in (1, 129, 2**20):
                    # a kind runs as itself or as another registered kind
                    assert kinds.runs_as(m, layer_type, context).layer_type in kinds.REGISTRY
                if kind.pairs_below is not None:
                    kind.pairs_below(m)


TOY = "toy_attention"


def test_a_new_kind_is_one_module_and_its_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    # A toy kind with full attention's hooks, its prefill emitter wrapped to see it called:
    # registered, the emitters, the memory and the handoff run it (no other file knows it),
    # and the figures equal those of the same layers as full attention.
    from ctxplan.evaluate import EvalConfig, evaluate
    from ctxplan.mapping.kinds import full
    from ctxplan.model import linear, spec

    for module in (spec, linear):
        monkeypatch.setattr(module, "LAYER_TYPES", (*spec.LAYER_TYPES, TOY))
    monkeypatch.setattr(kinds, "REGISTRY", dict(kinds.REGISTRY))
    monkeypatch.setattr(kinds, "SIMULATED", dict(kinds.SIMULATED))
    calls: list[str] = []

    def prefill_emitter(b, setup, layer_type):  # type: ignore[no-untyped-def]
        calls.append(layer_type)
        return full.prefill_emitter(b, setup, layer_type)

    kinds.register(dataclasses.replace(full.KINDS[0], layer_type=TOY,
                                       prefill_emitter=prefill_emitter))
    base = FAMILIES["gpt-oss-20b"].first_layers(4)
    toy = dataclasses.replace(base, layer_types=tuple(
        TOY if t == spec.FULL_ATTENTION else t for t in base.layer_types))
    assert dict(toy.layer_type_counts) == {spec.SLIDING_ATTENTION: 2, TOY: 2}
    chip, cluster = load_chip("h100-sxm"), load_cluster("hgx-h100-ib")

    def run(m: ModelSpec, phase: str, **kw: object):  # type: ignore[no-untyped-def]
        cfg = EvalConfig(model=m, chip=chip, cluster=cluster, phase=phase, context_length=4096,
                         cp=2, **kw)  # type: ignore[arg-type]
        return evaluate(cfg)[0]

    for phase, kw in (("prefill", {"handoff_to": 2}), ("decode", {"batch": 3})):
        got, want = run(toy, phase, **kw), run(base, phase, **kw)
        assert got.latency_s == want.latency_s and got.memory == want.memory
        assert got.comm is not None and want.comm is not None
        assert got.comm.analytic_bytes == want.comm.analytic_bytes
        assert got.comm.simulated_bytes == want.comm.simulated_bytes
        assert {k.layer_type for k in got.comm.kinds} == {spec.SLIDING_ATTENTION, TOY}
        if got.handoff is not None and want.handoff is not None:
            assert got.handoff.bytes_moved == want.handoff.bytes_moved
    assert calls == [TOY]   # the one prefill graph asked the registry for the toy's emitter
    # a kind whose emitters a phase does not simulate is refused there, by the registry
    kinds.register(dataclasses.replace(kinds.kind_of(TOY), phases=frozenset({"prefill"})))
    assert unsimulated_kinds(toy, 4096, "decode") == {TOY: 2}
    with pytest.raises(UserInputError, match="decode is not simulated"):
        run(toy, "decode")
