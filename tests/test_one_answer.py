"""One answer (issue 37): every command that resolves a plan's free knobs (estimate, memory,
sweep, check, report, compare) resolves them exactly as `plan` does, the same configuration and
the same step time, and says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.inputs import load_plan

PLANS = sorted(
    p.stem for p in (Path(__file__).resolve().parent.parent / "configs" / "plans").glob("*.yaml")
)
DISAGREE = str(
    Path(__file__).parent / "data" / "repro" / "plan_and_estimate_disagree" / "plan.yaml"
)


def invoke(*args: str) -> dict:
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def plans_answer(plan: str) -> dict:
    return invoke("plan", plan, "--top", "1", "--json")["results"][0]


@pytest.mark.parametrize("name", PLANS)
def test_estimate_resolves_free_knobs_as_plan_does(name):
    best = plans_answer(name + ".yaml")
    est = invoke("estimate", name + ".yaml", "--json")
    assert est["config"] == best["config"]
    assert est["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-12)


def test_every_command_resolves_free_knobs_as_plan_does(tmp_path):
    """The reproducer's plan (Llama 3.1 70B on 512 H100, knobs free): plan picked one layout and
    estimate, memory and sweep another; now all six agree with plan."""
    best = plans_answer(DISAGREE)
    cfg, step = best["config"], best["step_time_s"]
    mem = invoke("memory", DISAGREE, "--json")
    assert mem["config"] == cfg
    assert mem["total_bytes"] == pytest.approx(best["memory"]["total_bytes"])
    sweep = invoke("sweep", DISAGREE, "--vary", "gpus=512", "--json")["points"][0]
    assert sweep["config"] == cfg and sweep["step_time_s"] == pytest.approx(step, rel=1e-12)
    cmp = invoke("compare", DISAGREE, DISAGREE, "--json")
    assert all(s["config"] == cfg and s["step_time_s"] == pytest.approx(step) for s in cmp["plans"])
    out = tmp_path / "r.html"
    rep = invoke("report", DISAGREE, "-o", str(out), "--json")
    assert rep["results"][0]["config"] == cfg
    from perfmodel.review.check import resolve_free_knobs

    fixed, chosen = resolve_free_knobs(load_plan(DISAGREE))
    assert chosen and all(cfg[k] == v for k, v in chosen.items())
    # and each says so
    said = "chosen as `perfmodel plan` chooses them"
    text = " ".join(CliRunner().invoke(main, ["estimate", DISAGREE]).output.split())
    assert said in text
    text = " ".join(CliRunner().invoke(main, ["memory", DISAGREE]).output.split())
    assert said in text
    text = " ".join(CliRunner().invoke(main, ["check", DISAGREE]).output.split())
    assert said in text
    assert fixed.parallel.tp == cfg["tp"]
