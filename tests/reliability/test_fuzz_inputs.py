"""Hypothesis plays a hostile user: malformed study / point files (mutations of a valid one) and
argument lists mixing valid and invalid flag values.

The contract checked for every input: exit code 0 (only when the input happened to be valid) or
2; on 2, exactly one non-empty stderr line starting with "error:" and no traceback; never any
other exit code, exception or hang (each call has a time limit).
"""

from __future__ import annotations

import copy
import math
import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.cli import check_contract, run_cli
from tests.helpers.inputs import TINY_CLUSTER, TINY_MODEL, point_data, study_data, write_yaml

# CTXPLAN_FUZZ_EXAMPLES=2000 hunts with fresh random examples; the default is a fixed, quick set.
_HUNT = int(os.environ.get("CTXPLAN_FUZZ_EXAMPLES", "0"))
FUZZ = settings(max_examples=_HUNT or 60, deadline=None, derandomize=not _HUNT, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

# Values that replace a field: wrong types, negative, zero, NaN, infinities, huge, tiny, texts
# that look like numbers, and a few valid-looking ones.
BAD_VALUES: list[Any] = [
    None, True, False, "", " ", "abc", "nan", "inf", "-inf", ".nan", "1e400", "0x10", "-8K",
    "8K", "1M", "10G", "20ms", "1.5s", "custom-x", [], [1, 2], {}, {"a": 1}, 0, 0.0, -1, -1.5,
    1, 2, 3, 7, 0.5, 1e-300, math.nan, math.inf, -math.inf, 2**31, 2**31 + 1, 2**63, 10**12,
    10**100, 1e300, -(10**30),
]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key / index path in a nested mapping (mappings and lists)."""
    out: list[tuple[Any, ...]] = []
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    for k, v in items:
        out.append((*prefix, k))
        out.extend(_paths(v, (*prefix, k)))
    return out


def _parent(root: Any, path: tuple[Any, ...]) -> Any:
    node = root
    for k in path[:-1]:
        node = node[k]
    return node


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> Any:
    data = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 2))):
        paths = _paths(data)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _parent(data, path)
        kind = draw(st.sampled_from(["drop", "unknown", "replace", "replace", "replace"]))
        if kind == "drop":
            if isinstance(parent, dict):
                del parent[path[-1]]
            else:
                parent.pop(path[-1])
        elif kind == "unknown":
            target = parent if isinstance(parent, dict) else data
            target[draw(st.sampled_from(["colour", "cp_degree", "Version", "memory", "x"]))] = 1
        else:
            parent[path[-1]] = copy.deepcopy(draw(st.sampled_from(BAD_VALUES)))
    if draw(st.integers(0, 19)) == 0:  # now and then the whole file is something else
        return draw(st.sampled_from([[data], "just text", 42, None]))
    return data


@FUZZ
@given(data=mutated(point_data()))
def test_mutated_point_files(tmp_path: Path, data: Any) -> None:
    path = write_yaml(tmp_path / "point.yaml", data)
    check_contract(run_cli(["eval", "--config", str(path), "--json"]))


@FUZZ
@given(data=mutated(study_data()))
def test_mutated_study_files(tmp_path: Path, data: Any) -> None:
    path = write_yaml(tmp_path / "study.yaml", data)
    check_contract(run_cli(["solve", "--config", str(path), "--json"]))


# ------------------------------------------------------------------------------ argument lists

def _flag_values(tmp: Path) -> dict[str, list[str]]:
    model = str(write_yaml(tmp / "tiny.yaml", TINY_MODEL))
    cluster = str(write_yaml(tmp / "tiny-cluster.yaml", TINY_CLUSTER))
    point = str(write_yaml(tmp / "point.yaml", point_data()))
    study = str(write_yaml(tmp / "study.yaml", study_data()))
    (tmp / "a-dir").mkdir(exist_ok=True)
    nums = ["1", "2", "3", "0", "-1", "nan", "inf", "abc", "1.5", "99999999999999999999"]
    return {
        "--model": [model, model, "llama3.1-8b", "nope", "", "nan", str(tmp / "a-dir"), point],
        "--chip": ["h100-sxm", "h100-sxm", "sg2262", "x", "", cluster, str(tmp / "none.yaml")],
        "--cluster": [cluster, cluster, "hgx-h100-ib", "x", model],
        "--context": ["1K", "3000", "4K", "0", "-1", "nan", "inf", "1e400", "10G", "1.5K", "8K,1M"],
        "--contexts": ["1K,4K", "1K", "", ",", "0,1K", "nan", "1K,,4K"],
        "--phase": ["prefill", "decode", "both", ""],
        "--cp": nums, "--tp": nums, "--batch": nums, "--group-size": nums,
        "--max-chips": ["1", "4", "8", "0", "-1", "nan", "5000"],
        "--prefill-tp": nums, "--decode-tp": nums,
        "--event-limit": ["1", "10", "100000", "0", "-1", "nan"],
        "--kv-tier": ["kv-bf16", "kv-fp8", "mla-bf16", "700", "0", "-1", "nan", "inf",
                      "custom-700", "custom-x", "1e400", ""],
        "--kv-tiers": ["kv-bf16,kv-fp8", "kv-fp8", ",", "x", "700,nan", "default"],
        "--tpot-max": ["20ms", "1s", "nan", "inf", "0", "-1ms", "1e-300", "1us", "fast"],
        "--ttft-max": ["30s", "nan", "0", "1e400", "1us"],
        "--tps-reading": ["per-seq", "per-batch", "per-token"],
        "--strategy": ["galloping", "linear", "bisect"],
        "--candidates": ["all", "pow2", "group", "odd"],
        "--mla-mode": ["standard", "absorbed", "x"],
        "--set": ["batch=2", "sla.tpot_max=30ms", "chip.memory_gb=96", "chip.memory_gb=nan",
                  "chip.memory_gb=1e300", "nope=1", "batch", "=1", "model.num_hidden_layers=0",
                  "cluster.levels.5.latency_us=1", "cp=2", "kv_tier=x", "contexts=[1K]",
                  "version=2", "model.hidden_size=-1", "batch.x=1"],
        "--config": [point, study, str(tmp / "missing.yaml"), str(tmp / "a-dir"), model],
        "--trace": [str(tmp / "t.json"), str(tmp / "a-dir"), str(tmp / "no" / "t.json")],
        "--store": [str(tmp / "store.sqlite"), str(tmp / "a-dir"), str(tmp / "no" / "s.sqlite"),
                    point],
        "--out": [str(tmp / "o.csv"), str(tmp / "o.json"), str(tmp / "o.txt"),
                  str(tmp / "no" / "o.csv"), str(tmp / "a-dir")],
    }


COMMAND_FLAGS = {
    "eval": ["--model", "--chip", "--cluster", "--context", "--phase", "--cp", "--tp",
             "--batch", "--kv-tier", "--mla-mode", "--event-limit", "--set", "--config",
             "--trace"],
    "solve": ["--model", "--chip", "--cluster", "--context", "--tpot-max", "--ttft-max",
              "--kv-tiers", "--batch", "--strategy", "--candidates", "--group-size",
              "--prefill-tp", "--decode-tp", "--tps-reading", "--event-limit", "--set",
              "--config", "--store"],
    "sweep": ["--model", "--chip", "--contexts", "--kv-tiers", "--batch", "--tpot-max",
              "--strategy", "--event-limit", "--set", "--config", "--out", "--store"],
}


@st.composite
def argv(draw: st.DrawFn, values: dict[str, list[str]]) -> list[str]:
    command = draw(st.sampled_from(sorted(COMMAND_FLAGS)))
    args = [command]
    flags = draw(st.lists(st.sampled_from(COMMAND_FLAGS[command]), max_size=9))
    if command in ("solve", "sweep"):
        # a bound on the pools keeps every valid solve to small simulations
        args += ["--max-chips", draw(st.sampled_from(values["--max-chips"]))]
    if command == "sweep":  # in this process: worker start-up would dominate the budget
        args += ["--backend", draw(st.sampled_from(["serial", "serial", "serial", "nope"]))]
    for flag in flags:
        args += [flag, draw(st.sampled_from(values[flag]))]
    extra = draw(st.sampled_from([[], [], ["--json"], ["--json"], ["--timings"], ["--nope"],
                                  ["stray"], ["--cp"], ["--json", "--json"]]))
    return args + extra


@FUZZ
@given(data=st.data())
def test_random_argument_lists(tmp_path: Path, data: st.DataObject) -> None:
    values = _flag_values(tmp_path)
    check_contract(run_cli(data.draw(argv(values))))


# ----------------------------------------------------------------------------- raw text

_YAMLISH = st.sampled_from([*"abcxyz019.,:-_=[]{}&*!|>'\"#%@`?<~ \n\t\\",
                            "version", "cp", "chip", "model", "sla", "levels", ".nan", ".inf",
                            "!!python/object:os.system", "&a", "*a", "<<", "\x00", "\xe9"])


@FUZZ
@given(text=st.lists(_YAMLISH, max_size=40).map("".join), binary=st.binary(max_size=64),
       use_binary=st.booleans())
def test_arbitrary_file_text(tmp_path: Path, text: str, binary: bytes, use_binary: bool) -> None:
    path = tmp_path / "any.yaml"
    if use_binary:
        path.write_bytes(binary)
    else:
        path.write_text(text, encoding="utf-8")
    check_contract(run_cli(["eval", "--config", str(path)]))


@FUZZ
@given(sets=st.lists(st.lists(_YAMLISH, max_size=20).map("".join), min_size=1, max_size=3))
def test_arbitrary_set_text(tmp_path: Path, sets: list[str]) -> None:
    point = write_yaml(tmp_path / "point.yaml", point_data())
    argv = ["eval", "--config", str(point), "--json"]
    for text in sets:
        argv += ["--set", text]
    check_contract(run_cli(argv))
