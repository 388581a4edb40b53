"""The ranking benchmark (issue 38, item 5): families of validation runs, pairwise ordering with
ties under 3% left out, top-1 agreement, reported by `validate` and benchmarks/ranking.py."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.inputs import presets
from perfmodel.review.ranking import Run, family_key, rank, score

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def plans():
    cases = {c["name"]: c["plan"] for c in presets.validation_cases()}
    return cases


def test_family_is_model_hardware_sequence_precision_batch(plans):
    """Layouts of one run differ only in layout: one family; another batch or GPU is another."""
    a, b = plans["zoo-qwen3-235b-1"], plans["zoo-qwen3-235b-2"]
    assert family_key(a) == family_key(b)
    assert family_key(a) != family_key(a.with_training(global_batch_size=1024))
    assert family_key(plans["fms-eager-7b-a100-128gpu"]) != family_key(
        plans["fms-eager-7b-h100-96gpu"]
    )


def test_pairs_ties_wide_gaps_and_top1(plans):
    p = plans["zoo-qwen3-235b-1"]
    runs = [
        Run("a", p, 1.00, 1.00),  # fastest measured and predicted
        Run("b", p, 1.02, 1.30),  # 2% from a: a tie, left out
        Run("c", p, 1.20, 1.10),  # 20% from a, right; 18% from b, wrong (b predicted slower)
        Run("d", p, 1.06, 1.40),  # 6% from a: right, not wide; b/d: 4%, right; c/d: 13%, wrong
    ]
    f = score("x", runs)
    assert f.ties == 1
    assert f.pairs == 5
    assert f.right == 3  # a/c, a/d, b/d
    assert (f.wide_pairs, f.wide_right) == (3, 1)  # a/c right; b/c and c/d wrong
    assert f.top1
    assert sorted(w.split()[0] for w in f.wrong) == ["b", "d"]  # the faster measured first


def test_equal_predictions_order_nothing(plans):
    """A model that predicts two layouts alike has not ordered them, whichever is first."""
    p = plans["zoo-qwen3-235b-1"]
    for first, second in ((1.0, 1.1), (1.1, 1.0)):
        f = score("x", [Run("a", p, first, 2.0), Run("b", p, second, 2.0)])
        assert (f.pairs, f.right, f.top1) == (1, 0, False)


def test_gpu_counts_compared_per_gpu(plans):
    """Different GPU counts are compared by tokens per second per GPU, not by the step."""
    small, big = plans["zero3-2021-174.6b-384gpu"], plans["zero3-2021-174.6b-1536gpu"]
    # the 1,536-GPU run's step is shorter but each GPU does less: slower per GPU
    runs = [Run("small", small, 4.0, 4.0), Run("big", big, 2.0, 0.8)]
    f = rank(runs).families[0]
    assert f.pairs == 1 and f.right == 0  # predicted 4 x 384 / (0.8 x 1536) = 1.25: big faster
    runs[1] = Run("big", big, 2.0, 1.6)
    assert rank(runs).families[0].right == 1


def test_validate_reports_ranking_in_json_and_text():
    r = CliRunner().invoke(main, ["validate", "primus", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)["ranking"]
    (fam,) = out["families"]
    assert len(fam["runs"]) == 5
    t = out["totals"]
    assert t["pairs"] + t["ties"] == 10
    assert t["ordered_right"] == fam["ordered_right"] <= t["pairs"]
    text = CliRunner().invoke(main, ["validate", "primus"]).output
    assert "Ranking" in text and "top-1" in text
    assert all(len(x) <= 80 for x in text.splitlines())


def test_single_runs_form_no_family():
    r = CliRunner().invoke(main, ["validate", "n21-gpt-1.7b", "--json"])
    assert json.loads(r.output)["ranking"]["families"] == []


def test_benchmark_script_prints_totals():
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "ranking.py"), "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    t = json.loads(r.stdout)["totals"]
    assert t["families"] >= 10 and t["pairs"] >= 20
    assert 0 <= t["accuracy_gap_10pct_pct"] <= 100
