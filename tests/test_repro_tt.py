"""The torchtitan and Megatron reproducers of issue 40 (tests/data/repro/tt_*,
import_megatron_on_toml_message): job files that divided by zero or were misread, and emitted job
files whose read-back was another run. Each command runs in its folder, as its README.txt says."""

import json
import re

import pytest
import yaml
from click.testing import CliRunner
from test_reproducers import comment_text, one_line_error, run

from perfmodel.cli import main


def step(result) -> float:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["step_time_s"]


@pytest.mark.parametrize(
    "file, needle",
    [
        ("local0.toml", "[training] local_batch_size 0: give 1 or more"),
        ("pp_mbs0.toml", "[parallelism] pipeline_parallel_microbatch_size 0: give 1 or more"),
        ("lps0.toml", "[parallelism] pipeline_parallel_layers_per_stage 0: give 1 or more"),
        ("lps_str.toml", "pipeline_parallel_layers_per_stage must be an integer, got '4'"),
    ],
)
def test_zero_and_string_values_are_named(file, needle):
    r = run("tt_zero_division", "import", "torchtitan", file, "--gpu", "h100", "--gpus", "64")
    one_line_error(r, needle)


def test_converters_must_be_a_list():
    r = run("tt_converters_string_message", "import", "torchtitan", "job.toml", "--gpu", "h100",
            "--gpus", "64")  # fmt: skip
    one_line_error(r, '[model] converters must be a list of names, e.g. ["float8"]')


def test_float8_and_mx_together_named_in_the_files_words():
    r = run("tt_float8_and_mx_names_plan_fields", "import", "torchtitan", "job.toml", "--gpu",
            "h100", "--gpus", "64")  # fmt: skip
    one_line_error(r, "[model] converters: float8 and mx both convert the linear layers; keep one")
    assert "fp8_recipe" not in r.output


@pytest.mark.parametrize("extra", [[], ["--gpus", "64"]])
def test_import_megatron_on_a_toml_file_names_the_torchtitan_reader(extra):
    r = run("import_megatron_on_toml_message", "import", "megatron", "llama3_8b.toml", "--gpu",
            "h100", *extra)  # fmt: skip
    one_line_error(r, "llama3_8b.toml is a TOML job file", "use `perfmodel import torchtitan`")


def test_default_selective_ac_reads_as_layer_sac():
    """torchtitan's default AC (selective, option "2") and an explicit "2" read as the plan's
    layer_sac every 2 layers, estimating as the plan that says so."""
    case = "tt_default_selective_ac_refused"
    want = step(run(case, "estimate", "layer_sac_plan.yaml", "--json"))
    for file in ("no_ac_section.toml", "sac_2.toml"):
        r = run(case, "import", "torchtitan", file, "--gpu", "h100", "--gpus", "64", "--json")
        assert r.exit_code == 0, r.output
        plan = json.loads(r.stdout)["plan"]
        assert plan["parallel"]["recompute"] == "selective"
        assert plan["training"]["recompute_modules"] == ["layer_sac"]
        assert plan["training"]["checkpoint_every_n_layers"] == 2
        got = step(run(case, "estimate", file, "--gpu", "h100", "--gpus", "64", "--json"))
        assert got == pytest.approx(want, rel=1e-9)


def test_mixed_precision_reduce_reads_into_reduce_dtype():
    case = "tt_mixed_precision_reduce_ignored"
    r = run(case, "import", "torchtitan", "job_bf16.toml", "--gpu", "h100", "--gpus", "64")
    assert r.exit_code == 0 and "mixed_precision_reduce" not in r.stderr
    assert "reduce_dtype: bf16" in r.stdout
    for dtype in ("bf16", "fp32"):
        job = step(run(case, "estimate", f"job_{dtype}.toml", "--gpu", "h100", "--gpus", "64",
                       "--json"))  # fmt: skip
        plan = step(run(case, "estimate", f"plan_reduce_{dtype}.yaml", "--json"))
        assert job == pytest.approx(plan, rel=1e-9)
    bf16, fp32 = (step(run(case, "estimate", f"plan_reduce_{d}.yaml", "--json"))
                  for d in ("bf16", "fp32"))  # fmt: skip
    assert bf16 < fp32  # fp32 doubles the reduce-scatter's bytes


def emit_and_read_back(tmp_path, case: str, plan: str = "plan.yaml", *framework: str):
    """The plan's best (`plan --top 1 --json`), its `--emit torchtitan` text, and that text
    imported with the command its read-back lines give and estimated (JSON)."""
    framework = framework or ("--framework", "torchtitan")
    best = json.loads(run(case, "plan", plan, *framework, "--top", "1", "--json").stdout)
    emitted = run(case, "plan", plan, *framework, "--emit", "torchtitan")
    assert emitted.exit_code == 0, emitted.output
    text = emitted.stdout
    assert max(map(len, text.splitlines())) <= 80
    command = re.search(r"^#   perfmodel import torchtitan THIS.toml (.*)$", text, re.M)
    job = tmp_path / "job.toml"
    job.write_text(text)
    back = tmp_path / "back.yaml"
    r = CliRunner().invoke(main, ["import", "torchtitan", str(job), *command.group(1).split(),
                                  "-o", str(back)])  # fmt: skip
    assert r.exit_code == 0, r.output
    est = CliRunner().invoke(main, ["estimate", str(back), "--json"])
    assert est.exit_code == 0, est.output
    return best["results"][0], text, json.loads(est.stdout), back


def same_run(best: dict, got: dict) -> bool:
    return got["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-6) and got["memory"][
        "total_bytes"
    ] == pytest.approx(best["memory"]["total_bytes"], rel=1e-6)


def test_emitted_comments_within_80_columns():
    text = run("tt_emit_comment_width", "plan", "plan.yaml", "--framework", "torchtitan",
               "--emit", "torchtitan").stdout  # fmt: skip
    assert text.startswith("# Llama-3 70B") and max(map(len, text.splitlines())) <= 80


def test_custom_gpu_read_back_names_a_preset_and_the_change(tmp_path):
    best, text, got, back = emit_and_read_back(tmp_path, "tt_emit_custom_gpu_unreadable")
    assert "--gpu GPU" not in text and "--gpu h100-sxm --gpus 64" in text
    assert "h100-sxm with hbm_capacity_bytes changed: not a preset" in comment_text(text)
    # the preset's 80 GB read back; with the plan's GPU set, the same run
    assert got["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-6)
    plan = yaml.safe_load(back.read_text())
    plan["system"]["gpu"] = {"base": "h100", "hbm_capacity_bytes": "96 GiB"}
    back.write_text(yaml.safe_dump(plan))
    fixed = json.loads(CliRunner().invoke(main, ["estimate", str(back), "--json"]).stdout)
    assert same_run(best, fixed)


@pytest.mark.parametrize("case", ["tt_emit_gpus_per_node_lost", "tt_emit_layer_sac_lost"])
def test_emit_carries_the_node_size_and_layer_sac(tmp_path, case):
    best, text, got, back = emit_and_read_back(tmp_path, case)
    assert "not carried" not in text and same_run(best, got)
    if case == "tt_emit_layer_sac_lost":
        assert 'selective_ac_option = "4"' in text
        assert yaml.safe_load(back.read_text())["training"]["checkpoint_every_n_layers"] == 4
    else:
        assert "# perfmodel: gpus_per_node 4" in text
        assert yaml.safe_load(back.read_text())["system"]["gpus_per_node"] == 4


def test_emit_reshard_after_forward_false_writes_never_and_says_the_memory(tmp_path):
    best, text, got, _ = emit_and_read_back(tmp_path, "tt_emit_reshard_after_forward_lost")
    assert 'fsdp_reshard_after_forward = "never"' in text
    assert got["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-6)
    if not same_run(best, got):  # read back as ZeRO-2, whose memory the fsdp profile counts apart
        note = comment_text(text)
        assert "not carried: training.zero3_reshard_after_forward" in note
        assert f"{got['memory']['total_bytes'] / 1e9:.1f} GB" in note


def test_emit_refuses_tp_without_sequence_parallelism():
    r = run("tt_emit_sequence_parallel_lost", "plan", "plan.yaml", "--framework", "torchtitan",
            "--emit", "torchtitan")  # fmt: skip
    one_line_error(r, "tp 2 without sequence parallelism", "sequence_parallel true")


def test_emit_writes_torchtitan_rocm_and_reads_it_back(tmp_path):
    best, text, got, back = emit_and_read_back(
        tmp_path, "tt_emit_rocm_profile_refused", "amd.yaml", "--top", "1"
    )
    assert "--gpu mi300x --gpus 16" in text
    assert yaml.safe_load(back.read_text())["training"]["framework"] == "torchtitan-rocm"
    assert same_run(best, got)


def test_emit_writes_mixed_precision_reduce(tmp_path):
    best, text, got, back = emit_and_read_back(
        tmp_path, "tt_mixed_precision_reduce_ignored", "plan_emit.yaml"
    )
    assert 'mixed_precision_reduce = "bfloat16"' in text
    assert yaml.safe_load(back.read_text())["training"]["reduce_dtype"] == "bf16"
    assert same_run(best, got)
