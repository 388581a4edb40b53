"""The answer first (output/render_answer.py) and the trimmed assumptions (engine/assumptions.py):
plan and estimate open with the configuration, the step with its range, memory against the usable
HBM and the run's days, GPU-hours and cost; the profile's defaults are named once, and only a
flag the plan sets against its profile is listed."""

import json

from perfmodel.cli import main
from perfmodel.output.render_answer import answer_lines


def test_plan_opens_with_the_answer(runner):
    r = runner.invoke(main, ["plan", "gpt3-175b.yaml", "--gpus", "512", "--top", "2"])
    assert r.exit_code == 0
    first = r.output.splitlines()[:3]
    j = json.loads(
        runner.invoke(
            main, ["plan", "gpt3-175b.yaml", "--gpus", "512", "--top", "2", "--json"]
        ).output
    )
    best = j["results"][0]
    assert first[0].startswith("answer: tp") and "megatron-core" in first[0]
    assert first[1].startswith("step ") and "expected" in first[1] and "MFU" in first[1]
    usable = best["memory"]["usable_bytes"] / 1e9
    assert (
        first[2].startswith("memory: fits (")
        and "usable" in first[2]
        and f"{usable:.1f} GB" in first[2]
    )


def test_estimate_answer_carries_the_training_run_and_its_cost(runner, tmp_path):
    r = runner.invoke(
        main,
        ["estimate", "llama3.1-405b-h100.yaml", "--tokens", "15.6T", "--json"],
    )
    j = json.loads(r.output)
    lines = answer_lines(j, "megatron-core")
    assert len(lines) == 4 and lines[3].startswith("run: ")
    days = j["training_run"]["days"]
    assert f"{days:,.1f} days" in lines[3] and "GPU-hours" in lines[3]
    # a price makes a cost
    j["training_run"]["cost_usd"] = 5.31e7
    assert "$53.10M" in answer_lines(j, "megatron-core")[3]


def test_a_configuration_that_does_not_fit_says_so_first_and_in_the_answer(runner, tmp_path):
    plan = tmp_path / "p.yaml"
    plan.write_text(
        "model: gpt3-175b\nsystem: {gpu: a100-80gb, num_gpus: 512}\n"
        "training: {global_batch_size: 1536}\n"
        "parallel: {tp: 1, pp: 1, cp: 1, vp: 1, micro_batch_size: 1, sequence_parallel: false,"
        " recompute: none, zero_stage: 0}\n"
    )
    r = runner.invoke(main, ["estimate", str(plan)])
    lines = r.output.splitlines()
    assert lines[0].startswith("DOES NOT FIT")
    at = next(i for i, ln in enumerate(lines) if ln.startswith("answer: "))
    assert lines[at].startswith("answer: tp1 pp1 dp512")
    assert lines[at + 2].startswith("memory: does not fit (3.14 TB over, +-10.2%), 3.23 TB of")


def test_assumed_names_the_profile_once_and_lists_only_departures(runner, tmp_path):
    plan = tmp_path / "p.yaml"
    plan.write_text(
        "model: gpt3-175b\nsystem: {gpu: a100-80gb, num_gpus: 512}\n"
        "training: {global_batch_size: 1536, tp_comm_overlap: false, flash_attention: true}\n"
        "parallel: {tp: 8, pp: 8, vp: 3, micro_batch_size: 1, sequence_parallel: true,"
        " recompute: selective, zero_stage: 1, cp: 1}\n"
    )
    j = json.loads(runner.invoke(main, ["estimate", str(plan), "--json"]).output)
    profile = [a for a in j["assumed"] if a.startswith("framework megatron-core")]
    assert len(profile) == 1
    # the one flag set against the profile is listed; the one set to the profile's value is not
    assert "tp_comm_overlap off (profile: on)" in profile[0]
    assert "flash_attention" not in profile[0] and "persist_layer_norm" not in profile[0]
    default = json.loads(
        runner.invoke(main, ["estimate", "examples/clean-plan.yaml", "--json"]).output
    )
    text = next(a for a in default["assumed"] if a.startswith("framework"))
    assert "the plan sets" not in text and "persist_layer_norm" not in text
