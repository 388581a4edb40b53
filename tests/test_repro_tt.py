"""The torchtitan and Megatron reproducers of issue 40 (tests/data/repro/tt_*,
import_megatron_on_toml_message): job files that divided by zero or were misread, and emitted job
files whose read-back was another run. Each command runs in its folder, as its README.txt says."""

import json

import pytest
from test_reproducers import one_line_error, run


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
