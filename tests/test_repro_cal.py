"""The calibration reproducers of issue 39 item 2 (tests/data/repro/NAME, copied from the shared
set with their README.txt), each run in its folder as its README says: every one now a clear
one-line error naming the file and the key, or a faithful reading."""

import json
import shutil
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers import one_line_error, run, says

from perfmodel.cli import main

REPRO = Path(__file__).parent / "data" / "repro"


@pytest.mark.parametrize(
    "case, needles",
    [
        ("cal_factor_inf_numpy_warnings", ["cal.yaml: factors.compute must be a finite number"]),
        ("cal_negative_overhead_negative_step", ["cal.yaml: factors.overhead_s", "0 or more"]),
        ("cal_out_of_sample_negative", ["cal.yaml: out_of_sample.all", "0 or more"]),
        (
            "cal_unknown_factor_name",
            ["cal.yaml: factors: unknown factor 'gemm_bf17'; did you mean 'gemm_bf16'?"],
        ),
    ],
)
def test_hand_edited_cal_yaml_refused_by_key(case, needles):
    """A CAL.yaml with an infinite factor, a negative overhead (a step of -97 s that `plan`
    ranked), a negative out-of-sample error or a misspelt factor: one line naming the key."""
    one_line_error(
        run(case, "estimate", "p8.yaml", "--calibration", "cal.yaml", "--json"), *needles
    )


def test_negative_overhead_never_ranked():
    """`plan` refuses the calibration too: no configuration is ranked by a negative step."""
    r = run("cal_negative_overhead_negative_step", "plan", "free.yaml", "--calibration", "cal.yaml")
    one_line_error(r, "factors.overhead_s")


def test_fit_duplicate_factor():
    r = run("cal_fit_duplicate_factor", "calibrate", "runs.yaml", "-o", "cal.yaml")
    one_line_error(r, "runs.yaml: fit: compute is named twice")
    assert not (REPRO / "cal_fit_duplicate_factor" / "cal.yaml").exists()


@pytest.mark.parametrize(
    "fit, needles",
    [
        ("[rate, compute]", ["fit: rate already holds compute"]),
        ("[compute, gemm_bf16]", ["fit: compute already holds gemm_bf16"]),
        ("[rate, comm]", ["fit: rate already holds comm"]),
        ("[gemm_bf16]", ["fit: gemm_bf16 is a kernel-class factor", "trace"]),
    ],
)
def test_fit_overlapping_factors(tmp_path, fit, needles):
    """Nested factors are refused by name (the folder's fit: [rate, compute] first), and so is a
    kernel-class factor asked of step times."""
    src = REPRO / "cal_fit_overlapping_factors"
    if fit == "[rate, compute]":
        one_line_error(run(src.name, "calibrate", "runs.yaml", "-o", str(tmp_path / "c.yaml")))
    for name in ("p8.yaml", "p70.yaml"):
        shutil.copy(src / name, tmp_path / name)
    text = (src / "runs.yaml").read_text().replace("fit: [rate, compute]", f"fit: {fit}")
    (tmp_path / "runs.yaml").write_text(text)
    r = CliRunner().invoke(
        main, ["calibrate", str(tmp_path / "runs.yaml"), "-o", str(tmp_path / "c.yaml")]
    )
    one_line_error(r, *needles)


def test_nsys_instances_not_number():
    for runs, cell in (("runs_abc.yaml", "'abc'"), ("runs_huge.yaml", "'1e999'")):
        r = run("cal_nsys_instances_not_number", "calibrate", runs, "-o", "a.yaml")
        one_line_error(r, "Instances of 'sm90_xmma_gemm", "is not a whole number", cell)


def test_output_overwrites_plan():
    """-o naming the run's own plan is refused and the plan is left as it was."""
    plan = REPRO / "cal_output_overwrites_plan" / "b16.yaml"
    before = plan.read_text()
    r = run("cal_output_overwrites_plan", "calibrate", "runs.yaml", "-o", "b16.yaml")
    one_line_error(r, "-o b16.yaml: that is runs.yaml's runs[0].plan", "write the calibration")
    assert plan.read_text() == before


def test_output_overwrites_trace(tmp_path):
    """-o naming the run's trace is refused the same way."""
    src = REPRO / "cal_trace_contradicts_measured"
    for name in ("p8.yaml", "t.json"):
        shutil.copy(src / name, tmp_path / name)
    (tmp_path / "runs.yaml").write_text("runs:\n  - plan: p8.yaml\n    trace: t.json\n")
    out = str(tmp_path / "t.json")
    r = CliRunner().invoke(main, ["calibrate", str(tmp_path / "runs.yaml"), "-o", out])
    one_line_error(r, "runs[0].trace, an input of this calibration")


def test_peak_memory_shown_beside_the_model(tmp_path):
    """The measured 60 GB is printed beside the model's allocated peak (48 GB), in text and JSON,
    and kept in CAL.yaml; 500 GB on a 192 GB B200 is refused by name."""
    out = str(tmp_path / "c.yaml")
    r = run("cal_peak_memory_dropped", "calibrate", "runs.yaml", "-o", out)
    assert r.exit_code == 0, r.output
    assert says(r.output, "peak memory: measured 60.0 GB, model 48.0 GB allocated")
    r = run("cal_peak_memory_dropped", "calibrate", "runs.yaml", "-o", out, "--json")
    row = json.loads(r.stdout)["runs"][0]
    assert row["measured_peak_memory_gb"] == 60
    assert row["predicted_peak_memory_gb"] == pytest.approx(48.0, abs=0.5)
    assert "measured_peak_memory_gb: 60" in Path(out).read_text()
    r = run("cal_peak_memory_dropped", "calibrate", "runs_500.yaml", "-o", out)
    one_line_error(r, "runs[0].measured.peak_memory_gb: 500 GB is more than", "GB of HBM")


def test_plan_path_never_from_the_cwd():
    r = run("cal_plan_path_falls_back_to_cwd", "calibrate", "sub/runs.yaml", "-o", "cal.yaml")
    one_line_error(r, "sub/runs.yaml: runs[0].plan: no sub/p.yaml")
    assert not (REPRO / "cal_plan_path_falls_back_to_cwd" / "cal.yaml").exists()


def test_base_plan_calibration_relative_to_its_file():
    case = "base_plan_calibration_relative"
    alone = run(case, "estimate", "sub/p.yaml", "--json")
    assert alone.exit_code == 0, alone.output
    extended = run(case, "estimate", "plan.yaml", "--json")
    assert extended.exit_code == 0, extended.output
    a, b = json.loads(alone.stdout), json.loads(extended.stdout)
    assert b["step_time_s"] == pytest.approx(a["step_time_s"])
    assert says(extended.stdout, "sub/c.yaml")


def test_trace_contradicts_measured():
    """A trace of 0.96 s steps against a measured 2.92 s step: refused, both named."""
    r = run("cal_trace_contradicts_measured", "calibrate", "runs.yaml", "-o", "cal.yaml")
    one_line_error(r, "the trace's step is 0.957 s", "measured 2.92 s", "a trace of another run?")


def test_trace_fully_overlapped_comm_accepted(tmp_path):
    """The folder's command is refused for its measured step (2.92 s against the trace's 0.92 s);
    with the trace's own step, the hidden communication is accepted as a measurement: comm not
    fitted, saying that all 120 ms a step ran beside computation."""
    case = "cal_trace_fully_overlapped_comm_refused"
    one_line_error(run(case, "calibrate", "runs.yaml", "-o", "cal.yaml"), "the trace's step")
    for name in ("p8.yaml", "t.json"):
        shutil.copy(REPRO / case / name, tmp_path / name)
    (tmp_path / "runs.yaml").write_text("runs:\n  - plan: p8.yaml\n    trace: t.json\n")
    out = tmp_path / "cal.yaml"
    r = CliRunner().invoke(main, ["calibrate", str(tmp_path / "runs.yaml"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert says(r.output, "not fitted: comm: all 120.0 ms a step of communication kernels run")
    assert "comm" not in yaml.safe_load(out.read_text())["factors"]


def test_trace_negative_duration_named():
    r = run("cal_trace_negative_duration_message", "calibrate", "runs.yaml", "-o", "cal.yaml")
    one_line_error(r, "t.json: kernel event 'sm90_xmma_gemm", "has a negative dur -5000000")


def test_trace_large_corrupt_fails_fast(tmp_path):
    """The reproducer's corrupt trace (gen.py's, at 5 MB here; a bad first event): refused at
    once, naming the character in the file, without reading it all."""
    case = REPRO / "cal_trace_large_corrupt_quadratic"
    shutil.copy(case / "p8.yaml", tmp_path / "p8.yaml")
    text = (case / "runs_e50.yaml").read_text().replace("e50.json", "e5.json")
    (tmp_path / "runs.yaml").write_text(text)
    cpu = (
        '{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 2, "ts":'
        ' 1000000.0, "dur": 3.0, "args": {"Input Dims": [[8192, 4096], [4096, 4096]]}}'
    )
    with open(tmp_path / "e5.json", "w") as fh:
        fh.write('{"traceEvents": [\n{"ph": "X", "cat": "kernel", "name": "x", "ts": 1, dur: 2}')
        while fh.tell() < 5e6:
            fh.write((",\n" + cpu) * 1000)
        fh.write("\n]}\n")
    t0 = time.perf_counter()
    r = CliRunner().invoke(
        main, ["calibrate", str(tmp_path / "runs.yaml"), "-o", str(tmp_path / "c.yaml")]
    )
    one_line_error(r, "e5.json: traceEvents: bad JSON at character 69 of the file")
    assert says(r.output, "the trace is corrupt")
    assert time.perf_counter() - t0 < 20  # the old reader took a minute and more at 200 MB
