"""Which attention kinds the emitters simulate (ctxplan.mapping.kinds): every kind in both
phases; a kind outside ``SIMULATED`` is refused with one error on layer_types."""

from __future__ import annotations

import pytest

from ctxplan.errors import UserInputError
from ctxplan.mapping import kinds
from ctxplan.mapping.kinds import check_simulated_kinds, unsimulated_kinds
from ctxplan.model.spec import LAYER_TYPES, LINEAR_ATTENTION
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
    assert msg.startswith("layer_types = 'qwen3-next-80b-a3b: 36 linear_attention of 48 layers")
    assert "\n" not in msg and "decode not simulated" in msg and "check_memory" in msg
