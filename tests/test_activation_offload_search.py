"""Activation offloading as a searched memory switch (issue 37 item 3): Megatron-Core's
--cpu-offloading --cpu-offloading-num-layers in eighths of the layers, tried on the pp 1 rows
without recompute that memory asks for, fewest layers first; held to the GPU's share of its
host's DRAM and to the PCIe uplink two GPUs of an HGX board share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.engine import memory_switches as ms
from perfmodel.engine.answer import plan_search
from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.inputs import load_plan, presets
from perfmodel.inputs.preset_files import error_bands
from perfmodel.specs import Plan

ROOT = Path(__file__).resolve().parents[1]
OFFLOADS = [f"activation-offload-{k}" for k in range(1, 9)]


def _case(name: str) -> Plan:
    return next(c["plan"] for c in presets.validation_cases() if c["name"] == name)


def _unstated(plan: Plan) -> Plan:
    """The plan with its activation offloading left to the search."""
    given = plan.training.given()
    del given["cpu_offloading_num_layers"]
    return plan.model_copy(update={"training": type(plan.training).model_validate(given)})


def test_the_ladder_is_eighths_of_the_layers_and_all_but_one():
    assert [ms.offloaded_layers(80, k) for k in range(1, 9)] == [10, 20, 30, 40, 50, 60, 70, 79]
    assert [ms.offloaded_layers(126, k) for k in (1, 4, 8)] == [16, 63, 125]
    # a shallow model: one layer frees nothing (the layer in transit stays), equal counts once
    plan = load_plan("llama3-8b-h100.yaml")
    shallow = plan.model_copy(update={"model": plan.model.model_copy(update={"num_layers": 8})})
    counts = [
        ms.offloaded_layers(8, ms.SWITCHES[s].eighths)
        for s in ms.usable_sets(shallow)
        if ms.is_offload(s)
    ]
    assert counts == [2, 3, 4, 5, 6, 7]


def test_offloading_is_tried_only_where_megatron_core_runs_it():
    plan = load_plan("llama3-8b-h100.yaml")
    assert set(OFFLOADS) <= set(ms.usable_sets(plan))
    for blocked in (
        plan.with_parallel(pp=2),
        plan.with_parallel(recompute="full"),
        plan.with_training(cpu_offloading_num_layers=4),  # stated: taken as given
        plan.with_training(framework="fsdp"),
        plan.with_training(framework="primus"),
        plan.with_system(host_link=None),
    ):
        assert not set(OFFLOADS) & set(ms.usable_sets(blocked))
    import numpy as np

    rows = ms.runs_with(
        "activation-offload-2", np.array([3, 3, 3]), np.array([0, 1, 0]), np.array([1, 1, 2])
    )
    assert list(rows) == [True, False, False]


@pytest.mark.parametrize(
    "name, stated",
    [("mb2604-70b-gb300-fp8-fsdp-64gpu", 20), ("mb2604-70b-gb200-fp8-fsdp-64gpu", 40)],
)
def test_the_search_reaches_megatron_bridges_offloading_recipes(name, stated):
    """Megatron-Bridge's Llama 3 70B FSDP recipes on GB300 and GB200 offload 20 and 40 of 80
    layers (scripts/performance, v0.4.2). With the offloading left unstated, the search offloads
    (the fewest eighths that fit with margin: the recipes are tight by the model) and reaches
    the recipe's step within 1%, where before it took the optimizer's CPU offload (+5%)."""
    recipe = _case(name)
    want = estimate(recipe, resolve_config(recipe)).values["step_time_s"]
    free = _unstated(recipe).with_parallel(recompute=None, zero_stage=None)
    first = plan_search(free, error_bands(), top=1).results[0]
    assert ms.is_offload(first.config.memory_switch)
    n = ms.offloaded_layers(80, ms.SWITCHES[first.config.memory_switch].eighths)
    assert n >= stated and first.values["fits"] and not first.values["tight"]
    assert first.values["step_time_s"] == pytest.approx(want, rel=0.01)
    # one fewer eighth would not fit with margin: the first that does is taken
    if ms.SWITCHES[first.config.memory_switch].eighths > 1:
        fewer = f"activation-offload-{ms.SWITCHES[first.config.memory_switch].eighths - 1}"
        from dataclasses import replace

        v = estimate(free, replace(first.config, memory_switch=fewer)).values
        assert v["tight"] or not v["fits"]


def test_the_launch_script_offloads_and_reads_back(tmp_path):
    """--emit megatron writes --cpu-offloading --cpu-offloading-num-layers N for the answer, and
    the script read back gives the same step."""
    from perfmodel.inputs.megatron_emit import launch_text, read_back

    free = _unstated(_case("mb2604-70b-gb300-fp8-fsdp-64gpu")).with_parallel(recompute=None)
    first = plan_search(free, error_bands(), top=1).results[0]
    switched = ms.applied(free, first.config.memory_switch)
    n = switched.training.cpu_offloading_num_layers
    text = launch_text(switched, first)
    assert f"--cpu-offloading-num-layers {n}" in text and "--cpu-offloading " in text + " "
    lines = [ln.rstrip(" \\") for ln in text.splitlines() if ln.startswith("--")]
    back = read_back(free, lines)
    assert back.training.cpu_offloading_num_layers == n
    got = estimate(back, resolve_config(back)).values["step_time_s"]
    assert got == pytest.approx(first.values["step_time_s"], rel=2e-3)


def test_what_is_offloaded_must_fit_in_the_hosts_dram(tmp_path):
    """GB300's share of a Grace's 480 GB is 240 GB: 20 offloaded layers keep 77.9 GB there; on a
    host of 64 GB a GPU they do not fit, and the verdict says it is the host's memory."""
    plan = _case("mb2604-70b-gb300-fp8-fsdp-64gpu")
    v = estimate(plan, resolve_config(plan)).values
    assert float(v["host_capacity_bytes"]) == 240e9
    per_layer = float(v["activations_host_bytes"]) / 20
    assert float(v["host_bytes"]) == pytest.approx(20 * per_layer)
    small = plan.with_system(host_memory_bytes=64e9)
    est = estimate(small, resolve_config(small))
    assert not est.values["fits"] and est.to_json()["memory"]["verdict"] == "does not fit"
    unknown = plan.with_system(host_memory_bytes=None)
    est = estimate(unknown, resolve_config(unknown))
    assert est.values["fits"]
    assert any("host memory: not known" in a for a in est.assumed)


def test_the_text_names_the_offloaded_layers_and_the_host_share(tmp_path):
    import yaml

    path = tmp_path / "plan.yaml"
    recipe = ROOT / "configs" / "validation" / "mb2604-70b-gb300-fp8-fsdp-64gpu.yaml"
    data = yaml.safe_load(recipe.read_text())
    for key in ("description", "source", "table", "measured", "notes"):
        data.pop(key, None)
    del data["training"]["cpu_offloading_num_layers"]
    del data["parallel"]["recompute"]  # a knob left free: estimate resolves it as plan does
    path.write_text(yaml.safe_dump(data))
    r = CliRunner().invoke(main, ["plan", str(path)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "with the activations of 30 of the 80 layers offloaded to host memory" in text
    assert "(--cpu-offloading --cpu-offloading-num-layers 30)" in text
    assert "activations in host memory" in text and "host memory, the GPU's share 240.0 GB" in text
    j = json.loads(CliRunner().invoke(main, ["estimate", str(path), "--json"]).output)
    assert j["config"]["memory_switch"] == "activation-offload-3"
    assert j["memory"]["activations_host_bytes"] > 0 and j["memory"]["host_capacity_bytes"] == 240e9


def test_hgx_gpus_share_a_pcie_uplink_to_the_host():
    """Two GPUs of an 8-GPU HGX board sit under one PCIe switch, whose x16 uplink they share when
    both copy to the host: 32 GB/s a GPU on Gen5 (H100), 16 on Gen4 (A100); Grace's NVLink-C2C
    225 GB/s a GPU; AMD's platforms a Gen5 x16 link per GPU."""
    gbps = {
        name: load_plan(name).system.host_link.bandwidth_bytes_per_s / 1e9
        for name in ("llama3-8b-h100.yaml", "gpt3-175b.yaml")
    }
    assert gbps == {"llama3-8b-h100.yaml": 32.0, "gpt3-175b.yaml": 16.0}
    from perfmodel.inputs.usual_links import host_link_of

    assert [host_link_of(g) for g in ("gb200", "mi300x", "v100")] == [
        "nvlink-c2c",
        "pcie-gen5",
        "pcie-gen3-shared",
    ]


def test_rows_of_several_offload_sets_are_priced_together_as_each_alone():
    """The offload sets differ only in the layers each row offloads, which the evaluation reads
    row by row: one evaluation prices rows of several sets (and plain ones) as each set alone,
    and as the plan that states the count."""
    from dataclasses import replace

    from perfmodel.engine.estimate import Knobs
    from perfmodel.engine.evaluate import KEEP, evaluate_chunked

    plan = load_plan("llama3-8b-h100.yaml")
    base = resolve_config(plan, tp=2, pp=1, cp=1, zero_stage=1, recompute="none")
    cfgs = [replace(base, memory_switch=s) for s in ("activation-offload-2", "", OFFLOADS[4])]
    cfgs += [replace(cfgs[0], micro_batch_size=2 * base.micro_batch_size)]
    mixed = evaluate_chunked(plan, Knobs.from_configs(cfgs))
    assert len(set(mixed["activations_bytes"])) == len(cfgs)
    for i, c in enumerate(cfgs):
        alone = evaluate_chunked(plan, Knobs.from_configs([c]))
        stated = ms.applied(plan, c.memory_switch)
        as_stated = evaluate_chunked(stated, Knobs.from_configs([replace(c, memory_switch="")]))
        for key in KEEP:
            assert mixed[key][i] == pytest.approx(alone[key][0], rel=1e-12), (key, c)
            assert mixed[key][i] == pytest.approx(as_stated[key][0], rel=1e-12), (key, c)


def test_check_flags_offloading_beyond_the_hosts_dram(tmp_path):
    """A plan that offloads more than its host holds is a PM101 finding naming the host and the
    most layers that fit: 20 layers keep 77.9 GB there, 64 GB a GPU holds 14 with the margin."""
    import yaml

    data = yaml.safe_load(
        (ROOT / "configs/validation/mb2604-70b-gb300-fp8-fsdp-64gpu.yaml").read_text()
    )
    for key in ("description", "source", "table", "measured", "notes"):
        data.pop(key, None)
    data["system"]["host_memory_bytes"] = "64 GB"
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    r = CliRunner().invoke(main, ["check", str(path), "--json"])
    (f,) = [f for f in json.loads(r.output) if f["rule"] == "PM101"]
    assert "to host memory, over the 64 GB share of its host's DRAM" in f["message"]
    assert f["fix"].startswith("cpu_offloading_num_layers: 14 at most")
    from perfmodel.engine.memory_verdict import MEMORY_BAND

    per_layer = f["figures"]["host_bytes"] / 20
    assert 14 * per_layer * (1 + MEMORY_BAND) <= 64e9 < 15 * per_layer * (1 + MEMORY_BAND)
    data["system"]["host_memory_bytes"] = "240 GB"
    path.write_text(yaml.safe_dump(data))
    r = CliRunner().invoke(main, ["check", str(path), "--json"])
    assert not [f for f in json.loads(r.output) if f["rule"] == "PM101"]
