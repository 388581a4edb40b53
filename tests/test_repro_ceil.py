"""The calibration reproducers of issue 39 (tests/data/repro/NAME, each run in its folder as its
README.txt says): measurements past the hardware's ceilings, absurdly slow, or contradicting each
other are refused in one line naming the run, the field and the implied rate."""

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.review.calibrate import per_run_scatter

REPRO = Path(__file__).parent / "data" / "repro"


def calibrate(case: str, runs: str, tmp_path: Path):
    """`perfmodel calibrate RUNS -o ...` inside the reproducer's folder."""
    old = os.getcwd()
    os.chdir(REPRO / case)
    try:
        return CliRunner().invoke(main, ["calibrate", runs, "-o", str(tmp_path / "cal.yaml")])
    finally:
        os.chdir(old)


def refused(result, tmp_path: Path, *needles: str) -> str:
    """One 'Error:' line (wrapped within 80 columns), exit 1, no traceback, no file written."""
    out = result.output
    assert result.exit_code == 1, out
    assert out.count("Error:") == 1 and "Traceback" not in out and "internal error" not in out
    assert "RuntimeWarning" not in out and "overflow" not in out
    assert all(len(line) <= 80 for line in out.splitlines()), out
    assert not (tmp_path / "cal.yaml").exists()
    flat = " ".join(out.split())
    for n in needles:
        assert n in flat, flat
    return flat


def test_calibrate_accepts_impossible_step(tmp_path):
    """3.1 s for 512 x 8192 tokens on 64 H100 in BF16: 21,100 tokens/s per GPU, 124% of the BF16
    peak, against a best measured matmul of 80.3%."""
    flat = refused(
        calibrate("calibrate_accepts_impossible_step", "runs.yaml", tmp_path),
        tmp_path,
        "runs[0].measured.step_time_s 3.1 (8B on 64 H100 (ours))",
        "21,141 tokens/s per GPU, MFU 124% of the H100-SXM5-80GB's BF16 peak",
        "the ceiling is 80.3%",
    )
    assert "MAMF" in flat


@pytest.mark.parametrize(
    "runs, needles",
    [
        ("runs.yaml", ["runs[0].measured.step_time_s 0.001", "MFU 21,085% of the B200"]),
        ("runs_tiny.yaml", ["runs[0].measured.step_time_s 1e-300", "MFU 2.1e+301%"]),
    ],
)
def test_cal_measured_faster_than_peak(tmp_path, runs, needles):
    """0.001 s a step of 65,536 tokens on 8 B200 (the model: 0.431 s) and 1e-300 s: refused
    before any fit, in a line of 80 columns (it printed a 300-digit percentage)."""
    refused(
        calibrate("cal_measured_faster_than_peak", runs, tmp_path),
        tmp_path,
        *needles,
        "the ceiling is 77.6%",
    )


@pytest.mark.parametrize(
    "runs, needles",
    [
        ("runs_1e308.yaml", ["runs[0].measured.step_time_s 1e+308", "below 0.1%"]),
        ("runs_1e6.yaml", ["runs[0].measured.step_time_s 1e+06", "MFU 2e-05%", "below 0.1%"]),
    ],
)
def test_cal_measured_absurd_slow(tmp_path, runs, needles):
    """1e308 s blamed the plan for an overflow; 1e6 s (11.6 days a step) was fitted at the cap
    and left -100% off. Both name the field and the implied MFU."""
    refused(calibrate("cal_measured_absurd_slow", runs, tmp_path), tmp_path, *needles)


def test_cal_contradictory_runs_same_configuration(tmp_path):
    """One plan measured 0.5 s and 5.0 s: both named, and the model's per-run scatter."""
    refused(
        calibrate("cal_contradictory_runs_accepted", "same.yaml", tmp_path),
        tmp_path,
        "runs[0] a and runs[1] b: one configuration measured 0.5 s and 5 s a step, 10.00x apart",
        "runs[0].measured.step_time_s and runs[1].measured.step_time_s",
        f"per-run scatter ({100 * per_run_scatter():.1f}%)",
    )


def test_cal_contradictory_runs_mistyped_rate(tmp_path):
    """The 70B's rate typed 10x (8290 for 829 tokens/s per GPU), fitted as comm x0.018 (links at 55
    times their rate): refused at the mistyped run, naming its field and the rate it implies."""
    refused(
        calibrate("cal_contradictory_runs_accepted", "two.yaml", tmp_path),
        tmp_path,
        "runs[1].measured.tokens_per_s_per_gpu 8290 (p70.yaml): 8,290 tokens/s per GPU",
        "FP8 peak; the ceiling is 70.9%",
    )


def test_the_corrected_runs_still_calibrate(tmp_path):
    """The same two runs with the 70B's rate as published (829): fitted within the ceilings."""
    folder = REPRO / "cal_contradictory_runs_accepted"
    for name in ("p8.yaml", "p70.yaml"):
        (tmp_path / name).write_text((folder / name).read_text())
    runs = (folder / "two.yaml").read_text().replace("8290", "829")
    (tmp_path / "runs.yaml").write_text(runs)
    r = CliRunner().invoke(
        main, ["calibrate", str(tmp_path / "runs.yaml"), "-o", str(tmp_path / "c.yaml")]
    )
    assert r.exit_code == 0, r.output
    assert "compute x" in r.output and (tmp_path / "c.yaml").exists()


def test_a_peak_far_from_the_model_is_warned(tmp_path):
    """calibrate_accepts_impossible_step's measured 58 GB against the model's 131.5 GB for that
    layout passed unremarked: with a possible step time (9.5 s), calibrate says so."""
    folder = REPRO / "calibrate_accepts_impossible_step"
    (tmp_path / "plan.yaml").write_text((folder / "plan.yaml").read_text())
    (tmp_path / "runs.yaml").write_text((folder / "runs.yaml").read_text().replace("3.1", "9.5"))
    r = CliRunner().invoke(
        main, ["calibrate", str(tmp_path / "runs.yaml"), "-o", str(tmp_path / "c.yaml")]
    )
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "warning: 8B on 64 H100 (ours): measured peak 58 GB, the model's 131.5 GB" in flat
