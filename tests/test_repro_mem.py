"""The reproducers of issue 37 (tests/data/repro/NAME, copied from the shared set with their
README.txt), each run in its folder: a pick at the memory edge, two answers for one plan, and run
figures without their range."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfmodel.cli import main

REPRO = Path(__file__).parent / "data" / "repro"


def run(case: str, *args: str):
    old = os.getcwd()
    os.chdir(REPRO / case)
    try:
        r = CliRunner().invoke(main, list(args))
    finally:
        os.chdir(old)
    assert r.exit_code == 0, r.output
    return r


def flat(text: str) -> str:
    return " ".join(text.split())


def test_pick_at_memory_edge_fits_with_margin():
    """The recommended layout left 0.46 GB of 81.2 GB, inside the memory band, where equally fast
    layouts left 8-26 GB; with --memory-reserve 12GB it again picked one at the edge. Now the
    pick fits beyond the band's upper edge, and it stays inside the fastest one's step band."""
    for extra in ([], ["--memory-reserve", "12GB"]):
        j = json.loads(run("pick_at_memory_edge", "plan", "plan.yaml", *extra, "--json").stdout)
        first = j["results"][0]
        m = first["memory"]
        assert m["verdict"] == "fits", m
        assert m["total_bytes"] * (1 + m["band"]) <= m["usable_bytes"]
        assert first["equivalent_to_best"]
        text = flat(run("pick_at_memory_edge", "plan", "plan.yaml", *extra).stdout)
        assert "memory: fits (" in text and "to spare, +-10.2%)" in text


def test_plan_and_estimate_agree():
    """plan picked tp4 pp4 dp32 vp5 while estimate, memory and sweep resolved the same free knobs
    to tp2 pp8 cp2 vp10; now they give one answer and say so."""
    case = "plan_and_estimate_disagree"
    best = json.loads(run(case, "plan", "plan.yaml", "--top", "1", "--json").stdout)["results"][0]
    est = json.loads(run(case, "estimate", "plan.yaml", "--json").stdout)
    assert est["config"] == best["config"] and est["step_time_s"] == best["step_time_s"]
    mem = json.loads(run(case, "memory", "plan.yaml", "--json").stdout)
    assert mem["config"] == best["config"]
    text = flat(run(case, "memory", "plan.yaml").stdout)
    assert "chosen as `perfmodel plan` chooses them (the same configuration and step time)" in text
    sweep = json.loads(run(case, "sweep", "plan.yaml", "--vary", "gpus=512", "--json").stdout)
    assert sweep["points"][0]["config"] == best["config"]


def test_run_cost_carries_its_range(tmp_path):
    """Days, GPU-hours and cost were single numbers with a 98.9% goodput and no production
    overheads; now they carry the step band and the goodput's own uncertainty, and the goodput's
    basis with the published fleet figures, in text, JSON and the HTML report."""
    case = "run_cost_without_band"
    j = json.loads(run(case, "plan", "plan.yaml", "--tokens", "15T", "--json").stdout)
    first = j["results"][0]
    r = first["training_run"]
    rng = r["range"]
    lo, hi = first["expected_error"]["step_time_range_s"]
    step = first["step_time_s"]
    assert rng["step_band"] == [lo / step, hi / step]
    for key in ("days", "gpu_hours", "energy_mwh", "cost_usd"):
        assert rng[key][0] < r[key] < rng[key][1], key
    assert rng["goodput"] == [0.9, r["goodput"]] and r["goodput"] > 0.9
    # the upper edge: the slow edge of the step band at the published fleet's goodput
    assert rng["days"][1] == pytest.approx(r["days"] * (hi / step) * (r["goodput"] / 0.9))
    for said in ("466 interruptions in 54 days", ">90% effective training time", "7.0M"):
        assert said in rng["basis"]
    text = flat(run(case, "plan", "plan.yaml", "--tokens", "15T").stdout)
    assert "expected range" in text and "goodput basis" in text and "7.0M" in text
    assert "as published fleets ran" in text
    run(case, "report", "plan.yaml", "--tokens", "15T", "-o", str(tmp_path / "r.html"))
    page = (tmp_path / "r.html").read_text()
    assert "expected range" in page and "466 interruptions in 54 days" in page
