"""`perfmodel sweep` (issue 15, item 2): each point is the search (or, --fixed, the estimate) on the
plan with one field changed, the field is validated as a plan file's is, and a point that cannot run
says why.
"""

import json

import pytest
from click.testing import CliRunner
from helpers import says

from perfmodel.cli import main
from perfmodel.errors import PerfModelError
from perfmodel.inputs import load_plan
from perfmodel.review.sweep import changed, parse_vary


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_each_point_is_the_search_on_the_changed_plan():
    r = invoke("sweep", "gpt3-175b.yaml", "--vary", "gpus=256,512,1000", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["field"] == "system.num_gpus" and [p["value"] for p in out["points"]] == [
        "256",
        "512",
        "1000",
    ]
    # each point is `plan`'s answer on the changed plan (issue 37: one answer), not merely the
    # fastest predicted configuration
    for p in out["points"][:2]:
        best = json.loads(
            invoke("plan", "gpt3-175b.yaml", "--gpus", p["value"], "--top", "1", "--json").output
        )["results"][0]
        assert p["step_time_s"] == best["step_time_s"] and p["config"] == best["config"]
        assert p["num_gpus"] == int(p["value"]) and p["fits"]
    # 1000 = 2^3 x 5^3 GPUs: no tp x pp x dp fills them with 96 layers and a batch of 1536; said,
    # not skipped
    assert "no valid configuration for 1000 GPUs" in out["points"][2]["error"]
    # strong scaling: the same batch on twice the GPUs is less than twice as fast (more DP traffic,
    # bubble)
    a, b = out["points"][:2]
    assert 1.5 < b["tokens_per_s"] / a["tokens_per_s"] < 2.0


def test_fixed_keeps_the_plans_knobs_and_a_slower_link_is_slower():
    r = invoke(
        "sweep",
        "examples/clean-plan.yaml",
        "--vary",
        "inter_node_bandwidth=25 GB/s,12.5 GB/s",
        "--fixed",
        "--json",
    )
    assert r.exit_code == 0, r.output
    fast, slow = json.loads(r.output)["points"]
    est = json.loads(invoke("estimate", "examples/clean-plan.yaml", "--json").output)
    assert fast["step_time_s"] == est["step_time_s"]  # 25 GB/s is the plan's own InfiniBand HDR
    assert fast["config"] == slow["config"] == est["config"]
    assert slow["step_time_s"] > fast["step_time_s"]


def test_fields_are_validated_like_a_plan_file():
    plan = load_plan("gpt3-175b.yaml")
    assert changed(plan, "system.gpu", "h100-sxm").system.gpu.name.startswith("H100")
    assert (
        changed(
            plan, "system.inter_node_link.bandwidth_bytes_per_s", "12.5 GB/s"
        ).system.inter_node_link.bandwidth_bytes_per_s
        == 12.5e9
    )
    assert (
        changed(plan, "training.framework", "megatron-2022").training.framework == "megatron-2022"
    )
    assert changed(plan, "model.num_layers", "48").model.num_layers == 48
    assert parse_vary("gbs=512, 1024") == ("training.global_batch_size", ["512", "1024"])
    for bad in ("gpus", "gpus=", "=1,2", "foo=1"):
        with pytest.raises(PerfModelError, match="--vary"):
            parse_vary(bad)


@pytest.mark.parametrize(
    "vary, message",
    [
        (
            "gpus=abc",
            "--vary system.num_gpus=abc: system: num_gpus: Input should be a valid integer",
        ),
        ("gpu=a200", "unknown GPU preset 'a200'"),
        ("training.nosuch=3", "training has no field 'nosuch'"),
        (
            "system.gpu.hbm_capacity_bytes=-4",
            "hbm_capacity_bytes: Input should be greater than or equal to 1",
        ),
        ("inter_node_bandwidth=fast", "bandwidth_bytes_per_s"),
    ],
)
def test_bad_values_are_one_line_errors(vary, message):
    r = invoke("sweep", "gpt3-175b.yaml", "--vary", vary)
    assert r.exit_code == 1 and says(r.stderr, message) and "Traceback" not in r.stderr, r.stderr


def test_nothing_runs_exits_1_and_the_plot_is_announced(tmp_path):
    r = invoke("sweep", "gpt3-175b.yaml", "--vary", "parallel.tp=3")
    assert (
        r.exit_code == 1
        and "parallel.tp=3: parallel.tp 3 does not divide num_gpus(512)" in r.stdout
    )
    pytest.importorskip("matplotlib")
    png = tmp_path / "s.png"
    r = invoke("sweep", "gpt3-175b.yaml", "--vary", "gpus=256,512", "--plot", str(png))
    assert r.exit_code == 0 and png.stat().st_size > 10_000 and f"wrote {png}" in r.stderr
