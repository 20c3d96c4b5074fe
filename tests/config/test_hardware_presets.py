"""Chip and cluster presets: every one loads, carries a source, and bad files fail on one line."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ctxplan.config import hardware_presets
from ctxplan.config.hardware_presets import (
    chip_from_dict,
    chip_names,
    cluster_from_dict,
    cluster_names,
    load_chip,
    load_cluster,
)
from ctxplan.errors import UserInputError

PRESETS = Path(hardware_presets.__file__).parent / "presets"

EXPECTED_CHIPS = {"sg2262", "h100-sxm", "h100-gt500", "h800", "h200", "b200", "h20-96",
                  "b300", "gb200", "gb300", "h20-141"}
EXPECTED_CLUSTERS = {
    "sg2262-c2c", "hgx-h100-ib", "grand-teton-rdma", "grand-teton-tcp", "hgx-h800-ib",
    "hgx-h200-ib", "hgx-b200-ib", "hgx-h20-ib", "hgx-b300-ib", "gb200-nvl72", "gb300-nvl72",
    "hgx-h20-141-ib",
}


def _raw(kind: str, name: str) -> dict[str, Any]:
    data = yaml.safe_load((PRESETS / kind / f"{name}.yaml").read_text())
    assert isinstance(data, dict)
    return data


def test_the_expected_presets_exist() -> None:
    assert set(chip_names()) == EXPECTED_CHIPS
    assert set(cluster_names()) == EXPECTED_CLUSTERS
    assert chip_names() == sorted(chip_names())


@pytest.mark.parametrize("name", sorted(EXPECTED_CHIPS))
def test_every_chip_loads_with_a_source_and_its_default_cluster(name: str) -> None:
    chip = load_chip(name)
    assert chip.name == name
    assert chip.source.strip()
    assert {"bf16", "fp8"} <= set(chip.peak_flops_per_s)
    assert 0 < chip.usable_memory_bytes < chip.memory_bytes
    cluster = load_cluster(chip.default_cluster)
    assert cluster.max_chips >= 8
    assert _raw("chips", name)["name"] == name   # the file's name matches its file name


@pytest.mark.parametrize("name", sorted(EXPECTED_CLUSTERS))
def test_every_cluster_loads_with_a_source_and_its_chip(name: str) -> None:
    cluster = load_cluster(name)
    assert cluster.name == name
    assert cluster.source.strip()
    assert load_chip(cluster.chip).name == cluster.chip
    assert _raw("clusters", name)["name"] == name


def test_sg2262_is_unverified_and_carries_the_tier6_figures() -> None:
    chip = load_chip("sg2262")
    assert chip.verified is False
    assert load_cluster("sg2262-c2c").verified is False
    assert chip.peak_flops_per_s["bf16"] == pytest.approx(393.216e12)
    assert chip.peak_flops_per_s["fp8"] == pytest.approx(786.432e12)
    assert chip.memory_bytes == 128 * 10**9
    assert chip.memory_bandwidth_bytes_per_s == pytest.approx(8601.6e9)
    assert "Tier6" in chip.source


def test_units_are_converted_to_bytes_and_nanoseconds() -> None:
    cluster = load_cluster("sg2262-c2c")
    board = cluster.levels[0]
    assert (board.chips_per_group, board.fabric, board.latency_ns) == (8, "full_mesh", 200)
    assert board.bandwidth_bytes_per_s == pytest.approx(392e9)
    assert cluster.max_chips == 1024
    assert load_chip("h100-gt500").op_overhead_ns == round(
        _raw("chips", "h100-gt500")["op_overhead_us"] * 1000)
    tcp = load_cluster("grand-teton-tcp").levels[1]
    assert tcp.bandwidth_bytes_per_s * tcp.efficiency == pytest.approx(3e9)


def test_preset_names_are_case_insensitive() -> None:
    assert load_chip("SG2262") == load_chip("sg2262")
    assert load_cluster(" HGX-H100-IB ") == load_cluster("hgx-h100-ib")


def test_unknown_preset_lists_the_known_names_on_one_line() -> None:
    with pytest.raises(UserInputError) as info:
        load_chip("tpu-v9")
    message = str(info.value)
    assert "tpu-v9" in message and "sg2262" in message and "h100-sxm" in message
    assert "\n" not in message
    with pytest.raises(UserInputError, match="hgx-h100-ib"):
        load_cluster("nvl1000")


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_files_load_by_path_and_take_the_file_name(tmp_path: Path, suffix: str) -> None:
    data = _raw("chips", "h100-sxm")
    del data["name"]
    path = tmp_path / f"my-gpu{suffix}"
    path.write_text(json.dumps(data) if suffix == ".json" else yaml.safe_dump(data))
    chip = load_chip(str(path))
    assert chip.name == "my-gpu"
    assert chip.memory_bytes == 80 * 10**9
    cluster_path = tmp_path / "my-cluster.yml"
    cluster_path.write_text(yaml.safe_dump(_raw("clusters", "hgx-h100-ib")))
    assert load_cluster(str(cluster_path)).name == "hgx-h100-ib"


def test_a_missing_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="no such file"):
        load_chip(str(tmp_path / "nope.yaml"))


def test_inline_definitions_need_a_name() -> None:
    data = _raw("chips", "b200")
    del data["name"]
    assert chip_from_dict(data, "study.yaml: chip", name="b200-inline").name == "b200-inline"
    with pytest.raises(UserInputError) as info:
        chip_from_dict(data, "study.yaml: chip")
    assert "study.yaml: chip: name" in str(info.value)
    clusters = _raw("clusters", "sg2262-c2c")
    assert cluster_from_dict(clusters, "study.yaml: cluster").name == "sg2262-c2c"


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value


_DELETE = object()

BAD_CHIPS = [
    ("peak_tflop", 1.0, "peak_tflop"),                     # unknown key (typo)
    ("memory_bandwidth_gbps", -3350.0, "memory_bandwidth_gbps"),
    ("memory_gb", "eighty", "memory_gb"),                  # wrong type
    ("memory_gb", "80", "memory_gb"),                      # a quoted number is not a number
    ("verified", "yes", "verified"),                       # strict bool
    ("source", "   ", "source"),
    ("efficiency.matmul", 1.2, "efficiency.matmul"),
    ("efficiency.matmul.ceiling", 1.5, "efficiency.matmul"),
    ("efficiency.matmul.half_kv_tokens", 10.0, "efficiency.matmul"),   # attention's parameter
    ("efficiency.attention", {"half_kv_tokens": -1.0}, "efficiency.attention"),
    ("efficiency.attention", {"balance_bytes_per_flop": float("nan")}, "efficiency.attention"),
    ("calibrated", "no", "calibrated"),
    ("efficiency.memory", 0.0, "efficiency.memory"),
    ("efficiency.softmax", 0.5, "efficiency.softmax"),
    ("peak_tflops.bf61", 100.0, "peak_tflops"),
    ("peak_tflops.fp8", _DELETE, "peak_tflops"),
    ("peak_tflops.bf16", float("nan"), "peak_tflops.bf16"),
    ("memory_gb", float("inf"), "memory_gb"),
    ("reserved_memory_gb", 500.0, "reserved_memory_gb"),
    ("op_overhead_us", -1.0, "op_overhead_us"),
    ("notes.colour", "red", "notes"),
]


@pytest.mark.parametrize(("field", "value", "named"), BAD_CHIPS)
def test_malformed_chip_files_fail_on_one_line_naming_the_field(
    tmp_path: Path, field: str, value: Any, named: str
) -> None:
    data = copy.deepcopy(_raw("chips", "h100-gt500"))   # a file that gives every field
    _set(data, field, value)
    path = tmp_path / "bad-chip.json"                     # JSON keeps NaN / inf / quoted numbers
    path.write_text(json.dumps(data))
    with pytest.raises(UserInputError) as info:
        load_chip(str(path))
    message = str(info.value)
    assert named in message
    assert "\n" not in message
    assert str(path) in message


BAD_CLUSTERS = [
    ("levels.0.bandwdth_gbps", 1.0, "levels.0.bandwdth_gbps"),
    ("levels.1.bandwidth_gbps", -50.0, "levels.1.bandwidth_gbps"),
    ("levels.0.chips_per_group", 8.5, "levels.0.chips_per_group"),
    ("levels.0.fabric", "torus", "levels.0.fabric"),
    ("levels.0.efficiency", 1.5, "levels.0.efficiency"),
    ("levels.1.latency_us", 0, "levels.1.latency_us"),
    ("levels.1.op_overhead_us", -1.0, "levels.1.op_overhead_us"),
    ("levels.1.chips_per_group", 12, "levels"),           # 12 is not a multiple of 8
    ("levels.1.chips_per_group", 8, "levels"),            # not strictly increasing
    ("levels.1.name", "host", "levels"),                  # duplicate level name
    ("levels", [], "levels"),
    ("source", _DELETE, "source"),
    ("chip", 100, "chip"),
    ("all_to_all_peers_in_flight", -1, "all_to_all_peers_in_flight"),
    ("all_to_all_peers_in_flight", 2.5, "all_to_all_peers_in_flight"),
]


@pytest.mark.parametrize(("field", "value", "named"), BAD_CLUSTERS)
def test_malformed_cluster_files_fail_on_one_line_naming_the_field(
    tmp_path: Path, field: str, value: Any, named: str
) -> None:
    data = copy.deepcopy(_raw("clusters", "hgx-h100-ib"))
    _set(data, field, value)
    path = tmp_path / "bad-cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(UserInputError) as info:
        load_cluster(str(path))
    message = str(info.value)
    assert named in message
    assert "\n" not in message


# ------------------------------------------------------------- spec-sheet chips, the model


SPEC_SHEET_ONLY = {"peak_tflops": {"bf16": 148.0, "fp8": 296.0}, "memory_gb": 96.0,
                   "memory_bandwidth_gbps": 4000.0}


def test_a_spec_sheet_only_chip_loads_and_runs(tmp_path: Path) -> None:
    from ctxplan import api

    path = tmp_path / "my-h20.yaml"
    path.write_text(yaml.safe_dump(SPEC_SHEET_ONLY))
    chip = load_chip(str(path))
    assert chip.name == "my-h20" and not chip.calibrated and not chip.verified
    assert chip.calibration_notice() is not None
    assert str(path) in chip.source
    assert 0 < chip.reserved_memory_bytes < chip.memory_bytes
    # Every efficiency is derived, and it equals the preset built from the same figures.
    assert chip.efficiency_model == load_chip("h20").efficiency_model
    # It runs, given a cluster (the file names none).
    r = api.evaluate("llama3.1-8b", chip, "8K", "decode", 1, cluster="hgx-h20-ib")
    assert r.latency_s is not None and r.latency_s > 0
    with pytest.raises(UserInputError, match="cluster"):
        load_cluster(chip.default_cluster)


def test_a_compute_light_chip_gets_a_larger_fraction_of_its_peak_than_h100() -> None:
    h20, h100 = load_chip("h20"), load_chip("h100-sxm")
    for op_class in ("matmul", "attention"):
        assert (h20.large_block_efficiency(op_class, "bf16")
                > h100.large_block_efficiency(op_class, "bf16"))


def test_a_chip_file_with_scalar_efficiencies_keeps_loading(tmp_path: Path) -> None:
    data = {**SPEC_SHEET_ONLY, "efficiency": {"matmul": 0.7, "attention": 0.6, "memory": 0.85},
            "op_overhead_us": 5.0, "reserved_memory_gb": 6.0, "default_cluster": "hgx-h100-ib",
            "source": "old-style file", "verified": True}
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(data))
    chip = load_chip(str(path))
    # A scalar is the large-block fraction in every dtype (no balance term).
    for dtype in ("bf16", "fp8"):
        assert chip.large_block_efficiency("matmul", dtype) == 0.7
        assert chip.large_block_efficiency("attention", dtype) == 0.6
    assert chip.efficiency_model.memory == 0.85
    assert chip.op_overhead_ns == 5000 and chip.verified and not chip.calibrated


def test_a_chip_file_may_override_single_model_parameters(tmp_path: Path) -> None:
    data = {**SPEC_SHEET_ONLY, "efficiency": {"attention": {"half_kv_tokens": 0.0}},
            "calibrated": True}
    path = tmp_path / "partial.yaml"
    path.write_text(yaml.safe_dump(data))
    chip, preset = load_chip(str(path)), load_chip("h20")
    assert chip.efficiency_model.compute["attention"].half_shape == 0.0
    assert (chip.efficiency_model.compute["attention"].ceiling
            == preset.efficiency_model.compute["attention"].ceiling)
    assert chip.efficiency_model.compute["matmul"] == preset.efficiency_model.compute["matmul"]
    assert chip.calibrated and chip.calibration_notice() is None


@pytest.mark.parametrize("name", sorted(EXPECTED_CHIPS))
def test_only_calibrated_chips_carry_fitted_efficiencies(name: str) -> None:
    # One set of figures per chip: an uncalibrated preset takes every efficiency from the model
    # rather than carrying hand-set ones; a calibrated one says what it was fitted to.
    raw = _raw("chips", name)
    chip = load_chip(name)
    assert chip.calibrated == raw.get("calibrated", False)
    if not chip.calibrated:
        assert "efficiency" not in raw
        assert chip.calibration_notice() is not None
    else:
        assert set(raw["efficiency"]) <= set(raw["notes"]) | {
            k.split(".")[1] for k in raw["notes"] if k.startswith("efficiency.")}
    assert raw.get("verified") is not None and raw.get("calibrated") is not None


def test_h20_is_a_spec_sheet_only_preset() -> None:
    raw = _raw("chips", "h20-96")
    assert not {"efficiency", "op_overhead_us", "reserved_memory_gb"} & set(raw)
    assert "148" in raw["source"] and "4.0 TB/s" in raw["source"]


@pytest.mark.parametrize("name", sorted(EXPECTED_CLUSTERS))
def test_every_preset_level_has_a_per_operation_overhead_with_a_note(name: str) -> None:
    raw = _raw("clusters", name)
    cluster = load_cluster(name)
    for level, raw_level in zip(cluster.levels, raw["levels"], strict=True):
        assert level.op_overhead_ns == round(raw_level["op_overhead_us"] * 1000) > 0
        note = raw_level["notes"].lower()
        assert "operation cost" in note or "overhead" in note
        # A collective's cost: given, or the point-to-point figure.
        given = raw_level.get("collective_overhead_us")
        assert level.collective_ns == (level.op_overhead_ns if given is None
                                       else round(given * 1000))
        if given is not None:
            assert "collective" in note


def test_a_cluster_file_sets_the_all_to_all_window(tmp_path: Path) -> None:
    # 8 peers in flight unless the file says otherwise (docs/mapping.md); 0 turns it off
    assert load_cluster("hgx-h100-ib").all_to_all_peers_in_flight == 8
    data = copy.deepcopy(_raw("clusters", "hgx-h100-ib"))
    data["all_to_all_peers_in_flight"] = 0
    path = tmp_path / "no-window.yaml"
    path.write_text(yaml.safe_dump(data))
    assert load_cluster(str(path)).all_to_all_peers_in_flight == 0


def test_routes_carry_the_overhead_of_the_level_they_cross() -> None:
    from ctxplan.hardware import Topology

    class Sink:
        def add_resource(self, name: str, chip: int = -1, role: str = "") -> int:
            return 0

    cluster = load_cluster("grand-teton-rdma")
    topo = Topology(cluster, 16, Sink())
    assert topo.route(0, 1).op_overhead_ns == cluster.levels[0].op_overhead_ns
    assert topo.route(0, 8).op_overhead_ns == cluster.levels[1].op_overhead_ns
    assert cluster.levels[0].op_overhead_ns != cluster.levels[1].op_overhead_ns
