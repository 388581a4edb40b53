"""torchtitan's job files both ways (issue 33): `import torchtitan` reads torchtitan's key names
and accounts for every key; `plan --emit torchtitan` writes the best configuration back, and the
round trip gives back the same estimate. The examples are torchtitan's own files
(examples/torchtitan/, the commit named in each)."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfmodel import inputs
from perfmodel.cli import main
from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.errors import PerfModelError
from perfmodel.inputs.torchtitan import read_job
from perfmodel.inputs.torchtitan_emit import _value

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "torchtitan"


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def job(text, gpus=64):
    return read_job(text, "h100-sxm", gpus, "job.toml")


def test_the_llama3_8b_file_reads_as_torchtitan_runs_it():
    imp = job((EXAMPLES / "llama3_8b.toml").read_text())
    p, t = imp.plan["parallel"], imp.plan["training"]
    assert imp.plan["model"] == "llama3-8b"
    assert (p["dp_replicate"], p["dp_shard"], p["tp"], p["pp"], p["cp"]) == (1, 64, 1, 1, 1)
    assert p["zero_stage"] == 3 and p["recompute"] == "selective"  # mode selective, option op
    # local_batch_size 1 on each of 64 ranks, global_batch_size -1: 64 sequences of 8192
    assert (t["global_batch_size"], t["seq_length"], p["micro_batch_size"]) == (64, 8192, 1)
    assert t["framework"] == "fsdp" and t["dtype"] == "bf16" and t["torch_compile"] is False
    assert t["tokens"] == 1000 * 64 * 8192  # steps 1000
    assert "optimizer.lr" in imp.ignored and "checkpoint.interval" in imp.ignored
    assert imp.unrecognized == []


def test_the_llama3_70b_file_runs_tp8_full_recompute():
    imp = job((EXAMPLES / "llama3_70b.toml").read_text())
    p = imp.plan["parallel"]
    assert (p["tp"], p["dp_shard"], p["sequence_parallel"], p["recompute"]) == (8, 8, True, "full")
    assert imp.plan["training"]["global_batch_size"] == 8 * 8  # local 8 x dp 8


def test_the_llama3_405b_file_runs_float8_compiled_with_async_tp():
    imp = job((EXAMPLES / "llama3_405b.toml").read_text(), gpus=512)
    t, p = imp.plan["training"], imp.plan["parallel"]
    assert imp.plan["model"] == "llama3.1-405b"
    assert (t["dtype"], t["fp8_recipe"], t["fp8_param_gather"]) == ("fp8", "tensorwise", True)
    assert t["torch_compile"] is True and t["tp_comm_overlap_ub"] is True
    assert (p["tp"], p["dp_shard"], p["recompute"]) == (8, 64, "full")
    assert imp.unrecognized == []


def toml(**changes):
    """BASE's tables with ``changes`` ({section: {key: value}}) on top, as TOML."""
    tables = {
        "model": {"name": "llama3", "flavor": "8B"},
        "training": {"local_batch_size": 2, "seq_len": 4096},
        "activation_checkpoint": {"mode": "none"},
        "parallelism": {"data_parallel_shard_degree": -1},
    }
    for section, keys in changes.items():
        tables.setdefault(section, {}).update(keys)
    return "\n".join(
        f"[{name}]\n" + "".join(f"{k} = {_value(v)}\n" for k, v in t.items())
        for name, t in tables.items()
    )


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"training": {"enable_cpu_offload": True}}, "enable_cpu_offload"),
        (
            {"activation_checkpoint": {"mode": "selective", "selective_ac_option": "two"}},
            "selective_ac_option",
        ),
        ({"activation_checkpoint": {"mode": "memory_budget"}}, "memory_budget"),
        (
            {
                "parallelism": {
                    "pipeline_parallel_degree": 2,
                    "pipeline_parallel_schedule": "LoopedBFS",
                }
            },
            "pipeline_parallel_schedule",
        ),
        ({"optimizer": {"name": "Lion"}}, r"\[optimizer\] name"),
        ({"parallelism": {"context_parallel_degree": 2}}, "context_parallel_rotate_method"),
        (
            {
                "parallelism": {
                    "expert_parallel_degree": 8,
                    "expert_parallel_comm_backend": "deepep",
                }
            },
            "expert_parallel_comm_backend 'deepep'",
        ),
        ({"training": {"dtype": "bfloat16"}}, "training. dtype|dtype = 'bfloat16'"),
        (
            {
                "quantize.linear.float8": {"recipe_name": "rowwise"},
                "model": {"converters": ["quantize.linear.float8"]},
            },
            "recipe_name 'rowwise'",
        ),
    ],
)
def test_a_key_that_changes_the_cost_and_is_not_modelled_is_an_error_naming_it(changes, words):
    with pytest.raises(PerfModelError, match=words):
        job(toml(**changes))


def test_pipeline_float8_and_compile():
    imp = job(
        toml(
            training={"local_batch_size": 8},
            parallelism={
                "tensor_parallel_degree": 2,
                "pipeline_parallel_degree": 4,
                "pipeline_parallel_schedule": "Interleaved1F1B",
                "pipeline_parallel_microbatch_size": 2,
            },
            compile={"enable": True},
            activation_checkpoint={"mode": "full"},
        )
    )
    p, t = imp.plan["parallel"], imp.plan["training"]
    assert (p["dp_shard"], p["vp"], p["schedule"], p["micro_batch_size"]) == (
        8,
        2,
        "interleaved",
        2,
    )
    assert p["zero_stage"] == 2  # fsdp_reshard_after_forward "default" keeps them with PP
    assert t["torch_compile"] is True and t["global_batch_size"] == 64
    assert p["recompute"] == "full"
    fp8 = job(
        toml(
            model={"converters": ["quantize.linear.float8"]},
            **{"quantize.linear.float8": {"enable_fsdp_float8_all_gather": True}},
        )
    )
    assert fp8.plan["training"]["dtype"] == "fp8"
    assert fp8.plan["training"]["fp8_param_gather"] is True
    legacy = job(toml(float8={"enable_float8_linear": True}))  # torchtitan 2024-12
    assert legacy.plan["training"]["dtype"] == "fp8"


def test_an_unknown_key_is_named_and_a_world_mismatch_spells_out_the_factors():
    assert job(toml(parallelism={"made_up_key": 3})).unrecognized == ["parallelism.made_up_key"]
    assert job(toml(training={"enable_cpu_offload": False})).unrecognized == []
    with pytest.raises(PerfModelError, match=r"dp_shard\(4\).* = 4 != --gpus 64"):
        job(toml(parallelism={"data_parallel_shard_degree": 4}))
    with pytest.raises(PerfModelError, match="--gpus N"):
        job(toml(), gpus=None)
    with pytest.raises(PerfModelError, match="flavor '9B' has no bundled preset"):
        job(toml(model={"flavor": "9B"}))


@pytest.mark.parametrize(
    "knobs", [["--pp", "2"], ["--tp", "2", "--pp", "1", "--recompute", "selective"], ["--pp", "1"]]
)
def test_plan_emit_torchtitan_round_trips_to_the_same_estimate(tmp_path, knobs):
    r = invoke(
        "plan", "llama3-8b-h100", "--framework", "torchtitan", *knobs, "--emit", "torchtitan"
    )
    assert r.exit_code == 0, r.output
    assert max(len(line) for line in r.output.splitlines()) <= 80
    path = tmp_path / "job.toml"
    path.write_text(r.output)
    best = json.loads(
        invoke("plan", "llama3-8b-h100", "--framework", "torchtitan", *knobs, "--json").output
    )["results"][0]
    back = inputs.load(str(path), gpu="h100-sxm", gpus=8).plan
    step = estimate(back, resolve_config(back)).values["step_time_s"]
    assert step == pytest.approx(best["step_time_s"], rel=1e-9)
    got = resolve_config(back).as_dict()
    knobs = (
        "tp",
        "pp",
        "dp",
        "cp",
        "vp",
        "micro_batch_size",
        "recompute",
        "zero_stage",
        "schedule",
    )
    assert {k: got[k] for k in knobs} == {k: best["config"][k] for k in knobs}


def test_emit_torchtitan_refuses_another_framework():
    r = invoke("plan", "llama3-8b-h100", "--emit", "torchtitan")
    assert r.exit_code == 1 and "--framework torchtitan" in r.output


def test_import_torchtitan_cli_writes_a_plan_that_loads(tmp_path):
    out = tmp_path / "plan.yaml"
    r = invoke(
        "import",
        "torchtitan",
        str(EXAMPLES / "llama3_8b.toml"),
        "--gpu",
        "h100",
        "--gpus",
        "64",
        "-o",
        str(out),
    )
    assert r.exit_code == 0, r.output
    assert inputs.load(str(out)).plan.parallel.dp_shard == 64
