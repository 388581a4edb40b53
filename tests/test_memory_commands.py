"""`memory`, `plan` and `check` agree on memory (issue 29): `memory` chooses free knobs as `plan`
does, a hint names the smallest change that fits, and `check` measures the excess from the
usable HBM."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.engine.answer import plan_search
from perfmodel.engine.search import search
from perfmodel.inputs import load_plan, presets


def _case(name: str):
    return next(c for c in presets.validation_cases() if c["name"] == name)["plan"]


def test_memory_chooses_free_knobs_as_plan_does():
    runner = CliRunner()
    mem = json.loads(runner.invoke(main, ["memory", "gpt3-175b.yaml", "--json"]).output)
    # `plan`'s answer, not the fastest alone (issue 37: one answer)
    plan_json = json.loads(runner.invoke(main, ["plan", "gpt3-175b.yaml", "--json"]).output)
    best_config = plan_json["results"][0]["config"]
    best = plan_search(load_plan("gpt3-175b.yaml"), presets.error_bands(), top=1).results[0]
    assert best.config.as_dict() == best_config
    assert mem["chosen"]["by"] == "search" and "tp" in mem["chosen"]["free"]
    assert mem["config"]["tp"] == best.config.tp and mem["config"]["pp"] == best.config.pp
    assert mem["total_bytes"] == pytest.approx(best.values["total_bytes"])
    assert mem["fits"]
    text = runner.invoke(main, ["memory", "gpt3-175b.yaml"]).output
    assert "chosen as `perfmodel plan` chooses them" in text


def test_a_fixed_plan_is_shown_as_fixed():
    r = CliRunner().invoke(
        main,
        ["memory", "--model", "gpt3-175b", "--gpus", "64", "--tp", "8", "--pp", "8", "--sp"]
        + ["--recompute", "selective", "--mbs", "1", "--zero", "1", "--vp", "1", "--json"],
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["config"]["tp"] == 8 and out["config"]["pp"] == 8
    # ZeRO-1 over one replica is estimated as ZeRO-0 now (reproducer
    # zero1_with_one_replica_message), so plan's search resolves the knobs left free (cp, the
    # schedule) around the fixed ones, and says it did
    assert (
        out["chosen"]["by"] == "search"
        and "as `perfmodel plan` chooses them" in out["chosen"]["how"]
    )


def test_nothing_fits_names_the_smallest_change_deepseek_v3():
    """DeepSeek-V3's published layout fits the H800 with the report's recompute of norms and MLA
    up-projections (78.2 GB); without any recompute it needs 123 GB, and the hint names full
    recompute rather than asking for more GPUs."""
    plan = _case("dsv3-report-h800-fp8-2048gpu")
    assert search(plan, top=1).results
    res = search(plan.with_parallel(recompute="none"), top=1)
    assert not res.results
    assert "the smallest change that fits: recompute: full" in res.hint
    assert "GPUs (x" not in res.hint
