"""What people type (issue 33): ``base:`` extends a preset, aliases resolve and say so, and the
closest preset comes first in a suggestion."""

import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.engine.assumptions import assumptions
from perfmodel.errors import PerfModelError
from perfmodel.inputs import names, presets

SYSTEM = {"gpu": "h100-sxm", "num_gpus": 8}
TRAINING = {"global_batch_size": 64}


def plan(**sections):
    return presets.plan_from_mapping(
        {"model": "llama3-8b", "system": SYSTEM, "training": TRAINING, **sections}, "plan.yaml"
    )


def test_base_extends_a_model_preset_with_the_keys_given():
    p = plan(model={"base": "deepseek-v3", "mtp_num_layers": 1})
    preset = presets.model("deepseek-v3")
    assert p.model.mtp_num_layers == 1 and preset.mtp_num_layers == 0
    assert p.model.model_copy(update={"mtp_num_layers": 0}) == preset
    assert any("deepseek-v3 preset with mtp_num_layers 1" in a for a in assumptions(p))


def test_an_override_is_validated_like_any_key():
    with pytest.raises(PerfModelError, match="unknown key 'mtp_num_layer'; did you mean 'mtp_num"):
        plan(model={"base": "deepseek-v3", "mtp_num_layer": 1})
    with pytest.raises(PerfModelError, match="num_layers"):
        plan(model={"base": "deepseek-v3", "num_layers": -1})


def test_an_override_by_alias_replaces_the_base_key():
    # seq_len is seq_length's alias: the override wins, not the base's seq_length
    assert plan(model={"base": "llama3-8b", "seq_len": 2048}).model.seq_length == 2048


def test_an_unknown_base_names_the_field_and_the_close_presets():
    with pytest.raises(
        PerfModelError,
        match=r"model\.base: unknown model preset 'deepseek-v4'.*" "did you mean deepseek-v3",
    ):
        plan(model={"base": "deepseek-v4"})
    with pytest.raises(PerfModelError, match=r"model\.base: give the name"):
        plan(model={"base": 3})


def test_base_extends_a_gpu_a_system_and_a_whole_plan():
    p = plan(system={"gpu": {"base": "h100", "hbm_capacity_bytes": "96 GiB"}, "num_gpus": 8})
    assert p.system.gpu.hbm_capacity_bytes == 96 * 2**30
    assert p.system.gpu.peak_flops_per_s == presets.gpu("h100-sxm").peak_flops_per_s
    assert p.system.intra_node_link == presets.link("nvlink4")  # the base's usual links
    s = plan(system={"base": "deepseek-v3-gb200", "num_gpus": 1152}).system
    assert (s.num_gpus, s.nvlink_domain, s.gpu.name) == (1152, 72, presets.gpu("gb200").name)
    whole = presets.plan_from_mapping(
        {"base": "llama3-8b-h100", "training": {"global_batch_size": 128}}, "plan.yaml"
    )
    bundled = presets.plan_from_mapping(presets.bundled_plan("llama3-8b-h100"), "b")
    assert whole.training.global_batch_size == 128
    assert whole.training.dtype == bundled.training.dtype  # the rest of training kept
    assert whole.system == bundled.system and whole.model == bundled.model
    mtp = presets.plan_from_mapping(
        {"base": "deepseek-v3-h100", "model": {"mtp_num_layers": 1}}, "plan.yaml"
    )
    assert mtp.model.mtp_num_layers == 1 and mtp.model.num_layers == 61


def test_a_base_plan_file_relative_to_the_plan(tmp_path):
    (tmp_path / "common.yaml").write_text(
        "model: llama3-8b\nsystem: {gpu: h100, num_gpus: 16}\ntraining: {global_batch_size: 64}\n"
    )
    p = presets.plan_from_mapping(
        {"base": "common.yaml", "system": {"num_gpus": 32}}, "plan.yaml", tmp_path
    )
    assert p.system.num_gpus == 32 and p.training.global_batch_size == 64


@pytest.mark.parametrize(
    "typed, preset",
    [
        ("h100", "h100-sxm"),
        ("H100_SXM5", "h100-sxm"),
        ("a100", "a100-80gb"),
        ("h200", "h200"),
        ("b200", "b200"),
        ("gb200-nvl72", "gb200"),
        ("mi300", "mi300x"),
    ],
)
def test_gpu_names_people_type(typed, preset):
    assert presets.gpu(typed) == presets.gpu(preset)


@pytest.mark.parametrize(
    "typed, profile",
    [
        ("torchtitan", "fsdp"),
        ("megatron", "megatron-core"),
        ("nemo", "megatron-core"),
        ("megatron-bridge", "megatron-core"),
        ("fsdp2", "fsdp"),
        ("megatron-deepspeed", "deepspeed"),
    ],
)
def test_framework_names_people_type_and_the_output_says_so(typed, profile):
    p = plan(training={**TRAINING, "framework": typed})
    assert p.training.framework == profile
    assert plan(training={**TRAINING, "framework": profile}).training == p.training
    assert any(f"'{typed}' read as the {profile} profile" in a for a in assumptions(p))


def test_an_alias_is_said_and_a_preset_name_is_not():
    assert any(
        "'h100' read as the h100-sxm preset" in n
        for n in plan(system={"gpu": "h100", "num_gpus": 8}).read_as
    )
    assert plan().read_as == []


@pytest.mark.parametrize(
    "typed, first",
    [
        ("h10", "h100-sxm"),
        ("llama3-8", "llama3-8b"),
        ("deepseek", "deepseek-v3"),
        ("qwen3-235", "qwen3-235b-a22b"),
        ("h100-sxm-96", "h100-sxm-96gb"),
    ],
)
def test_the_closest_preset_comes_first(typed, first):
    kind = "gpus" if typed.startswith("h") else "models"
    assert names.suggest(typed, presets.preset_names(kind), kind)[0] == first


def test_the_cli_takes_a_framework_alias_and_says_it():
    r = CliRunner().invoke(
        main, ["estimate", "llama3-8b-h100", "--framework", "torchtitan", "--tp", "1", "--pp", "1"]
    )
    assert r.exit_code == 0, r.output
    assert "--framework torchtitan read as the fsdp profile" in r.output
