"""Every kind of bad input the issue lists, tried one by one through the CLI: one stderr line
naming the field and the fix, exit 2, no traceback. Nothing in a file is ever executed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import Run, check_contract, run_cli
from tests.helpers.inputs import TINY_MODEL, point_data, study_data, write_yaml


def _failed(r: Run, *words: str) -> str:
    check_contract(r)
    assert r.code == 2, f"expected exit 2 for {r.argv}, got {r.code}: {r.out[:300]}"
    line = r.err.strip()
    assert "Fix:" in line or "see `ctxplan" in line, line
    for w in words:
        assert w in line, f"{w!r} not in: {line}"
    return line


def _point(tmp: Path, **over: Any) -> Path:
    d = point_data()
    for k, v in over.items():
        if v is _DROP:
            del d[k]
        else:
            d[k] = v
    return write_yaml(tmp / "point.yaml", d)


def _study(tmp: Path, **over: Any) -> Path:
    d = study_data()
    for k, v in over.items():
        if v is _DROP:
            del d[k]
        else:
            d[k] = v
    return write_yaml(tmp / "study.yaml", d)


_DROP = object()


def _eval(path: Path, *extra: str) -> Run:
    return run_cli(["eval", "--config", str(path), "--json", *extra])


def _solve(path: Path, *extra: str) -> Run:
    return run_cli(["solve", "--config", str(path), "--json", *extra])


# ------------------------------------------------------------------------------ file content


def test_valid_files_pass(tmp_path: Path) -> None:
    r = _eval(_point(tmp_path))
    check_contract(r)
    assert r.code == 0 and json.loads(r.out)["tpot_s"] > 0
    r = _solve(_study(tmp_path))
    check_contract(r)
    assert r.code == 0 and [p["context_length"] for p in json.loads(r.out)["points"]] == \
        [1024, 3000]


@pytest.mark.parametrize(("over", "words"), [
    ({"colour": "red"}, ["colour", "unknown key"]),
    ({"phase": "both"}, ["phase"]),
    ({"batch": "two"}, ["batch", "integer"]),
    ({"batch": 2.5}, ["batch"]),
    ({"batch": True}, ["batch"]),
    ({"batch": 0}, ["batch", "greater than or equal to 1"]),
    ({"batch": float("nan")}, ["batch"]),
    ({"cp": -4}, ["cp"]),
    ({"cp": 0}, ["cp"]),
    ({"cp": 64}, ["cp", "exceeds the cluster's 16"]),
    ({"cp": 10**30}, ["cp"]),
    ({"tp": 3}, ["tp", "divide"]),
    ({"context": 0}, ["context", "at least 1 token"]),
    ({"context": 10**12}, ["context", "at most 2G"]),
    ({"context": float("inf")}, ["context"]),
    ({"context": "nan"}, ["context"]),
    ({"kv_tier": "mla-bf16"}, ["kv_tier", "unknown KV tier for tiny"]),
    ({"kv_tier": -700}, ["kv_tier"]),
    ({"kv_tier": float("nan")}, ["kv_tier"]),
    ({"model": "no-such-model"}, ["model", "unknown model"]),
    ({"model": {**TINY_MODEL, "hidden_size": 0}}, ["model: hidden_size"]),
    ({"model": {**TINY_MODEL, "hidden_size": -256}}, ["model: hidden_size"]),
    ({"model": {**TINY_MODEL, "num_hidden_layers": 10**9}}, ["num_hidden_layers"]),
    ({"model": {**TINY_MODEL, "num_key_value_heads": 3}}, ["num_key_value_heads"]),
    ({"model": {**TINY_MODEL, "vocab_size": "big"}}, ["vocab_size"]),
    ({"chip": {"memory_gb": 80}}, ["chip", "required field missing"]),
    ({"cluster": {"levels": []}}, ["cluster"]),
    ({"event_limit": 0}, ["event_limit"]),
    ({"version": 2}, ["version", "upgrade ctxplan"]),
    ({"version": _DROP}, ["version", "add 'version: 1'"]),
    ({"cp": _DROP}, ["cp", "add 'cp:", "no default"]),
    ({"kv_tier": _DROP}, ["kv_tier", "add 'kv_tier:", "no default"]),
    ({"model": _DROP}, ["model", "missing"]),
])
def test_bad_point_field(tmp_path: Path, over: dict[str, Any], words: list[str]) -> None:
    _failed(_eval(_point(tmp_path, **over)), *words)


def test_bad_inline_chip_values(tmp_path: Path) -> None:
    base = {"name": "c", "peak_tflops": {"bf16": 100, "fp8": 200}, "memory_gb": 80,
            "memory_bandwidth_gbps": 2000, "op_overhead_us": 5, "reserved_memory_gb": 4,
            "efficiency": {"matmul": 0.7, "attention": 0.5, "memory": 0.8},
            "default_cluster": "hgx-h100-ib", "source": "test", "verified": False}
    assert _eval(_point(tmp_path, chip=base)).code == 0
    for field, value in (("memory_gb", -80), ("memory_gb", 0), ("memory_gb", float("inf")),
                         ("memory_gb", 1e300), ("memory_bandwidth_gbps", float("nan")),
                         ("op_overhead_us", -1), ("memory_gb", "80GB")):
        _failed(_eval(_point(tmp_path, chip={**base, field: value})), field)
    _failed(_eval(_point(tmp_path, chip={**base, "peak_tflops": {"bf16": 1e300, "fp8": 1}})),
            "peak_tflops")
    _failed(_eval(_point(tmp_path, chip={**base, "efficiency": {"matmul": 1e-300,
                                                              "attention": 1, "memory": 1}})),
            "efficiency.matmul")


def test_bad_study_fields(tmp_path: Path) -> None:
    _failed(_solve(_study(tmp_path, kv_tiers=_DROP)), "kv_tiers", "no default")
    _failed(_solve(_study(tmp_path, context="1M")), "did you mean 'contexts'")
    _failed(_solve(_study(tmp_path, contexts=[])), "contexts")
    _failed(_solve(_study(tmp_path, contexts=["1K", 0])), "contexts", "at least 1 token")
    _failed(_solve(_study(tmp_path, contexts=10**12)), "contexts", "at most 2G")
    _failed(_solve(_study(tmp_path, sla={"tpot_max": float("nan")})), "sla.tpot_max")
    _failed(_solve(_study(tmp_path, sla={"tpot_max": float("inf")})), "sla.tpot_max")
    _failed(_solve(_study(tmp_path, sla={"tpot_max": "-5ms"})), "sla.tpot_max")
    _failed(_solve(_study(tmp_path, sla={"tpot": "5ms"})), "sla.tpot", "unknown key")
    _failed(_solve(_study(tmp_path, kv_tiers=["kv-bf16", "mla-fp8"])), "kv_tier", "mla-fp8")
    _failed(_solve(_study(tmp_path, max_chips=5000)), "max_chips")
    _failed(_solve(_study(tmp_path, strategy="bisect")), "strategy")
    _failed(_solve(_study(tmp_path, prefill_tp=0)), "prefill_tp")
    _failed(_solve(_study(tmp_path, batch=0)), "batch")


def test_unsupported_hf_architecture(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
                               "n_layer": 12, "n_embd": 768}))
    _failed(_eval(_point(tmp_path, model="config.json")), "model_type", "gpt2")
    _failed(_eval(_point(tmp_path, model={"model_type": "mamba", "hidden_size": 1})),
            "model_type", "mamba")


# ------------------------------------------------------------------------------ file as file


def test_empty_binary_directory_missing_and_huge(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    _failed(_eval(empty), "config", "empty file")
    blank = tmp_path / "blank.yaml"
    blank.write_text("\n  \n# only a comment\n")
    check_contract(_eval(blank))
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(bytes(range(256)) * 4)
    _failed(_eval(binary), "config", "binary file")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("model: caf\xe9\n".encode("latin-1"))
    _failed(_eval(latin), "config", "UTF-8")
    (tmp_path / "dir.yaml").mkdir()
    _failed(_eval(tmp_path / "dir.yaml"), "config", "is a directory")
    _failed(_eval(tmp_path / "missing.yaml"), "config", "no such file")
    huge = tmp_path / "huge.yaml"
    huge.write_text("version: 1\nnotes: '" + "x" * (5 * 2**20) + "'\n")
    _failed(_eval(huge), "config", "too large")
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 20000 + "]" * 20000 + "\n")
    _failed(_eval(deep), "config")
    listing = tmp_path / "list.yaml"
    listing.write_text("- version: 1\n")
    _failed(_eval(listing), "config", "not a mapping")
    syntax = tmp_path / "syntax.yaml"
    syntax.write_text("version: 1\nmodel: [unclosed\n")
    _failed(_eval(syntax), "config", "cannot parse")


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    _failed(_eval(bomb), "config", "aliases")
    _failed(_solve(bomb), "config", "aliases")


def test_python_tags_are_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    for text in (f'!!python/object/apply:os.system ["touch {marker}"]\n',
                 f'version: 1\nmodel: !!python/object/apply:os.system ["touch {marker}"]\n',
                 "version: 1\nmodel: !!python/name:os.system\n",
                 "version: 1\nmodel: !!python/object:collections.OrderedDict {}\n"):
        f = tmp_path / "evil.yaml"
        f.write_text(text)
        _failed(_eval(f), "config", "cannot parse")
        _failed(run_cli(["eval", "--config", str(_point(tmp_path)), "--set",
                         f"model=!!python/object/apply:os.system [touch {marker}]"]),
                "cannot parse")
    assert not marker.exists()


# ---------------------------------------------------------------------------- command line


@pytest.mark.parametrize(("args", "words"), [
    (["--cp", "nan"], ["--cp"]),
    (["--cp", "-1"], ["cp"]),
    (["--batch", "nan"], ["--batch"]),
    (["--batch", "0"], ["batch"]),
    (["--context", "nan"], ["context"]),
    (["--context", "inf"], ["context"]),
    (["--context", "0"], ["context"]),
    (["--context", "1000000000000"], ["context", "at most 2G"]),
    (["--kv-tier", "nan"], ["kv_tier"]),
    (["--kv-tier", "kv-int3"], ["kv_tier"]),
    (["--event-limit", "0"], ["event_limit"]),
    (["--set", "batch=nan"], ["batch"]),
    (["--set", "nope=1"], ["unknown field 'nope'"]),
    (["--set", "model.hidden_size=-1"], ["hidden_size"]),
    (["--set", "model.colour=red"], ["colour", "unknown key"]),
    (["--set", "cluster.levels.9.latency_us=1"], ["no such list item"]),
    (["--set", "batch"], ["no '='"]),
    (["--cp", "64"], ["cp", "exceeds"]),
    (["--trace", "/nonexistent-dir/t.json"], ["trace", "no such directory"]),
    (["--bogus"], ["--bogus"]),
    (["--set", "a\nb\r\u2028c=1"], ["unknown field"]),      # line breaks in what is echoed
    (["--set", "model=x\ny"], ["model"]),
    (["--kv-tier", "kv\nbf16"], ["kv_tier"]),
])
def test_bad_eval_flags(tmp_path: Path, args: list[str], words: list[str]) -> None:
    _failed(_eval(_point(tmp_path), *args), *words)


@pytest.mark.parametrize(("args", "words"), [
    (["--tpot-max", "nan"], ["tpot_max"]),
    (["--tpot-max", "inf"], ["tpot_max"]),
    (["--ttft-max", "0"], ["ttft_max"]),
    (["--max-chips", "0"], ["max_chips"]),
    (["--kv-tiers", "kv-bf16,mla-bf16"], ["kv_tier"]),
    # --contexts is solve's other spelling of --context (issue 21): given with it, it is refused
    (["--contexts", "1K", "--context", "2K"], ["given twice", "--contexts is another spelling"]),
    (["--set", "sla.tpot_max=-1ms"], ["sla.tpot_max"]),
])
def test_bad_solve_flags(tmp_path: Path, args: list[str], words: list[str]) -> None:
    _failed(_solve(_study(tmp_path), *args), *words)


def test_missing_required_options_without_a_file() -> None:
    _failed(run_cli(["eval", "--chip", "h100-sxm"]), "--model", "--config")
    _failed(run_cli(["solve", "--model", "llama3.1-8b", "--chip", "h100-sxm"]), "--context")
    _failed(run_cli(["sweep", "--model", "llama3.1-8b"]), "--chip")


@pytest.mark.skipif(shutil.which("ctxplan") is None, reason="console script not installed")
def test_no_traceback_from_the_installed_script(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text('a: &a ["x", "x"]\nb: [*a, *a]\n')
    for args in (["eval", "--config", str(bomb)],
                 ["solve", "--config", str(_study(tmp_path)), "--tpot-max", "nan"]):
        proc = subprocess.run([shutil.which("ctxplan") or "ctxplan", *args],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr and proc.stdout == ""
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ")
