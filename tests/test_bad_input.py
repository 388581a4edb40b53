"""Bad input: one clear line, a non-zero exit code, never a traceback (issue 2)."""

import json

import pytest
from helpers import error_lines, says

from perfmodel.cli import main

GOOD = {
    "model": "gpt3-175b",
    "system": (
        "{gpu: a100-80gb, num_gpus: 512, gpus_per_node: 8, intra_node_link: nvlink3,"
        " inter_node_link: ib-hdr}"
    ),
    "training": "{global_batch_size: 1536}",
    "parallel": "{tp: 8, pp: 8, micro_batch_size: 1}",
}


def write_plan(tmp_path, **over):
    parts = {**GOOD, **over}
    text = "".join(f"{k}: {v}\n" for k, v in parts.items() if v is not None)
    f = tmp_path / "plan.yaml"
    f.write_text(text)
    return str(f)


def run_bad(runner, args, *needles):
    r = runner.invoke(main, args)
    assert r.exit_code != 0, r.output
    assert ("Traceback" not in r.output and r.exception is None) or isinstance(
        r.exception, SystemExit
    )
    # one error, filled to 80 columns: its first line and the continuations indented under it
    lines = [x for x in r.output.strip().splitlines() if x.strip()]
    assert len(error_lines(r.output)) == 1 and len(lines[0]) <= 80, r.output
    assert all(x.startswith("  ") and len(x) <= 80 for x in lines[1:]), r.output
    for n in needles:
        assert says(r.output, n), r.output
    return r


def test_good_plan_is_fine(runner, tmp_path):
    r = runner.invoke(main, ["memory", write_plan(tmp_path), "--json"])
    assert r.exit_code == 0, r.output


def test_missing_file(runner):
    run_bad(runner, ["memory", "no-such-plan.yaml"], "no such file")


def test_yaml_syntax_error(runner, tmp_path):
    f = tmp_path / "broken.yaml"
    f.write_text("model: gpt3-175b\nsystem: {gpu: a100-80gb, num_gpus: 512\n")
    run_bad(runner, ["memory", str(f)], "YAML syntax error", "line")


def test_unknown_key_with_suggestion(runner, tmp_path):
    run_bad(
        runner,
        ["memory", write_plan(tmp_path, parallel="{tpp: 8}")],
        "unknown key",
        "did you mean 'tp'",
    )


def test_unknown_top_level_key(runner, tmp_path):
    run_bad(runner, ["memory", write_plan(tmp_path, paralel="{tp: 8}")], "did you mean 'parallel'")


def test_wrong_type(runner, tmp_path):
    run_bad(
        runner,
        ["memory", write_plan(tmp_path, training="{global_batch_size: lots}")],
        "global_batch_size",
    )


@pytest.mark.parametrize(
    "system",
    [
        (
            "{gpu: a100-80gb, num_gpus: 512, intra_node_link: {name: x, bandwidth_bytes_per_s: -300"
            " GB/s, latency_s: 1us}, inter_node_link: ib-hdr}"
        ),
        "{gpu: a100-80gb, num_gpus: 0, intra_node_link: nvlink3, inter_node_link: ib-hdr}",
    ],
)
def test_negative_or_zero(runner, tmp_path, system):
    run_bad(runner, ["memory", write_plan(tmp_path, system=system)], "greater than")


def test_heads_not_divisible_by_tp(runner, tmp_path):
    run_bad(
        runner,
        [
            "memory",
            write_plan(
                tmp_path,
                parallel="{tp: 5, pp: 1, dp: 1}",
                system=(
                    "{gpu: a100-80gb, num_gpus: 5, gpus_per_node: 5, "
                    "intra_node_link: nvlink3, inter_node_link: ib-hdr}"
                ),
                training="{global_batch_size: 5}",
            ),
        ],
        "num_attention_heads(96) is not divisible by tp(5)",
    )


def test_more_virtual_stages_than_layers(runner, tmp_path):
    run_bad(
        runner,
        ["memory", write_plan(tmp_path, parallel="{tp: 8, pp: 8, vp: 13}")],
        "pp(8) * vp(13) = 104 virtual stages exceed num_layers(96) + 2",
    )


def test_gpus_not_divisible_by_tp_pp(runner, tmp_path):
    run_bad(
        runner,
        ["memory", write_plan(tmp_path, parallel="{tp: 8, pp: 3}")],
        "num_gpus(512) is not divisible by tp(8) * pp(3) = 24",
    )


def test_product_not_gpus(runner, tmp_path):
    run_bad(
        runner,
        # cp fixed too: a free cp would complete the product (memory chooses free knobs as plan)
        ["memory", write_plan(tmp_path, parallel="{tp: 8, pp: 8, dp: 4, cp: 1}")],
        "tp(8) * pp(8) * dp(4) = 256 != num_gpus(512)",
    )


def test_batch_not_divisible(runner, tmp_path):
    run_bad(
        runner,
        ["memory", write_plan(tmp_path, parallel="{tp: 8, pp: 8, micro_batch_size: 5}")],
        "global_batch_size(1536) is not divisible by dp(8) * micro_batch_size(5) = 40",
    )


def test_unknown_preset_lists_close_names(runner, tmp_path):
    run_bad(
        runner, ["memory", write_plan(tmp_path, model="gpt3-157b")], "did you mean", "gpt3-175b"
    )


def test_unknown_bundled_plan(runner):
    run_bad(runner, ["estimate", "gpt3-175.yaml"], "no such file", "did you mean")


def test_malformed_quantity_on_the_command_line(runner):
    r = runner.invoke(main, ["comm", "all-reduce", "--size", "lots"])
    assert r.exit_code == 2 and says(r.output, "--size", "write it like")


def test_hf_config_not_json(runner, tmp_path):
    f = tmp_path / "config.json"
    f.write_text("{not json")
    r = runner.invoke(main, ["roofline", "--mbs", "1", "--model", str(f)])
    assert r.exit_code == 1 and says(r.output, "JSON syntax error")


def test_plan_is_a_list(runner, tmp_path):
    f = tmp_path / "list.yaml"
    f.write_text("- 1\n- 2\n")
    run_bad(runner, ["memory", str(f)], "a plan is a mapping")


def test_tp_not_dividing_ffn_in_roofline(runner):
    run_bad(
        runner,
        ["roofline", "--mbs", "4", "--hidden", "1000", "--heads", "10", "--tp", "3"],
        "divisible",
    )


def test_negative_latency_on_the_command_line(runner):
    r = runner.invoke(main, ["comm", "all-reduce", "--size", "1GB", "--latency", "-1us"])
    assert r.exit_code == 2 and "--latency" in r.output


def test_not_a_regular_file(runner):
    run_bad(runner, ["memory", "/dev/null"], "not a regular file")


def test_malformed_quantity_in_a_plan_names_the_field(runner, tmp_path):
    system = (
        "{gpu: {name: x, peak_flops_per_s: {bf16: 312 TFLOPS}, hbm_capacity_bytes: eighty GB, "
        "hbm_bandwidth_bytes_per_s: 2039 GB/s, num_sms: 108, l2_bytes: 40 MiB}, num_gpus: 512, "
        "intra_node_link: nvlink3, inter_node_link: ib-hdr}"
    )
    run_bad(
        runner,
        ["memory", write_plan(tmp_path, system=system)],
        "hbm_capacity_bytes",
        "write it like '80 GB'",
    )


def test_boolean_where_a_number_belongs(runner, tmp_path):
    """YAML `tp: true` and `seq_length: yes` are mistakes, not 1 (issue 14)."""
    run_bad(
        runner,
        ["estimate", write_plan(tmp_path, parallel="{tp: true}")],
        "tp: expected a number, got True",
    )
    r = runner.invoke(
        main,
        ["estimate", write_plan(tmp_path, training="{global_batch_size: 1536, seq_length: yes}")],
    )
    assert r.exit_code == 1 and says(r.output, "seq_length", "'yes'")


def test_estimate_with_free_knobs_takes_the_search_best_and_says_so(runner):
    """Issue 14: gpt3-175b.yaml leaves every knob free; estimate used to evaluate tp=1, pp=1 (3 TB a
    GPU)."""
    r = runner.invoke(main, ["estimate", "gpt3-175b.yaml"])
    assert r.exit_code == 0
    # the knobs are plan's answer (issue 37: one answer), said first
    assert r.output.startswith("free knobs chosen as `perfmodel plan` chooses them")
    assert says(r.output.split("\n\n")[0], "tp=", "pp=")
    j = json.loads(runner.invoke(main, ["estimate", "gpt3-175b.yaml", "--json"]).output)
    assert j["memory"]["fits"] and set(j["searched"]) >= {"tp", "pp", "micro_batch_size"}


def test_strict_exit_code_when_nothing_fits(runner, tmp_path):
    plan = write_plan(
        tmp_path,
        parallel=(
            "{tp: 1, pp: 1, cp: 1, vp: 1, micro_batch_size: 1, sequence_parallel: false, "
            "recompute: none, zero_stage: 0}"
        ),
    )
    r = runner.invoke(main, ["estimate", plan])
    assert r.exit_code == 0 and r.output.startswith("DOES NOT FIT")
    assert runner.invoke(main, ["estimate", plan, "--strict"]).exit_code == 1
