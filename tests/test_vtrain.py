"""vTrain's single-node runs (issue 38): the bundled CSV, each row as a plan, the ordering figure,
and `perfmodel validate vtrain`. The full 1,440 run in the benchmark; these take every 12th row."""

import json

import numpy as np
import pytest

from perfmodel.cli import main
from perfmodel.errors import PerfModelError
from perfmodel.inputs import vtrain
from perfmodel.review.ordering import ordering
from perfmodel.review.validate_vtrain import validate_vtrain


def test_the_bundled_csv_is_vtrains_single_node_set():
    runs = vtrain.runs()
    assert len(runs) == 1440
    assert {r.gpus for r in runs} == {2, 4, 8}
    assert len({r.family for r in runs}) == 144
    first = runs[0]  # the CSV's first data row
    assert (first.gpus, first.global_batch, first.micro_batch, first.hidden) == (2, 16, 8, 1024)
    assert (first.tp, first.dp, first.pp) == (1, 1, 2)
    assert first.measured_s == pytest.approx(0.372160408)


def test_a_row_is_the_plan_vtrains_configurations_state():
    plan = vtrain.runs()[0].plan()
    assert plan.training.framework == "deepspeed"
    assert plan.training.flash_attention is False
    assert plan.training.overlap_grad_reduce is False  # use_gradient_bucket false
    assert plan.parallel.recompute == "full" and plan.parallel.schedule == "1f1b"
    assert plan.system.gpu.name == "A100-SXM4-80GB" and plan.system.gpus_per_node == 8
    assert plan.model.vocab_size == 51200 and plan.training.dtype == "fp16"


@pytest.mark.parametrize(
    "text, said",
    [
        ("a,b\n1,2\n", "header"),
        (",".join(vtrain.COLUMNS) + "\n2,16,8,1024,16,24,1024,1,1\n", "row 1 has 9 fields"),
        (",".join(vtrain.COLUMNS) + "\n2,16,8,1024,16,24,1024,1,1,x,3.0\n", "not numbers"),
        (",".join(vtrain.COLUMNS) + "\n4,16,8,1024,16,24,1024,1,1,2,3.0\n", "not its 4 GPUs"),
    ],
)
def test_a_malformed_file_says_what_is_wrong(text, said):
    with pytest.raises(PerfModelError, match=said):
        vtrain.parse(text, "runs.csv")


def test_ordering_counts_pairs_within_families_and_ties():
    # family a: measured 1 < 2 < 4, predicted 1 < 4 > 3: (1,2) right, (1,4) right, (2,4) wrong
    # family b: 1.0 and 1.02 are a tie (gap 2% < 3%): no pair; c has one run: not a family
    o = ordering(
        ["a", "a", "a", "b", "b", "c"],
        [1.0, 2.0, 4.0, 1.0, 1.02, 5.0],
        [1.0, 4.0, 3.0, 2.0, 1.0, 1.0],
    )
    assert (o.families, o.pairs, o.right) == (2, 3, 2)
    # a's predicted fastest is its measured fastest; b's predicted fastest is within the tie
    assert o.top1 == 2
    assert ordering(["a", "a"], [1.0, 2.0], [2.0, 1.0]).right == 0


@pytest.fixture(scope="module")
def sample():
    return validate_vtrain(every=12)


def test_the_report_is_each_runs_error(sample):
    s = sample.summary()
    assert s["runs"] == 120
    err = np.array([r["error_pct"] for r in sample.to_json()["runs"]])
    assert s["mean_abs_error_pct"] == pytest.approx(np.abs(err).mean())
    assert s["runs_predicted_fast"] == int((err < 0).sum())
    assert sum(g["runs"] for g in sample.by_gpus()) == 120


def test_validate_vtrain_prints_the_error_and_the_ordering(runner, monkeypatch):
    from perfmodel.review import validate_vtrain as vv

    real = vv.validate_vtrain
    monkeypatch.setattr(vv, "validate_vtrain", lambda calibration=None: real(24, calibration))
    r = runner.invoke(main, ["validate", "vtrain"])
    assert r.exit_code == 0, r.output
    assert "mean |error|" in r.output and "ordered as measured" in r.output
    assert max(len(x) for x in r.output.splitlines()) <= 80
    j = runner.invoke(main, ["validate", "vtrain", "--json"])
    assert json.loads(j.output)["vtrain"]["runs"] == 60


@pytest.mark.parametrize(
    "args, said",
    [(["vtrain", "k22"], "on its own"), (["vtrain", "--breakdown"], "drop --breakdown")],
)
def test_validate_vtrain_refuses_what_it_cannot_do(runner, args, said):
    r = runner.invoke(main, ["validate", *args])
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert said in r.output


def test_the_whole_set_is_predicted_and_ordered_within_the_targets():
    """The targets vTrain's set was taken in for: mean step error at most 15%, at least 90% of the
    layout pairs (measured gap 3% or more) ordered as measured. All 1,440 runs (about 10 s)."""
    s = validate_vtrain().summary()
    assert s["runs"] == 1440
    assert s["mean_abs_error_pct"] <= 15.0
    assert s["ordering"]["pair_accuracy"] >= 0.90
