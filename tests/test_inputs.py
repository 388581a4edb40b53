"""The one way in (perfmodel.inputs.load): what kind a file is, decided once from its content, and
the
arguments that only make sense for some kinds."""

import shutil
from pathlib import Path

import pytest

from perfmodel.cli.calc import DTYPE_CHOICES
from perfmodel.errors import PerfModelError
from perfmodel.inputs import load
from perfmodel.inputs.presets import bundled_plan
from perfmodel.specs.precision import DTYPES

DATA = Path(__file__).parent / "data"
GPT3 = DATA / "megatron" / "train_gpt3_175b_distributed.sh"
RECIPE = DATA / "nemo" / "bridge_llama3_8b.yaml"


def _plan_text() -> str:
    import yaml

    return yaml.safe_dump(bundled_plan("gpt3-175b-3d"))


def test_bundled_name_file_and_launch_file_are_told_apart(tmp_path):
    assert load("gpt3-175b-3d.yaml").kind == "plan"
    (tmp_path / "mine.yaml").write_text(_plan_text())
    assert load(str(tmp_path / "mine.yaml")).kind == "plan"
    got = load(str(GPT3), gpu="a100-80gb", gpus=128)
    assert got.kind == "megatron" and got.plan.system.num_gpus == 128
    assert any(n.startswith("assumed: ") for n in got.notes)
    assert load(str(RECIPE), gpu="h100-sxm", gpus=8).kind == "nemo"


def test_a_plan_saved_as_txt_is_read_as_a_plan(tmp_path):
    """Reproducer txt_plan_misreported (tests/data/repro, from the team's reproducer set): a .txt
    plan was called a launch file. It names no links: since issue 23 they come from its GPU
    preset, and every output says so; a plan whose GPU has no usual links still gets its own error,
    not a launch file's."""
    loaded = load(str(DATA / "repro" / "txt_plan_misreported" / "plan.txt"))
    assert loaded.kind == "plan" and loaded.plan.system.links_from
    bad = tmp_path / "odd.txt"
    text = (DATA / "repro" / "txt_plan_misreported" / "plan.txt").read_text()
    inline = (
        "gpu: {name: X, peak_flops_per_s: {bf16: 1e14}, hbm_capacity_bytes: 80 GB,"
        " hbm_bandwidth_bytes_per_s: 2 TB/s, num_sms: 100, l2_bytes: 40 MB}"
    )
    bad.write_text(text.replace("gpu: h100-sxm", inline))
    with pytest.raises(PerfModelError, match="link") as e:
        load(str(bad))
    assert "--gpu" not in str(e.value)
    (tmp_path / "ok.txt").write_text(_plan_text())
    assert load(str(tmp_path / "ok.txt")).kind == "plan"


def test_a_launch_script_saved_as_txt_is_still_a_launch_file(tmp_path):
    shutil.copy(GPT3, tmp_path / "args.txt")
    assert load(str(tmp_path / "args.txt"), gpu="a100-80gb", gpus=128).kind == "megatron"
    with pytest.raises(PerfModelError, match="give the GPU with --gpu"):
        load(str(tmp_path / "args.txt"))


def test_launch_only_arguments_are_refused_for_a_plan():
    with pytest.raises(PerfModelError, match=r"system\.gpu names its GPU: --gpu is for"):
        load("gpt3-175b-3d.yaml", gpu="h100-sxm")
    with pytest.raises(PerfModelError, match="--vocab-size is for"):
        load("gpt3-175b-3d.yaml", vocab_size=32000)
    assert load("gpt3-175b-3d.yaml", gpu="h100-sxm", refuse_unused=False).plan.system.gpu.name


def test_config_json_as_a_plan_says_how_to_use_it(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    with pytest.raises(PerfModelError, match="a model, not a plan; name it in a plan"):
        load(str(tmp_path / "config.json"))


@pytest.mark.parametrize(
    "source, message",
    [
        ("", "the plan argument is empty"),
        (".", "is a directory"),
        ("nope.sh", "no such file"),
        ("gpt3-175b-3e", "did you mean"),
    ],
)
def test_sources_that_are_not_plans(source, message):
    with pytest.raises(PerfModelError, match=message):
        load(source)


def test_cli_dtype_choices_are_the_specs_dtypes():
    """The CLI lists the dtypes without importing the specs (fast start); the two lists stay
    equal."""
    assert DTYPE_CHOICES == DTYPES
