"""--calibration on every command that predicts (issue 32), and a plan's own `calibration:` key:
each says that a calibration is in use, and each moves its step times by it.

The calibration here is written by hand: compute x2 (every GEMM, attention and memory-bound kernel
twice as slow), so a calibrated step is between 1.3 and 2 times the plain one (communication and
fixed overheads do not move)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.inputs import presets

PLAN = "llama3-8b-h100"


@pytest.fixture()
def cal_file(tmp_path: Path) -> Path:
    path = tmp_path / "cal.yaml"
    path.write_text(
        yaml.safe_dump({"factors": {"compute": 2.0}, "fitted_from": "step_times", "runs": []})
    )
    return path


def run(args: list[str]) -> Any:
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    return r


def as_json(args: list[str]) -> Any:
    out = run([*args, "--json"]).stdout
    return json.loads(out[out.index(next(c for c in out if c in "[{")) :])


def slower(calibrated: float, plain: float) -> None:
    assert 1.3 < calibrated / plain <= 2.0


def test_estimate(cal_file: Path) -> None:
    plain = as_json(["estimate", PLAN])
    cal = as_json(["estimate", PLAN, "--calibration", str(cal_file)])
    slower(cal["step_time_s"], plain["step_time_s"])
    assert cal["assumed"][0].startswith("calibrated (")
    assert "calibrated on 0 runs" in cal["expected_error"]["basis"]


def test_plan(cal_file: Path) -> None:
    plain = as_json(["plan", PLAN])["results"][0]
    cal = as_json(["plan", PLAN, "--calibration", str(cal_file)])["results"][0]
    slower(cal["step_time_s"], plain["step_time_s"])
    assert "calibrated (" in run(["plan", PLAN, "--calibration", str(cal_file)]).output


def test_check(cal_file: Path) -> None:
    text = run(["check", PLAN, "--calibration", str(cal_file)]).output
    assert text.startswith("calibrated (")
    # the JSON is the list of findings: the calibration is said on stderr beside it
    r = run(["check", PLAN, "--calibration", str(cal_file), "--json"])
    assert r.stderr.startswith("calibrated (")
    assert isinstance(json.loads(r.stdout), list)


def test_compare(cal_file: Path) -> None:
    other = "llama2-70b-h100"
    plain = as_json(["compare", PLAN, other])["plans"]
    cal = as_json(["compare", PLAN, other, "--calibration", str(cal_file)])["plans"]
    for p, c in zip(plain, cal):
        slower(c["step_time_s"], p["step_time_s"])
        assert "calibrated on 0 runs" in c["expected_error"]["basis"]
    assert (
        "assumed: calibrated (" in run(
            ["compare", PLAN, other, "--calibration", str(cal_file)]
        ).output
    )


def test_sweep(cal_file: Path) -> None:
    vary = ["--vary", "training.global_batch_size=64,128"]
    plain = as_json(["sweep", PLAN, *vary])["points"]
    cal = as_json(["sweep", PLAN, *vary, "--calibration", str(cal_file)])["points"]
    for p, c in zip(plain, cal):
        slower(c["step_time_s"], p["step_time_s"])
        assert c["assumed"][0].startswith("calibrated (")


def test_report(cal_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    run(["report", PLAN, "-o", str(out), "--calibration", str(cal_file)])
    assert "calibrated (" in out.read_text()


def test_memory(cal_file: Path) -> None:
    """Memory is not calibrated, and says so; the bytes are the plain plan's for the same knobs."""
    args = ["memory", PLAN, "--tp", "1", "--pp", "1", "--cp", "1", "--mbs", "1"]
    plain = as_json(args)
    cal = as_json([*args, "--calibration", str(cal_file)])
    assert "memory is not calibrated" in cal["calibration"]
    assert cal["total_bytes"] == plain["total_bytes"]


def test_validate(cal_file: Path) -> None:
    case = "titan-8b-8gpu-fsdp"
    plain = as_json(["validate", case])
    cal = as_json(["validate", case, "--calibration", str(cal_file)])
    slower(cal["cases"][0]["predicted_step_time_s"], plain["cases"][0]["predicted_step_time_s"])
    assert cal["calibration"].startswith("calibrated (")
    assert as_json(["validate", case, "--memory", "--calibration", str(cal_file)])["calibration"]


def test_plan_key(cal_file: Path, tmp_path: Path) -> None:
    """A plan's top-level `calibration:` key, relative to the plan's folder, is --calibration."""
    keyed = tmp_path / "keyed.yaml"
    keyed.write_text(yaml.safe_dump({**presets.bundled_plan(PLAN), "calibration": cal_file.name}))
    flag = as_json(["estimate", PLAN, "--calibration", str(cal_file)])
    key = as_json(["estimate", str(keyed)])
    assert key["step_time_s"] == pytest.approx(flag["step_time_s"])
    assert key["assumed"][0].startswith("calibrated (")
    for cmd in (
        ["plan"],
        ["check"],
        ["memory"],
        ["sweep", "--vary", "training.global_batch_size=64"],
    ):
        assert "calibrated (" in run([cmd[0], str(keyed), *cmd[1:]]).output, cmd
