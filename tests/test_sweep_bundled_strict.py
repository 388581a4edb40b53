"""Every bundled plan passes its own strict review (issue 40): `check --strict` exits 0, except
where a finding names a real design choice the plan leaves to its user, each listed with why.

PM209 (pp does not divide the layers) is a warning where the plan fixes pp and names no split; where
pp is the search's choice, the uneven split is the answer's own, and the finding is information:
the flags to launch it with (review/check_layout.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfmodel.cli import main

PLANS = sorted(
    p.name for p in (Path(__file__).resolve().parent.parent / "configs" / "plans").glob("*.yaml")
)

# plan: {rule: why the finding stands}; a plan here fails --strict for these findings only
WARNED = {
    "gpt3-175b-3d.yaml": {
        "PM101": (
            "seed 000 Q3's 3D layout as the question gives it (no SP, no ZeRO, m = 48): the"
            " bundled example of a layout that does not fit, and what check says of it"
        ),
    },
    "gpt3-175b.yaml": {
        "PM206": (
            "the search splits 96 layers evenly over its pp; giving the ends fewer layers"
            " (first/last stage flags) is the launch's choice, and the check names it"
        ),
    },
    "deepseek-v3-h100.yaml": {
        "PM207": (
            "ep 64 across 8 nodes on the default all-to-all dispatcher: the plan leaves the"
            " dispatcher (DeepEP) and the overlap to its user, and the check names them"
        ),
    },
    "deepseek-v3-gb200.yaml": {
        "PM207": "ep 128 beyond one 72-GPU NVLink domain: the overlap is the user's to switch on",
    },
    "llama3.1-405b-h100.yaml": {
        "PM202": "a 19% bubble at the plan's 16M-token batch: a larger batch is the user's call",
    },
}


@pytest.mark.parametrize("name", PLANS)
def test_bundled_plan_passes_strict_check(name):
    r = CliRunner().invoke(main, ["check", name, "--strict", "--json"])
    found = json.loads(r.stdout)
    blocking = {f["rule"] for f in found if f["severity"] in ("error", "warning")}
    assert blocking == set(WARNED.get(name, {})), [f["message"] for f in found]
    assert r.exit_code == (1 if blocking else 0)
    for f in found:
        if f["rule"] == "PM209":  # the search's own uneven split: its flags, as information
            assert f["severity"] == "info" and f["figures"]["pp_searched"]


def test_pm209_stays_a_warning_where_the_plan_fixes_pp():
    """The reproducer fixes pp 6 on 80 layers and names no split: the plan's oversight."""
    plan = Path(__file__).parent / "data" / "repro" / "check_pp_not_dividing_layers" / "plan.yaml"
    r = CliRunner().invoke(main, ["check", str(plan), "--json"])
    pm209 = next(f for f in json.loads(r.stdout) if f["rule"] == "PM209")
    assert pm209["severity"] == "warning" and not pm209["figures"]["pp_searched"]
