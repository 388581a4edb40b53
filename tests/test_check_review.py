"""`check` as a design review (issue 40): every rule runs, a plan that cannot be estimated still
gets every finding the rules can make (the blocking ones first), and a pipeline degree that does
not divide the layers is a finding naming the split assumed and what Megatron-Core needs."""

import json
from pathlib import Path

from click.testing import CliRunner
from helpers import run, says

from perfmodel.cli import main
from perfmodel.engine.split import flags_split, megatron_needs, pp_dividing

REPRO = Path(__file__).parent / "data" / "repro"


def findings(case: str) -> list[dict]:
    r = run(case, "check", "plan.yaml", "--json")
    return json.loads(r.stdout)


def test_check_lists_every_problem_beside_the_blocking_one():
    """tp16 on 8-GPU nodes, pp6 on 80 layers, m=4: PM103 came alone."""
    got = findings("check_stops_at_first_error")
    rules = [f["rule"] for f in got]
    assert rules[0] == "PM103" and got[0]["severity"] == "error"
    assert {"PM201", "PM202", "PM209"} <= set(rules)
    bubble = next(f for f in got if f["rule"] == "PM202")
    # (p-1)/(m v + p-1) = 5/9 with p=6, m=4, v=1
    assert abs(bubble["figures"]["bubble_over_step"] - 5 / 9) < 1e-9
    assert "m(4) < pp(6)" in bubble["message"]
    r = run("check_stops_at_first_error", "check", "plan.yaml")
    assert r.exit_code == 1 and "1 error(s), 3 warning(s)" in r.output


def test_pp_not_dividing_layers_names_the_split_and_megatrons_flags():
    got = next(f for f in findings("check_pp_not_dividing_layers") if f["rule"] == "PM209")
    assert "13|14|14|13|13|13" in got["message"]
    assert got["figures"]["stage_layers"] == [13, 14, 14, 13, 13, 13]
    assert "--decoder-first-pipeline-num-layers 12" in got["fix"]
    assert "--decoder-last-pipeline-num-layers 12" in got["fix"]
    # 96 GPUs at tp 8: 12 ranks for pp x dp; of the pp dividing 80, 4 divides 12 (5 and 8 do not)
    assert "pp 4 (divides 80 and the 12 ranks tp x cp leave)" in got["fix"]


def test_estimate_says_which_split_it_used():
    r = run("check_pp_not_dividing_layers", "estimate", "plan.yaml")
    assert says(r.output, "pp 6 does not divide the 80 layers; the estimate uses 13|14|14|13|13|13")
    j = json.loads(run("check_pp_not_dividing_layers", "estimate", "plan.yaml", "--json").stdout)
    assert j["stage_layers"] == [13, 14, 14, 13, 13, 13]
    assert any("the estimate uses 13|14|14|13|13|13" in a for a in j["assumed"])


def test_even_split_gets_no_finding_and_no_note(tmp_path):
    text = (REPRO / "check_pp_not_dividing_layers" / "plan.yaml").read_text()
    (tmp_path / "p.yaml").write_text(
        text.replace("pp: 6", "pp: 8").replace("num_gpus: 96", "num_gpus: 128")
    )
    r = CliRunner().invoke(main, ["check", str(tmp_path / "p.yaml"), "--json"])
    assert "PM209" not in [f["rule"] for f in json.loads(r.stdout)]
    e = CliRunner().invoke(main, ["estimate", str(tmp_path / "p.yaml")])
    assert "layer split" not in e.output


def test_megatron_flags_keep_the_middle_stages_even():
    """TransformerConfig: the layers left after the ends divide evenly over the middle stages,
    and each stage's by vp."""
    for L, pp, vp in ((80, 6, 1), (126, 8, 1), (61, 16, 1), (80, 6, 2), (95, 4, 1)):
        split = flags_split(L, pp, vp, [L // pp] * pp)
        assert split is not None and sum(split) == L and len(split) == pp
        assert len(set(split[1:-1])) <= 1 and not any(x % vp for x in split)
    assert pp_dividing(80, 6) == [5, 8] and pp_dividing(7, 3) == [7]
    assert pp_dividing(80, 6, 12) == [4] and pp_dividing(80, 6, 40) == [5, 8]
    assert "pp 5 or 8" in megatron_needs(80, 6, 1, None)


def test_flags_that_would_fill_a_stage_more_are_not_offered():
    """126 layers over pp 16 at vp 7: the balanced split 7|8..8|7 has middle stages vp does not
    divide; the flags' nearest split (14|7..7|14) doubles the first stage, so only the layout flag
    and a pp that divides are offered."""
    needs = megatron_needs(126, 16, 7, [7] + [8] * 14 + [7])
    assert "--decoder-first-pipeline-num-layers" not in needs
    assert "--pipeline-model-parallel-layout" in needs and "pp 14 or 18" in needs
    # at 16,384 GPUs, tp 8 cp 2: 1,024 ranks, which of the pp dividing 126 only 2 divides
    assert "pp 2 (divides 126 and the 1,024 ranks" in megatron_needs(
        126, 16, 7, [7] + [8] * 14 + [7], 1024
    )
