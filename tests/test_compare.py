"""`perfmodel compare` (issue 15, item 1): the figures are each plan's own estimate, the differences
are taken against the first plan, and the verdict names the components that decide it."""

import json
import math

import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.inputs import load_plan
from perfmodel.review.compare import signed_time, verdict

A, B = "examples/clean-plan.yaml", "examples/proposal-pp16.yaml"


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_figures_are_each_plans_estimate_and_deltas_are_against_the_first():
    r = invoke("compare", A, B, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    ea, eb = (json.loads(invoke("estimate", f, "--json").output) for f in (A, B))
    pa, pb = out["plans"]
    assert [pa["label"], pb["label"]] == ["clean-plan", "proposal-pp16"]
    for p, e in ((pa, ea), (pb, eb)):
        assert p["step_time_s"] == e["step_time_s"] and p["breakdown_s"] == e["breakdown_s"]
        assert p["config"] == e["config"] and p["memory"] == e["memory"]
    d = pb["delta_vs_first"]
    assert d["step_time_s"] == eb["step_time_s"] - ea["step_time_s"]
    assert d["breakdown_s"]["bubble"] == eb["breakdown_s"]["bubble"] - ea["breakdown_s"]["bubble"]
    assert all(v == 0 for v in pa["delta_vs_first"]["breakdown_s"].values())
    # TP 4 x PP 16 against TP 8 x PP 8 interleaved: less TP traffic, a larger bubble (seed 000, 2.4
    # and 4.2)
    assert d["breakdown_s"]["tp_comm"] < 0 < d["breakdown_s"]["bubble"]
    assert len(out["verdicts"]) == 1 and [f["rule"] for f in pb["findings"]] == ["PM206"]


def test_verdict_names_the_largest_changes_first_and_only_those_that_matter():
    r = invoke("compare", A, B, "--json")
    pa, pb = json.loads(r.output)["plans"]
    text = json.loads(r.output)["verdicts"][0]
    pct = abs(pb["step_time_s"] / pa["step_time_s"] - 1) * 100
    word = "more" if pb["step_time_s"] > pa["step_time_s"] else "less"
    rate_a, rate_b = (p["tokens_per_s_per_gpu"] * p["num_gpus"] for p in (pa, pb))
    rate = abs(rate_b / rate_a - 1) * 100
    other = "less" if word == "more" else "more"
    # the two differ by less than their out-of-sample band (issue 28): equal within it, with the
    # difference and the components that make it still said
    width = max(p["expected_error"]["typical_half_width"] for p in (pa, pb))
    assert abs(math.log(pb["step_time_s"] / pa["step_time_s"])) <= width
    assert text.startswith(
        "proposal-pp16 and clean-plan are equal within the band: proposal-pp16"
        f" {pct:.0f}% {word} step time ({rate:.0f}% {other} throughput), inside the model's"
        f" +-{100 * width:.0f}% typical error"
    )
    # the wider band's class is named (what the band rests on), then the deciding components
    assert f"typical error out of sample ({pa['expected_error']['basis']})" in text
    named = text.rsplit(" (", 1)[1].rstrip(")").split(", ")
    moved = sorted(
        (abs(v), k)
        for k, v in pb["delta_vs_first"]["breakdown_s"].items()
        if abs(v) >= 0.01 * pa["step_time_s"]
    )
    assert len(named) == min(3, len(moved))
    assert named[0].startswith("TP comm -") and named[1].startswith("bubble +")
    assert signed_time(-2.19) == "-2.19 s" and signed_time(0.0006) == "+600 us"


def test_the_same_plan_twice_and_the_text_table():
    r = invoke("compare", A, A)
    assert r.exit_code == 0, r.output
    assert "clean-plan (1)" in r.output and "clean-plan (2)" in r.output
    assert "take the same time" in r.output and "(+" not in r.output
    r = invoke("compare", A, B, B)
    assert r.exit_code == 0 and r.output.count("are equal within the band") == 2


def test_a_plan_that_does_not_fit_is_said_first():
    from perfmodel.inputs import presets
    from perfmodel.review.compare import compare

    a = load_plan(A)
    small = a.with_system(gpu=presets.gpu("a100-40gb")).with_parallel(
        recompute="none", sequence_parallel=False, cp=1
    )
    c = compare([("A", a), ("B", small)])
    assert not c.sides[1].est.values["fits"]
    assert verdict(c.sides[0], c.sides[1]).startswith("B does not fit (")


def test_bad_input():
    r = invoke("compare", A)
    assert r.exit_code == 1 and "two plans or more" in r.output
    r = invoke("compare", A, "no-such-plan.yaml")
    assert r.exit_code == 1 and "no-such-plan.yaml" in r.output and "Traceback" not in r.output
    r = invoke("compare", A, "examples/troubled-plan.yaml")
    assert (
        r.exit_code == 1
        and r.output.startswith("Error: troubled-plan: ")
        and "nothing fits" in r.output
    )
    r = invoke("compare", A, B, "--gpus", "0")
    assert r.exit_code == 2
    r = invoke("compare", A, B, "--gpus", "500")
    assert r.exit_code == 1 and "--gpus 500" in r.output


def test_markdown_format_is_a_table_per_table_and_lasts_one_command():
    for cmd in (
        ["estimate", "gpt3-175b-3d.yaml"],
        ["plan", "gpt3-175b.yaml", "--gpus", "512", "--top", "2"],
        ["check", "examples/troubled-plan.yaml"],
        ["compare", A, B],
        ["sweep", A, "--vary", "gbs=768,1536", "--fixed"],
    ):
        r = invoke(*cmd, "--format", "markdown")
        assert r.exit_code in (0, 1), (cmd, r.output)
        assert "[red]" not in r.output and "[yellow]" not in r.output and "\x1b[" not in r.output
        rows = [ln for ln in r.output.splitlines() if ln.startswith("|")]
        if cmd[0] == "check":  # findings: a list per severity
            assert "- PM101 the plan does not fit in HBM or host memory\n  - needs" in r.output
            continue
        assert rows, cmd
        seps = [ln for ln in rows if set(ln) <= set("|-: ")]
        assert seps and all(
            ln.count("|") == rows[rows.index(ln) - 1].count("|") for ln in seps
        ), cmd
    plain = invoke("compare", A, B)
    assert plain.exit_code == 0 and not any(ln.startswith("|") for ln in plain.output.splitlines())


def test_the_words_say_step_time_and_throughput_and_different_jobs_are_named():
    """Issue 23: "27% faster" meant 27% less step time (37% more throughput); a 7.5B plan on 32
    GPUs against a 175B one on 512 is a different job, said before any verdict."""
    from perfmodel.review.compare import step_change

    assert (
        step_change(1.0, 0.73, 100.0, 100 / 0.73)
        == "takes 27% less step time (37% more throughput)"
    )
    r = invoke("compare", "gpt3-175b.yaml", "llama3-8b-h100.yaml", "--json")
    warnings = json.loads(r.output)["warnings"]
    assert len(warnings) == 1 and "different jobs" in warnings[0] and "model" in warnings[0]
    same = invoke("compare", A, B, "--json")
    assert json.loads(same.output)["warnings"] == []


def test_expert_and_context_parallel_traffic_have_their_own_lines():
    """At tp 1 nothing is TP traffic: DeepSeek-V3's all-to-alls are EP comm and its Ulysses
    exchange CP comm (issue 23; the breakdown still sums to the step)."""
    from perfmodel.engine.estimate import BREAKDOWN_KEYS, estimate, resolve_config
    from perfmodel.inputs import load

    plan = load("deepseek-v3-h100").plan
    cfg = resolve_config(plan, tp=1, pp=32, cp=4, cp_comm_type="a2a", ep=8, micro_batch_size=1)
    v = estimate(plan, cfg).values
    assert v["tp_comm"] == pytest.approx(0.0, abs=1e-9)
    assert v["ep_comm"] > 0 and v["cp_comm"] > 0
    assert sum(v[k] for k in BREAKDOWN_KEYS) == pytest.approx(v["step_time_s"])
