"""Accuracy against published measurements (issue 4).

The efficiency parameters are fitted once, on Korthikanti 2022 Table 4 only
(benchmarks/calibrate_a100.py); link efficiencies come from NCCL bus-bandwidth
reports. Every step time below is a check, not a fit.
"""

import json

import pytest

from perfmodel import presets
from perfmodel.cli import main
from perfmodel.errors import PerfModelError
from perfmodel.validate import measured_step_time, run_case, validate


@pytest.fixture(scope="module")
def report():
    return validate()


def test_korthikanti_table5_targets(report):  # issue 4: mean <= 3%, max <= 6% (peer tool: 3.65% / 8.87%)
    t = report.tables["korthikanti2022-table5"]
    assert t["cases"] == 8
    assert t["mean_abs_error_pct"] <= 3.0
    assert t["max_abs_error_pct"] <= 6.0


@pytest.mark.xfail(strict=True, reason=(
    "Narayanan 2021 Table 1 misses the issue's target: mean 6.7%, max 11.7%, optimistic for every TP8 run. "
    "Micro-batch and interleaving depth are unpublished; the search picks the fastest our model knows, and "
    "that choice alone moves a run by up to 14%. The same 1T pipeline (tp8, pp64, micro-batch 1, m=512, "
    "full recompute) measured 102.6 s in 2021 and 94.4 s in Korthikanti 2022 on the same cluster (8.7%); "
    "on that identical pipeline the model gives 100.1 s and 94.6 s (-2.5% and +0.1%)."))
def test_narayanan_table1_targets(report):  # issue 4: mean <= 5%, max <= 10%
    t = report.tables["narayanan2021-table1"]
    assert t["mean_abs_error_pct"] <= 5.0 and t["max_abs_error_pct"] <= 10.0


def test_narayanan_table1_accuracy_achieved(report):
    """A guard at the accuracy reached today (short of the issue's target, see the xfail above)."""
    t = report.tables["narayanan2021-table1"]
    assert t["cases"] == 10
    assert t["mean_abs_error_pct"] <= 7.0 and t["max_abs_error_pct"] <= 12.0


def test_sp_selective_gain_over_full_recompute(report):  # Korthikanti Table 5: +29% to +32%; issue: 25-35%
    assert len(report.sp_gain) == 4
    for g in report.sp_gain:
        assert 25.0 <= g["predicted_gain_pct"] <= 35.0, g
        assert abs(g["predicted_gain_pct"] - g["measured_gain_pct"]) <= 4.0, g


def test_table4_per_layer_fit(report):
    """Table 4 is the calibration set: the fit should reproduce every time within 2%."""
    assert len(report.per_layer) == 5
    for r in report.per_layer:
        assert abs(r["fwd_error_pct"]) <= 2.0 and abs(r["bwd_error_pct"]) <= 2.0, r


def test_published_tflops_become_step_times():
    # Narayanan Table 1, 1T: 163 TFLOP/s per GPU on 3072 GPUs under eq. 3 -> 102.6 s per iteration
    case = next(c for c in presets.validation_cases() if c["name"] == "n21-gpt-1008b")
    assert measured_step_time(case["plan"], case["measured"]) == pytest.approx(102.6, abs=0.1)
    k = next(c for c in presets.validation_cases() if c["name"] == "k22-175b-sp-sel")
    assert measured_step_time(k["plan"], k["measured"]) == 13.75


def test_bundled_cases_are_fully_pinned(report):
    """Every bundled run states all its knobs; Narayanan's micro-batch, interleaving and DDP come from
    the authors' reproduction script (Megatron-LM examples/sc21/run_table_1.sh), named in each file."""
    for c in report.cases:
        assert c.searched == [] and c.to_json()["chosen"] == {}
        if c.name.startswith("n21"):
            assert "examples/sc21/run_table_1.sh" in c.source


def test_searched_knobs_are_chosen_and_reported():
    """A run that leaves knobs unstated gets them from the search, and the report names the choice."""
    case = dict(next(c for c in presets.validation_cases() if c["name"] == "n21-gpt-145.6b"))
    case["searched"] = ["micro_batch_size", "vp"]
    r = run_case(case)
    assert r.searched == ["micro_batch_size", "vp"]
    chosen = r.to_json()["chosen"]
    assert set(chosen) == {"micro_batch_size", "vp", "schedule"} and chosen["micro_batch_size"] >= 1
    # the search optimises over the unstated knobs, so it can only be as fast or faster than the pinned run
    assert r.predicted_s <= run_case(next(c for c in presets.validation_cases()
                                          if c["name"] == "n21-gpt-145.6b")).predicted_s * (1 + 1e-9)


def test_cli_validate_json(runner):
    r = runner.invoke(main, ["validate", "k22", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert {c["case"] for c in d["cases"]} == {"k22-22b-full", "k22-22b-sp-sel", "k22-175b-full", "k22-175b-sp-sel",
                                               "k22-530b-full", "k22-530b-sp-sel", "k22-1t-full", "k22-1t-sp-sel"}
    for c in d["cases"]:
        assert {"measured_step_time_s", "predicted_step_time_s", "error_pct", "source"} <= set(c)


def test_cli_validate_text(runner):
    r = runner.invoke(main, ["validate"])
    assert r.exit_code == 0 and "mean |error|" in r.output and "Table 4" in r.output


def test_unknown_case(runner):
    r = runner.invoke(main, ["validate", "gpt-9000"])
    assert r.exit_code == 1 and "no validation case matches gpt-9000" in r.output


def test_unknown_convention():
    plan = presets.load_plan("gpt3-175b.yaml")
    with pytest.raises(PerfModelError, match="flop_convention"):
        measured_step_time(plan, {"tflops_per_gpu": 100, "flop_convention": "mine"})


def test_unknown_searched_knob_is_named():
    case = dict(next(c for c in presets.validation_cases() if c["name"] == "n21-gpt-1.7b"))
    case["searched"] = ["mbs_typo"]
    with pytest.raises(PerfModelError, match="mbs_typo"):
        run_case(case)
