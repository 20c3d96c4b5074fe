"""The frozen Policy (ctxplan/policy.py): which options it gathers, what a phase runs, and which
fields enter a cache / store key, so that a field added later keeps every stored key."""

from __future__ import annotations

from dataclasses import dataclass

from ctxplan.config.options import EvalOptions, declared
from ctxplan.model.precision import Precision
from ctxplan.policy import DEFAULT_EVENT_LIMIT, Policy


def test_every_policy_field_is_an_option_of_a_point() -> None:
    options = declared(EvalOptions)
    # the precision is gathered from the per-part weight dtypes (api.inputs.policy_of)
    assert set(Policy.names()) - {"precision"} <= set(options)
    for name in set(Policy.names()) - {"precision", "event_limit"}:
        assert getattr(Policy(), name) == options[name].default, name
    assert Policy().event_limit == DEFAULT_EVENT_LIMIT and options["event_limit"].default is None


def test_of_splits_the_options_and_for_phase_resets_the_other_phases() -> None:
    policy, rest = Policy.of({"pass_q": "ring", "prefill_ring": "pass-q", "tp": 2})
    assert policy == Policy(pass_q="ring", prefill_ring="pass-q") and rest == {"tp": 2}
    assert policy.for_phase("prefill") == Policy(prefill_ring="pass-q")
    assert policy.for_phase("decode") == Policy(pass_q="ring")


def test_key_fields_follow_each_fields_rule() -> None:
    base = Policy().key_fields(handoff=False)
    assert set(base) == {"mla_mode", "precision", "pass_q", "prefill_ring", "periodic_shortcut"}
    assert "event_limit" not in Policy(event_limit=5).key_fields(handoff=True)
    assert "kv_handoff" not in Policy(kv_handoff="after").key_fields(handoff=False)
    assert Policy(kv_handoff="after").key_fields(handoff=True)["kv_handoff"] == "after"
    assert "memory_headroom" not in base
    assert Policy(memory_headroom=0.9).key_fields(False)["memory_headroom"] == 0.9
    p = Precision(attention_weights="fp8")
    assert Policy(precision=p).key_fields(False)["precision"] == p


def test_a_field_added_later_leaves_stored_keys_alone() -> None:
    @dataclass(frozen=True)
    class Later(Policy):
        prefill_chunk: int | None = None   # as the next execution option would be added

    assert Later().key_fields(False) == Policy().key_fields(False)
    assert Later(prefill_chunk=8192).key_fields(False)["prefill_chunk"] == 8192
