"""Issue 27's chips and clusters: rack-scale NVLink domains, FP4, board power, the h20 alias."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ctxplan.config import hardware_presets
from ctxplan.config.hardware_presets import (
    chip_names,
    cluster_from_dict,
    hardware_definition,
    load_chip,
    load_cluster,
)
from ctxplan.errors import UserInputError
from ctxplan.mapping.layout import Precision
from ctxplan.model.dtypes import bytes_per_param
from ctxplan.solve.candidates import candidate_ns

PRESETS = Path(hardware_presets.__file__).parent / "presets"


def _raw(kind: str, name: str) -> dict[str, Any]:
    data = yaml.safe_load((PRESETS / kind / f"{name}.yaml").read_text())
    assert isinstance(data, dict)
    return data


def test_h20_is_an_alias_of_the_96_gb_part() -> None:
    assert load_chip("h20") == load_chip("H20") == load_chip("h20-96")
    assert load_chip("h20").name == "h20-96" and load_chip("h20").memory_bytes == 96e9
    assert hardware_definition("chip", "h20")["name"] == "h20-96"
    big = load_chip("h20-141")
    assert (big.memory_bytes, big.memory_bandwidth_bytes_per_s) == (141e9, 4.8e12)
    assert dict(big.peak_flops_per_s) == dict(load_chip("h20-96").peak_flops_per_s)
    assert load_cluster(big.default_cluster).chip == "h20-141"


@pytest.mark.parametrize("name", chip_names())
def test_every_chip_preset_states_its_power_with_a_source(name: str) -> None:
    raw = _raw("chips", name)
    assert "tdp_w" in raw and raw["notes"]["tdp_w"].strip()
    assert load_chip(name).tdp_w == raw["tdp_w"]


def test_board_power_figures() -> None:
    watts = {n: load_chip(n).tdp_w for n in chip_names()}
    assert watts["sg2262"] is None   # no published figure: power is "unknown"
    assert (watts["b300"], watts["gb200"], watts["gb300"], watts["h20-141"]) == (
        1100, 1200, 1400, 500)
    assert (watts["h100-sxm"], watts["h200"], watts["b200"]) == (700, 700, 1000)


def test_fp4_peaks_where_the_chip_has_fp4_tensor_cores() -> None:
    fp4 = {n: load_chip(n).peak_flops_per_s.get("fp4") for n in chip_names()}
    assert {n for n, v in fp4.items() if v} == {"b200", "b300", "gb200", "gb300"}
    assert (fp4["b200"], fp4["b300"], fp4["gb200"], fp4["gb300"]) == (9e15, 13.5e15, 10e15,
                                                                      15e15)
    # Blackwell Ultra: no INT8 peak listed (cut sharply against B200)
    assert "int8" not in load_chip("b300").peak_flops_per_s


@pytest.mark.parametrize("name", ["b300", "gb200", "gb300", "h20-96", "h20-141"])
def test_secondary_source_presets_are_unverified(name: str) -> None:
    chip = load_chip(name)
    assert not chip.verified and not load_cluster(chip.default_cluster).verified


def test_fp4_weights_compute_at_fp4_where_the_chip_has_it_else_bf16() -> None:
    for storage in ("mxfp4", "nvfp4"):
        p = Precision(attention_weights="bf16", ffn_weights=storage)
        assert p.on_chip(load_chip("gb300").peak_flops_per_s).matmul_dtype(storage) == "fp4"
        assert p.on_chip(load_chip("h20-96").peak_flops_per_s).matmul_dtype(storage) == "bf16"
    # NVFP4: 16 E2M1 values and one E4M3 scale; MXFP4: 32 values and one E8M0 scale
    assert bytes_per_param("nvfp4") == 4.5 / 8 and bytes_per_param("mxfp4") == 4.25 / 8


@pytest.mark.parametrize("name", ["gb200-nvl72", "gb300-nvl72"])
def test_an_nvl72_rack_is_one_uniform_72_gpu_nvlink_level(name: str) -> None:
    k = load_cluster(name)
    rack, out = k.levels
    assert (rack.chips_per_group, rack.fabric, rack.bandwidth_bytes_per_s) == (72, "switch",
                                                                                900e9)
    assert out.chips_per_group % 72 == 0 and out.bandwidth_bytes_per_s < rack.bandwidth_bytes_per_s
    # any two GPUs of a rack meet at its NVLink level, the next rack over the scale-out NICs
    assert {k.level_of(0, j) for j in range(1, 72)} == {0} and k.level_of(0, 72) == 1
    assert (k.tp_max, k.candidate_group_size) == (8, 4)


def test_cluster_search_figures_default_and_validate() -> None:
    k = load_cluster("hgx-h100-ib")
    assert (k.tp_max, k.group_size, k.candidate_group_size) == (8, None, 8)
    base = _raw("clusters", "hgx-h100-ib")
    with pytest.raises(UserInputError, match="tp_max"):
        cluster_from_dict({**base, "tp_max": 0}, "x.yaml")
    assert cluster_from_dict({**base, "tp_max": 4, "group_size": 2}, "x.yaml").tp_max == 4


def test_the_tp_search_stops_at_tp_max_and_group_steps_by_trays() -> None:
    from ctxplan import api

    req = api.solve_request("llama3.1-8b", "gb300", "8K", candidates="group")
    assert [c.tp for c in req.tp_choices("decode")] == [1, 2, 3, 4, 6, 8]
    assert req.group_size == 4
    assert candidate_ns("group", 20, 1, req.group_size) == [4, 8, 12, 16, 20]
    narrow = api.solve_request("llama3.1-8b", "gb300", "8K",
                               cluster=cluster_from_dict({**_raw("clusters", "gb300-nvl72"),
                                                          "tp_max": 2}, "x.yaml"))
    assert [c.tp for c in narrow.tp_choices("prefill")] == [1, 2]


def test_search_figures_and_power_stay_out_of_a_points_key() -> None:
    from dataclasses import replace

    from ctxplan import api

    cfg = api.eval_config("llama3.1-8b", "h100-sxm", "8K", "decode", 1)
    other = replace(cfg, chip=replace(cfg.chip, tdp_w=1.0),
                    cluster=replace(cfg.cluster, tp_max=2, group_size=1))
    assert other.key() == cfg.key()
