"""Study and point files: loading, the migration rule, --set overrides, flags over the file,
inline definitions, relative paths and the JSON Schema (ctxplan.config.study)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ctxplan import api
from ctxplan.config.study import (
    CANDIDATE_SET_NAMES,
    STRATEGY_NAMES,
    json_schema,
    load_point,
    load_study,
    parse_set,
)
from ctxplan.errors import UserInputError
from ctxplan.solve.candidates import CANDIDATE_SETS
from ctxplan.solve.search import STRATEGIES
from tests.helpers.cli import run_cli
from tests.helpers.inputs import TINY_MODEL

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"



def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _study(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"version": 2, "model": dict(TINY_MODEL), "chip": "h100-sxm",
                         "contexts": ["1K", "4K"], "kv_tiers": ["kv-bf16"], "max_chips": 8}
    d.update(over)
    return d


def _point(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"version": 1, "model": dict(TINY_MODEL), "chip": "h100-sxm",
                         "context": "4K", "phase": "decode", "cp": 2, "kv_tier": "kv-fp8"}
    d.update(over)
    return d


def _error(fn: Any, *args: Any, **kw: Any) -> str:
    with pytest.raises(UserInputError) as info:
        fn(*args, **kw)
    msg = str(info.value)
    assert "\n" not in msg and "Fix:" in msg
    return msg


# ------------------------------------------------------------------------------ happy paths


def test_study_file_loads_every_field(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", _study(
        sla={"tpot_max": "30ms", "ttft_max": "5s", "tps_reading": "per-batch"}, batch=2,
        strategy="linear", candidates="pow2", group_size=2, prefill_tp=2, decode_tp="auto",
        event_limit=10**6, cluster="hgx-h100-ib", objective="tokens-per-chip",
        memory_headroom=0.9))
    s = load_study(f)
    assert s.model.name == "tiny" and s.model.num_key_value_heads == 2
    assert s.chip.name == "h100-sxm" and s.cluster is not None
    assert s.cluster.name == "hgx-h100-ib"
    assert s.contexts == (1024, 4096)
    assert (s.tpot_max, s.ttft_max, s.tps_reading) == ("30ms", "5s", "per-batch")
    assert s.kv_tiers == ("kv-bf16",) and s.batch == 2 and s.strategy == "linear"
    assert (s.candidates, s.group_size, s.max_chips) == ("pow2", 2, 8)
    assert (s.prefill_tp, s.decode_tp, s.event_limit) == (2, "auto", 10**6)
    assert (s.objective, s.memory_headroom) == ("tokens-per-chip", 0.9)
    req = api.solve_request(s.model, s.chip, s.contexts[0], **s.solve_options())
    assert req.sla.tpot_max_s == pytest.approx(0.03) and req.sla.ttft_max_s == 5.0
    assert req.policy.event_limit == 10**6 and req.max_chips == 8
    assert (req.prefill_tp, req.decode_tp, req.objective) == (2, "auto", "tokens-per-chip")
    assert req.policy.memory_headroom == 0.9
    auto = load_study(_write(tmp_path / "a.yaml", _study(batch="auto")))
    assert auto.batch == "auto" and auto.prefill_tp == auto.decode_tp == "auto"


def test_point_file_evaluates_like_the_flags(tmp_path: Path) -> None:
    f = _write(tmp_path / "p.yaml", _point(batch=3, tp=2))
    from_file = api.evaluate_point(load_point(f))
    from_args = api.evaluate(load_point(f).model, "h100-sxm", "4K", "decode", 2, tp=2,
                             batch=3, kv_tier="kv-fp8")
    assert from_file.to_dict() == from_args.to_dict()
    assert from_file.batch == 3 and from_file.chips == 4 and from_file.kv_tier == "kv-fp8"


def test_contexts_forms(tmp_path: Path) -> None:
    for value, want in (("1M", (2**20,)), (3000, (3000,)), ("8K,128K", (8192, 2**17)),
                        (["8K", 1000], (8192, 1000))):
        assert load_study(_write(tmp_path / "s.yaml", _study(contexts=value))).contexts == want


def test_default_tiers_are_an_explicit_choice(tmp_path: Path) -> None:
    s = load_study(_write(tmp_path / "s.yaml", _study(kv_tiers="default")))
    assert s.kv_tiers == ()
    result = api.solve_study(s)
    assert {t.kv_tier for t in result.points[0].tiers} == {"kv-bf16", "kv-fp8"}
    p = load_point(_write(tmp_path / "p.yaml", _point(kv_tier="default")))
    assert p.kv_tier is None and api.evaluate_point(p).kv_tier == "kv-bf16"


def test_a_study_with_several_contexts_solves_each_with_a_shared_cache(tmp_path: Path) -> None:
    s = load_study(_write(tmp_path / "s.yaml", _study(contexts=["1K", "4K", "1K"])))
    result = api.solve_study(s)
    assert [p.context_length for p in result.points] == [1024, 4096, 1024]
    for p in result.points:
        alone = api.solve(s.model, s.chip, p.context_length, **s.solve_options())
        assert p.total_chips == alone.total_chips and p.feasible == alone.feasible


def test_solver_names_match() -> None:
    assert tuple(STRATEGY_NAMES) == tuple(STRATEGIES)
    assert tuple(CANDIDATE_SET_NAMES) == tuple(CANDIDATE_SETS)


# --------------------------------------------------------------------------- migration rule


def test_old_point_without_version_names_the_new_fields(tmp_path: Path) -> None:
    d = _point()
    for k in ("version", "cp", "kv_tier"):
        del d[k]
    msg = _error(load_point, _write(tmp_path / "old.yaml", d))
    assert "version" in msg and "'cp: <N>'" in msg and "'kv_tier: <tier>'" in msg
    assert "Migrating" in msg


@pytest.mark.parametrize("field", ["cp", "kv_tier"])
def test_point_without_a_new_field_is_refused(tmp_path: Path, field: str) -> None:
    d = _point()
    del d[field]
    msg = _error(load_point, _write(tmp_path / "p.yaml", d))
    assert msg.startswith(f"{tmp_path / 'p.yaml'}: {field} = None")
    assert f"add '{field}:" in msg and "no default" in msg


def test_study_without_kv_tiers_is_refused(tmp_path: Path) -> None:
    d = _study()
    del d["kv_tiers"]
    msg = _error(load_study, _write(tmp_path / "s.yaml", d))
    assert ": kv_tiers = None" in msg and "add 'kv_tiers:" in msg


@pytest.mark.parametrize(("version", "fix"), [(3, "upgrade ctxplan"), (0, "version: 2"),
                                             ("2", "version: 2"), (True, "version: 2")])
def test_unsupported_version(tmp_path: Path, version: Any, fix: str) -> None:
    msg = _error(load_study, _write(tmp_path / "s.yaml", _study(version=version)))
    assert "version" in msg and fix in msg


def test_point_files_stay_at_version_1(tmp_path: Path) -> None:
    assert load_point(_write(tmp_path / "p.yaml", _point())).cp == 2
    msg = _error(load_point, _write(tmp_path / "p.yaml", _point(version=2)))
    assert "version 1" in msg and "upgrade ctxplan" in msg


def test_a_version_1_study_says_how_to_migrate(tmp_path: Path) -> None:
    """Version 2 changed what a bare number and a missing TP field mean: a version-1 study is
    refused with the changes this file needs, never read with the new meaning."""
    old = _study(version=1, sla={"tpot_max": 0.02, "ttft_max": 30})
    msg = _error(load_study, _write(tmp_path / "s.yaml", old))
    assert "version: 2" in msg and "Migrating" in msg
    assert "sla.tpot_max" in msg and "write 20ms" in msg
    assert "sla.ttft_max" in msg and "write 30s" in msg
    assert "'prefill_tp: 1'" in msg and "'decode_tp: 1'" in msg
    # Units given and TP stated: only the version number is left to change.
    tidy = _study(version=1, sla={"tpot_max": "20ms"}, prefill_tp=1, decode_tp=1)
    msg = _error(load_study, _write(tmp_path / "t.yaml", tidy))
    assert "version: 2" in msg and "sla." not in msg and "_tp" not in msg
    tidy["version"] = 2
    assert load_study(_write(tmp_path / "t.yaml", tidy)).prefill_tp == 1


@pytest.mark.parametrize("value", [20, 0.02, "20"])
def test_a_time_without_a_unit_is_refused(tmp_path: Path, value: Any) -> None:
    msg = _error(load_study, _write(tmp_path / "s.yaml", _study(sla={"tpot_max": value})))
    assert "sla.tpot_max" in msg and f"{value}ms" in msg
    msg = _error(load_study, _write(tmp_path / "s.yaml", _study(sla={"ttft_max": value})))
    assert "sla.ttft_max" in msg and f"{value}s" in msg


# ---------------------------------------------------------------------------- --set and flags


def test_parse_set_values_are_yaml_scalars() -> None:
    assert parse_set("chip.memory_gb=96") == (["chip", "memory_gb"], 96)
    assert parse_set("sla.tpot_max=30ms") == (["sla", "tpot_max"], "30ms")
    assert parse_set("contexts=[8K, 1M]") == (["contexts"], ["8K", "1M"])
    assert parse_set("chip.memory_gb=1e3") == (["chip", "memory_gb"], 1000.0)
    assert parse_set("sla.ttft_max=null") == (["sla", "ttft_max"], None)
    assert parse_set("a=b=c") == (["a"], "b=c")


def test_set_overrides_file_and_flags(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", _study(batch=2))
    s = load_study(f, flags={"batch": 4, "sla.tpot_max": "40ms"},
                   sets=["batch=8", "model.num_key_value_heads=1", "sla.ttft_max=2s"])
    assert s.batch == 8                      # --set applies after the flags
    assert s.tpot_max == "40ms"              # the flag overrides the file's default
    assert s.ttft_max == "2s" and s.model.num_key_value_heads == 1


def test_flags_override_the_file(tmp_path: Path) -> None:
    f = _write(tmp_path / "p.yaml", _point(cp=2, batch=1))
    p = load_point(f, flags={"cp": 4, "batch": 2, "chip": "h200"})
    assert (p.cp, p.batch, p.chip.name) == (4, 2, "h200")


def test_set_into_a_preset_expands_it(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", _study())
    base = load_study(f)
    s = load_study(f, sets=["chip.memory_gb=96", "cluster.levels.0.bandwidth_gbps=100"])
    assert s.chip.memory_bytes == 96 * 10**9 != base.chip.memory_bytes
    assert s.chip.name == "h100-sxm-custom"
    assert s.chip.peak_flops_per_s == base.chip.peak_flops_per_s
    assert s.cluster is not None and base.cluster is not None
    assert s.cluster.levels[0].bandwidth_bytes_per_s == 100e9
    assert s.cluster.levels[1:] == base.cluster.levels[1:]
    m = load_study(_write(tmp_path / "m.yaml", _study(model="llama3.1-8b")),
                   sets=["model.num_key_value_heads=1"]).model
    assert m.num_key_value_heads == 1 and m.num_hidden_layers == 32


def test_set_without_a_file_uses_the_flags(tmp_path: Path) -> None:
    model = _write(tmp_path / "tiny.yaml", TINY_MODEL)
    s = load_study(None, flags={"model": str(model), "chip": "h100-sxm", "contexts": "1K"},
                   sets=["chip.memory_gb=40"])
    assert s.kv_tiers == () and s.contexts == (1024,) and s.chip.memory_bytes == 40 * 10**9


@pytest.mark.parametrize(("assignment", "words"), [
    ("nope=1", ["unknown field 'nope'"]),
    ("bach=2", ["did you mean 'batch'"]),
    ("batch.x=3", ["holds a single value"]),
    ("cluster.levels.7.latency_us=3", ["no such list item"]),
    ("cluster.levels.x.latency_us=3", ["no such list item"]),
    ("chip.memory_gbx=3", ["memory_gbx", "unknown key"]),
    ("batch", ["no '='"]),
    ("=3", ["empty path"]),
    ("chip..memory_gb=3", ["empty path"]),
    ("sla.tpot_max=nan", ["sla.tpot_max", "give a time"]),
    ("sla.tpot_max=20", ["sla.tpot_max", "20ms"]),
    ("sla.tpot_max=.inf", ["sla.tpot_max", "finite"]),
    ("batch=[1", ["cannot parse"]),
    ("batch=*x", ["cannot parse"]),
    ("model=!!python/object/apply:os.system [echo]", ["cannot parse"]),
    ("chip.memory_gb=-5", ["memory_gb"]),
    ("chip=no-such-chip", ["unknown chip preset"]),
])
def test_bad_set_is_one_line(tmp_path: Path, assignment: str, words: list[str]) -> None:
    msg = _error(load_study, _write(tmp_path / "s.yaml", _study()), sets=[assignment])
    for w in words:
        assert w in msg, msg


# ------------------------------------------------------------------- inline and relative paths


def test_inline_chip_and_cluster(tmp_path: Path) -> None:
    raw = yaml.safe_load((EXAMPLES / "study-custom-chip.yaml").read_text())
    s = load_study(_write(tmp_path / "s.yaml", raw))
    assert s.chip.name == "my-accelerator" and s.chip.memory_bytes == 64 * 10**9
    assert s.cluster is not None and s.cluster.name == "my-cluster"
    assert s.cluster.max_chips == 64 and s.model.num_key_value_heads == 1
    del raw["chip"]["name"]
    assert load_study(_write(tmp_path / "s.yaml", raw)).chip.name == "custom-chip"


def test_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "defs").mkdir()
    _write(tmp_path / "defs" / "m.yaml", TINY_MODEL)
    chip = yaml.safe_load((ROOT / "src/ctxplan/config/presets/chips/h200.yaml").read_text())
    chip["name"] = "from-file"
    _write(tmp_path / "defs" / "c.yaml", chip)
    (tmp_path / "studies").mkdir()
    f = _write(tmp_path / "studies" / "s.yaml", _study(model="../defs/m.yaml",
                                                      chip="../defs/c.yaml"))
    s = load_study(f)
    assert s.model.name == "tiny" and s.chip.name == "from-file"


def test_hf_config_inline(tmp_path: Path) -> None:
    cfg = json.loads((ROOT / "tests/data/hf-configs/deepseek-ai--DeepSeek-V3.json").read_text())
    s = load_study(_write(tmp_path / "s.yaml", _study(model=cfg, kv_tiers="default")))
    assert s.model.num_hidden_layers == cfg["num_hidden_layers"] == 61
    assert s.model.mla is not None and s.model.mla.kv_lora_rank == cfg["kv_lora_rank"]


# ------------------------------------------------------------------------------ JSON Schema


@pytest.mark.parametrize("kind", ["study", "point"])
def test_json_schema(kind: str) -> None:
    schema = json_schema(kind)
    json.dumps(schema, allow_nan=False)
    props = schema["properties"]
    assert "version" in schema["required"]
    assert ("kv_tiers" if kind == "study" else "kv_tier") in schema["required"]
    if kind == "point":
        assert "cp" in schema["required"]
    assert schema["additionalProperties"] is False
    refs = {o.get("$ref") for o in props["chip"]["anyOf"]}
    assert "#/$defs/ChipSchema" in refs
    assert "memory_gb" in schema["$defs"]["ChipSchema"]["properties"]
    assert "EfficiencySchema" in schema["$defs"] and "LevelSchema" in schema["$defs"]
    assert "num_key_value_heads" in schema["$defs"]["ModelFile"]["properties"]


def test_json_schema_accepts_the_examples() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    for path, kind in ((EXAMPLES / "study-deepseek-1m.yaml", "study"),
                       (EXAMPLES / "study-custom-chip.yaml", "study"),
                       (EXAMPLES / "point-deepseek-1m-decode.yaml", "point")):
        jsonschema.validate(yaml.safe_load(path.read_text()), json_schema(kind))


def test_json_schema_unknown_kind() -> None:
    assert "kind" in _error(json_schema, "sweep")


# ------------------------------------------------------------------------------- through the CLI




def test_cli_flags_override_the_point_file(tmp_path: Path) -> None:
    f = _write(tmp_path / "p.yaml", _point(cp=2, batch=1))
    code, out, err = run_cli(["eval", "--config", str(f), "--json"])
    assert code == 0, err
    base = json.loads(out)
    code, out, err = run_cli(["eval", "--config", str(f), "--cp", "4", "--phase", "prefill",
                           "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert (base["cp"], base["phase"], d["cp"], d["phase"]) == (2, "decode", 4, "prefill")
    assert d["batch"] == base["batch"] == 1   # an untyped flag's default does not override


def test_cli_flags_override_the_study_file(tmp_path: Path) -> None:
    f = _write(tmp_path / "s.yaml", _study(batch=2, contexts=["1K", "4K"]))
    code, out, err = run_cli(["solve", "--config", str(f), "--context", "2K", "--kv-tiers",
                           "kv-fp8", "--tpot-max", "50ms", "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["context_length"] == 2048 and d["batch"] == 2
    assert [t["kv_tier"] for t in d["tiers"]] == ["kv-fp8"]
    assert d["sla"]["tpot_max_s"] == pytest.approx(0.05)


def test_cli_set_without_a_file() -> None:
    code, out, err = run_cli(["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context",
                           "1K", "--phase", "decode", "--cp", "1", "--set", "chip.memory_gb=96",
                           "--set", "batch=2", "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["chip"] == "h100-sxm-custom" and d["batch"] == 2
    assert d["memory"]["capacity_bytes"] == 96 * 10**9
    code, _, err = run_cli(["eval", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context",
                         "1K", "--phase", "decode", "--set", "batch=2"])
    assert code == 2 and err.startswith("error: --cp = None: required option missing")
