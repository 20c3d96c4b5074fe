"""``api.eval_config`` / ``api.evaluate`` (api/point.py): the policy they build, the errors of
the edge checks, and the same answer as ``ctxplan eval``."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxplan import api
from ctxplan.errors import UserInputError
from ctxplan.evaluate import EvalConfig
from ctxplan.model.precision import Precision
from ctxplan.policy import DEFAULT_EVENT_LIMIT, Policy
from tests.api.conftest import cli_json, flags
from tests.helpers.cli import run_cli


def test_eval_config_carries_the_options_in_one_policy(tiny: dict[str, str]) -> None:
    cfg = api.eval_config(tiny["model"], tiny["chip"], "3K", "prefill", 2,
                          cluster=tiny["cluster"], cached="1K", prefill_ring="auto",
                          memory_headroom=0.9, attention_weights="fp8", handoff_to=2)
    assert isinstance(cfg, EvalConfig)
    assert (cfg.context_length, cfg.cached, cfg.handoff_to) == (3072, 1024, 2)
    assert cfg.policy == Policy(precision=Precision(attention_weights="fp8",
                                                    ffn_weights="bf16"),
                                prefill_ring="auto", memory_headroom=0.9)
    assert cfg.policy.event_limit == DEFAULT_EVENT_LIMIT
    lay = cfg.layout()
    assert lay.policy.prefill_ring == "pass-kv"    # "auto": the evaluation runs both rings
    assert lay.policy.memory_headroom == 0.9 and lay.cached == 1024
    given = Precision(attention_weights="bf16", ffn_weights="fp8")
    assert api.eval_config(tiny["model"], tiny["chip"], 3000, "decode", 2,
                           cluster=tiny["cluster"], precision=given).policy.precision == given


@pytest.mark.parametrize(("options", "field", "words"), [
    ({"tp": 3}, "tp", "divide the model's 4 attention heads"),
    ({"cached": 10, "phase": "decode"}, "cached", "a decode step's whole context"),
    ({"cached": "3K"}, "cached", "at least one new token"),
    ({"prefill_ring": "both"}, "prefill_ring", "pass-kv, pass-q, all-gather, auto"),
    ({"moe_parallel": "dp"}, "moe_parallel", "ep, tp, auto"),
    ({"pass_q": "tree"}, "pass_q", "broadcast, ring"),
    ({"memory_headroom": 1.5}, "memory_headroom", "a fraction > 0 and <= 1"),
    ({"event_limit": 0}, "event_limit", "a whole number of events >= 1"),
    ({"mla_mode": "absorbed"}, "mla_mode", "has no MLA"),
    ({"handoff_to": 2, "phase": "decode"}, "handoff_to", "evaluate the prefill phase"),
    ({"handoff_to": 2, "kv_handoff": "off"}, "kv_handoff", "with --handoff-to"),
    ({"handoff_to": 16}, "handoff_to", "the two pools take"),
    ({"attention_weights": "fp5"}, "attention_weights", "unknown weight dtype"),
    ({"kv_tier": "mla-bf16"}, "kv_tier", ""),
])
def test_a_bad_value_is_one_error_naming_its_field(tiny: dict[str, str], options: dict,
                                                   field: str, words: str) -> None:
    phase = options.pop("phase", "prefill")
    with pytest.raises(UserInputError) as info:
        api.eval_config(tiny["model"], tiny["chip"], 3000, phase, 2, cluster=tiny["cluster"],
                        **options)
    assert info.value.field == field and words in str(info.value)
    assert "\n" not in str(info.value)


def test_evaluate_answers_as_the_command_line_does(tiny: dict[str, str]) -> None:
    for phase, extra in (("prefill", ["--cached", "1K", "--prefill-ring", "auto"]),
                         ("decode", ["--batch", "3", "--pass-q", "ring"])):
        run = run_cli(["eval", *flags(tiny), "--context", "3000", "--phase", phase, "--cp", "2",
                       *extra, "--json", "--no-store"])
        assert run.code == 0, run.err
        options = {"cached": "1K", "prefill_ring": "auto"} if phase == "prefill" else \
            {"batch": 3, "pass_q": "ring"}
        result = api.evaluate(tiny["model"], tiny["chip"], 3000, phase, 2,
                              cluster=tiny["cluster"], **options)
        assert result.to_dict() == cli_json(run.out)
        assert result.key == api.eval_config(tiny["model"], tiny["chip"], 3000, phase, 2,
                                             cluster=tiny["cluster"], **options).key()


def test_evaluate_writes_a_trace_and_refuses_one_of_nothing(tiny: dict[str, str],
                                                            tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    result = api.evaluate(tiny["model"], tiny["chip"], 3000, "decode", 2,
                          cluster=tiny["cluster"], trace_path=path, periodic_shortcut=True)
    assert result.simulated and path.stat().st_size > 0
    assert result.layers_simulated == 2   # a trace simulates every layer
    with pytest.raises(UserInputError, match="nothing to trace"):
        api.write_trace(None, path, result)
