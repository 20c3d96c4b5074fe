"""Which attention kinds the emitters simulate (ctxplan.mapping.kinds): every kind in both
phases but DeepSeek-V4's (their emitters are issue 27's next stage); a kind outside
``SIMULATED`` is refused with one error on layer_types, and its memory still checked."""

from __future__ import annotations

import pytest

from ctxplan.errors import UserInputError
from ctxplan.mapping import kinds
from ctxplan.mapping.kinds import check_simulated_kinds, unsimulated_kinds
from ctxplan.model.spec import COMPRESSED_LAYER_TYPES, LAYER_TYPES, LINEAR_ATTENTION
from tests.model.family_specs import FAMILIES


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_every_kind_but_deepseek_v4s_is_simulated_in_both_phases(phase: str) -> None:
    assert kinds.SIMULATED[phase] == frozenset(LAYER_TYPES) - set(COMPRESSED_LAYER_TYPES)
    for name, m in sorted(FAMILIES.items()):
        if m.compressed_attention is not None:
            continue
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


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_deepseek_v4_is_refused_in_simulation_and_checked_for_memory(phase: str) -> None:
    from ctxplan import api
    from ctxplan.evaluate import check_memory

    for name in ("deepseek-v4-pro", "deepseek-v4-flash"):
        assert set(unsimulated_kinds(FAMILIES[name], 2**20, phase)) <= set(COMPRESSED_LAYER_TYPES)
        cfg = api.eval_config(name, "gb300", "1M", phase, 8, tp=8)
        assert check_memory(cfg).fits   # the capacity wall needs no simulation
        with pytest.raises(UserInputError, match=f"{phase} is not simulated for its"):
            api.evaluate(name, "gb300", "1M", phase, 8, tp=8)
