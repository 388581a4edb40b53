"""Pipeline schedule simulator and Gantt charts (issue 6)."""

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from perfmodel.cli import main
from perfmodel.cost import pipeline as pipe
from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.engine.schedule import simulate
from perfmodel.errors import PerfModelError
from perfmodel.inputs import load_plan
from perfmodel.output.gantt import svg, text_rows


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("m", [1, 2, 5, 8, 48])
def test_equal_stages_match_the_closed_form(schedule, p, m):  # SPEC 7: (p-1)/(m+p-1), (p-1)/m
    for tf, tb in ((1.0, 1.0), (1.0, 2.0), (0.3, 0.7)):
        s = simulate(p, m, 1, schedule, tf, tb)
        assert s.step_time == pytest.approx((m + p - 1) * (tf + tb))
        assert s.bubble_over_step == pytest.approx(float(pipe.bubble_over_step(p, m)), abs=1e-12)
        assert s.bubble_over_ideal == pytest.approx(float(pipe.bubble_over_ideal(p, m)), abs=1e-12)


@pytest.mark.parametrize("p", [2, 3, 4, 8])
@pytest.mark.parametrize("v", [2, 3, 4])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_interleaved_matches_its_formula(p, v, k):  # Narayanan 2021, Sec. 2.2.2: (p-1)/(m v)
    m = k * p
    s = simulate(p, m, v, "interleaved", 1.0, 2.0)
    assert s.bubble_over_ideal == pytest.approx(float(pipe.bubble_over_ideal(p, m, v)), abs=1e-12)
    assert s.step_time == pytest.approx(float(pipe.step_time_units(p, m, v)) * 3.0)


# GPipe m, 1F1B p - stage, interleaved 1F1B x (1 + (p-1)/(p v)) on stage 0
def test_in_flight_per_stage():
    assert list(simulate(4, 8, 1, "gpipe").peak_in_flight) == [8, 8, 8, 8]
    assert list(simulate(4, 8, 1, "1f1b").peak_in_flight) == [4, 3, 2, 1]
    assert list(simulate(2, 1, 1, "1f1b").peak_in_flight) == [1, 1]  # never more than m
    s = simulate(4, 8, 2, "interleaved")
    assert s.peak_in_flight[0] == pytest.approx(4 * (1 + 3 / 8))
    assert s.peak_in_flight[0] == pytest.approx(
        float(pipe.in_flight_microbatches(4, 8, 2, "interleaved"))
    )


def test_unequal_stages_make_the_bubble_larger():
    equal = simulate(8, 32, 1, "1f1b", 1.0, 2.0)
    tf, tb = np.ones(8), 2 * np.ones(8)
    tf[-1] *= 1.3
    tb[-1] *= 1.3
    heavy = simulate(8, 32, 1, "1f1b", tf, tb)
    assert heavy.bubble_over_step > equal.bubble_over_step
    # the slowest stage sets the pace: makespan = sum of one pass + (m-1) x slowest (1F1B, no
    # latency)
    T = tf + tb
    assert heavy.step_time == pytest.approx(T.sum() + 31 * T.max(), rel=0.01)


def test_latency_adds_to_the_step():
    base = simulate(4, 8, 1, "1f1b", 1.0, 2.0)
    for blocking in (False, True):
        assert (
            simulate(4, 8, 1, "1f1b", 1.0, 2.0, 0.1, blocking=blocking).step_time > base.step_time
        )


def test_estimate_uses_the_simulated_pipeline_when_stages_differ():
    plan = load_plan("gpt3-175b-3d.yaml")
    cfg = resolve_config(plan)
    est = estimate(plan, cfg)
    v = est.values
    assert v["stage_time_last_s"] > v["stage_time_middle_s"]  # output layer on the last stage
    tf, tb = est.stage_fwd_s, est.stage_bwd_s
    tt = [a + b for a, b in zip(tf, tb)]
    assert (
        len(tt) == 8
        and tt[0] == pytest.approx(v["stage_time_first_s"])
        and tt[-1] == v["stage_time_last_s"]
    )
    assert tt[1:-1] == pytest.approx([v["stage_time_middle_s"]] * 6, rel=1e-12)
    sim = simulate(8, 48, 1, "1f1b", tf, tb)
    assert v["bubble"] == pytest.approx(sim.step_time - 48 * max(tt))
    assert v["bubble_simulated_over_step"] == pytest.approx(sim.bubble_over_step)


@pytest.mark.parametrize(
    "args,needle",
    [
        ((4, 6, 2, "interleaved"), "multiple of p"),
        ((4, 8, 1, "interleaved"), "needs v > 1"),
        ((4, 8, 2, "1f1b"), "interleaved"),
        ((4, 8, 1, "zigzag"), "unknown schedule"),
        ((0, 8, 1, "1f1b"), "positive"),
    ],
)
def test_bad_arguments(args, needle):
    with pytest.raises(PerfModelError, match=needle):
        simulate(*args)


def test_per_stage_times_must_match_p():
    with pytest.raises(PerfModelError, match="per-stage"):
        simulate(4, 8, 1, "1f1b", [1, 2, 3], 1.0)


def test_text_gantt_fits_80_columns_and_shows_idle():
    s = simulate(8, 64, 1, "1f1b")
    rows = text_rows(s, 80)
    assert len(rows) == 8 and all(len(r) <= 80 for r in rows)
    assert "." in rows[0] and "." in rows[-1] and rows[0].count(".") > 0


def test_svg_is_well_formed_with_one_row_per_stage(tmp_path):
    s = simulate(4, 8, 2, "interleaved")
    root = ET.fromstring(svg(s, "test & <chart>"))
    ns = "{http://www.w3.org/2000/svg}"
    rows = [g for g in root.iter(f"{ns}g") if g.get("class") == "stage"]
    assert len(rows) == 4
    assert all(
        len(g.findall(f"{ns}rect")) == 1 + 2 * 8 * 2 for g in rows
    )  # background + F and B per pass


def test_cli_schedule(runner, tmp_path):
    out = tmp_path / "g.svg"
    r = runner.invoke(main, ["schedule", "-m", "8", "-p", "4", "--svg", str(out)])
    assert r.exit_code == 0 and "27.3%" in r.output and "stage 3" in r.output
    ET.parse(out)
    d = json.loads(
        runner.invoke(main, ["schedule", "-m", "8", "-p", "4", "-v", "2", "--json"]).output
    )
    assert d["bubble_over_ideal"] == pytest.approx(3 / 16)
    r = runner.invoke(main, ["schedule", "gpt3-175b-3d.yaml", "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["p"] == 8
    r = runner.invoke(main, ["schedule"])
    assert r.exit_code == 2 and "-m and -p" in r.output
    r = runner.invoke(main, ["schedule", "-m", "6", "-p", "4", "-v", "2"])
    assert r.exit_code == 1 and "multiple of p" in r.output


def test_text_gantt_turns_coarse_when_blocks_outnumber_columns():
    """Issue 15: at m=48, p=8 the numbered chart (two glyphs per block) was unreadable in 80
    columns."""
    from perfmodel.output.gantt import legend

    s = simulate(8, 48, 1, "1f1b")
    rows = text_rows(s, 80)
    assert all(len(r) <= 80 and set(r.split("|", 1)[1]) <= set("FB.") for r in rows)
    assert rows[0].split("|", 1)[1].startswith("FFFF") and "--svg" in legend(s, 80)
    small = simulate(4, 8, 1, "1f1b")
    assert set(text_rows(small, 80)[0].split("|", 1)[1]) - set(".") <= set("01234567abcdefgh")
    assert "digits" in legend(small, 80)


def test_text_gantt_time_axis_ends_at_the_step_time():
    from perfmodel.output.gantt import time_axis

    s = simulate(4, 8, 1, "1f1b")
    ticks, labels = time_axis(s, 80)
    assert len(ticks) <= 80 and ticks.count("|") == 4 and labels.split()[0] == "0"
    assert float(labels.split()[-1]) == pytest.approx(
        s.step_time, rel=0.01
    )  # 33 units at m=8, p=4 (SPEC 9)


def test_per_stage_times_split_in_python_as_numpy_splits_them():
    """An estimate's per-stage times (Python floats) are split over the chunks in Python
    (schedule_times.virtual_times), to the bit what numpy's split gives, and refused alike where
    one is negative or not finite."""
    from perfmodel.engine.schedule_times import per_virtual, virtual_times

    rng = np.random.default_rng(3)
    for p, v in ((1, 1), (2, 1), (4, 2), (8, 4), (16, 2), (3, 7)):
        times = [float(t) for t in rng.uniform(1e-4, 3e-2, p)]
        want = tuple(per_virtual(times, p, v, "t_f").tolist())
        assert virtual_times(times, p, v, "t_f") == want
        assert virtual_times(tuple(times), p, v, "t_f") == want
    for bad in (-1e-3, float("nan"), float("inf")):
        with pytest.raises(PerfModelError, match="t_b: times must be finite and non-negative"):
            virtual_times([1e-3, bad], 2, 2, "t_b")
