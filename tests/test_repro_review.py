"""The reproducers of issue 40 that the design review owns (tests/data/repro/NAME, copied from the
shared set with their README.txt), each run in its folder as tests/test_reproducers.py runs them."""

import json
import warnings
from pathlib import Path

from click.testing import CliRunner
from helpers import one_line_error, run, says

from perfmodel.cli import main

REPRO = Path(__file__).parent / "data" / "repro"


def test_gpu_reserved_bytes_beyond_hbm_is_refused_by_name():
    """reserved_bytes 100 GB on an 85.5 GB H100 gave a negative usable memory."""
    for args in (["memory", "plan.yaml", "--json"], ["estimate", "plan.yaml"]):
        one_line_error(
            run("gpu_reserved_bytes_beyond_hbm", *args),
            "system.gpu: reserved_bytes 100 GB is more than the 85.5 GB of HBM",
        )


def test_base_plan_cycle_is_named_as_a_loop(tmp_path):
    """a.yaml and b.yaml extending each other were reported as depth."""
    one_line_error(
        run("base_plan_cycle_message", "estimate", "plan.yaml"),
        "plan.yaml: base: a.yaml -> b.yaml -> a.yaml is a loop",
    )
    (tmp_path / "self.yaml").write_text("base: self.yaml\nmodel: llama3-8b\n")
    one_line_error(
        CliRunner().invoke(main, ["estimate", str(tmp_path / "self.yaml")]),
        "base: self.yaml is a loop",
    )


def test_batch_not_divisible_names_the_batch_the_dp_values_and_a_batch_that_works():
    one_line_error(
        run("batch_not_divisible_message", "estimate", "plan.yaml"),
        "training.global_batch_size 21 is not a multiple of dp x micro_batch_size",
        "8 at tp 1 pp 3 cp 1, 4 at tp 1 pp 3 cp 2",
        "use 24",
    )


def test_zero1_over_one_replica_is_estimated_as_stage_0_and_says_so(tmp_path):
    """tp 8 dp 1 zero_stage 1 was refused naming interleaving, which the plan did not ask for."""
    r = run("zero1_with_one_replica_message", "estimate", "plan.yaml", "--json")
    assert r.exit_code == 0, r.output
    j = json.loads(r.stdout)
    assert j["config"]["zero_stage"] == 1 and j["config"]["dp"] == 1
    assert any("zero_stage 1 over one data-parallel replica" in a for a in j["assumed"])
    text = (REPRO / "zero1_with_one_replica_message" / "plan.yaml").read_text()
    (tmp_path / "z0.yaml").write_text(text.replace("zero_stage: 1", "zero_stage: 0"))
    j0 = json.loads(
        CliRunner().invoke(main, ["estimate", str(tmp_path / "z0.yaml"), "--json"]).stdout
    )
    assert j0["step_time_s"] == j["step_time_s"]
    assert j0["memory"]["total_bytes"] == j["memory"]["total_bytes"]


def test_framework_refusal_names_the_profile_the_rule_and_who_can_run_it(tmp_path):
    """'the framework cannot run it (configurations): 2' said neither which nor why."""
    (tmp_path / "fw.yaml").write_text(
        "model: llama3-8b\nsystem: {gpu: h100, num_gpus: 16}\n"
        "training: {global_batch_size: 64, framework: megatron-core}\n"
        "parallel: {tp: 1, pp: 2, zero_stage: 2, schedule: 1f1b, vp: 1, micro_batch_size: 1,"
        " recompute: full, sequence_parallel: false}\n"
    )
    one_line_error(
        CliRunner().invoke(main, ["estimate", str(tmp_path / "fw.yaml")]),
        "framework profile megatron-core cannot run it (PM110): megatron-core does not run ZeRO-2",
        "profiles that can run the plan: fsdp, torchtitan-rocm (training.framework)",
    )


def test_validate_takes_a_table_name_and_refuses_in_one_short_line():
    """docs name tables (amd-instinct ...) that `validate` refused with a 10-line dump of cases."""
    r = run("validate_table_name_refused", "validate", "amd-instinct", "--json")
    assert r.exit_code == 0, r.output
    j = json.loads(r.stdout)
    assert set(j["tables"]) == {"amd-instinct"}
    assert j["cases"] and all(c["case"].startswith("mlperf51-amd-") for c in j["cases"])
    bad = run("validate_table_name_refused", "validate", "nope")
    one_line_error(bad, "no validation case or table matches nope", "amd-instinct")
    assert len(bad.output) < 900
    one_line_error(run("validate_table_name_refused", "validate", "--memory", "nope"), "nope")


def test_comm_applies_the_mesh_share_and_refuses_ranks_beyond_the_mesh():
    """On AMD's 8-GPU full mesh a ring of r GPUs reaches r - 1 of its 7 links; comm gave every
    group all of them (2 ranks 7x faster than the engine's own model) and took 16 ranks."""

    def comm(r: int) -> dict:
        out = run(
            "comm_mesh_share_ignored",
            *("comm", "all-reduce", "--size", "1GB", "--ranks", str(r)),
            *("--link", "infinity-fabric", "--efficiency", "--json"),
        )
        return json.loads(out.stdout)

    two, eight = comm(2), comm(8)
    assert two["mesh_share"] == 1 / 7 and eight["mesh_share"] == 1.0
    assert two["bandwidth_bytes_per_s"] == eight["bandwidth_bytes_per_s"] / 7
    # a ring all-reduce moves 2(r-1)/r of the message per rank (Thakur et al. 2005): 1 at r=2,
    # 1.75 at r=8; on 1/7 of the bandwidth the 2-rank ring takes 7 x 1 / 1.75 = 4x as long
    assert abs(two["bandwidth_s"] / eight["bandwidth_s"] - 4.0) < 1e-9
    one_line_error(
        run(
            "comm_mesh_share_ignored",
            *("comm", "all-reduce", "--size", "1GB", "--ranks", "16", "--link", "infinity-fabric"),
        ),
        "--ranks 16 exceeds the 8 GPUs",
    )


def test_nccl_algo_without_all_reduce_is_refused_and_pat_never_prices_nan(tmp_path):
    """nccl_algo [pat] printed numpy's 'invalid value encountered in multiply' (inf x 0: PAT runs
    no all-reduce, nor an all-gather with more than one rank a node)."""
    for gpu in ("mi300x", "h100"):
        one_line_error(
            run("nccl_algo_pat_numpy_warnings", "estimate", f"{gpu}.yaml", "--json"),
            "nccl_algo [pat] has no all-reduce",
            "add ring or tree",
        )
        text = (REPRO / "nccl_algo_pat_numpy_warnings" / f"{gpu}.yaml").read_text()
        (tmp_path / f"{gpu}.yaml").write_text(text.replace("[pat]", "[tree, pat]"))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # any RuntimeWarning fails the run
            r = CliRunner().invoke(main, ["estimate", str(tmp_path / f"{gpu}.yaml"), "--json"])
        assert r.exit_code == 0, r.output
        j = json.loads(r.stdout)
        assert any("priced on the ring" in a for a in j["assumed"])


def test_sweep_says_which_peak_its_mfu_column_is_against():
    """An FP8 row's MFU switched to the FP8 peak without a word."""
    r = CliRunner().invoke(main, ["sweep", "llama3-8b-h100.yaml", "--vary", "dtype=bf16,fp8"])
    assert r.exit_code == 0, r.output
    assert says(r.output, "MFU against the peak of each row's dtype", "FP8 1,979 TFLOP/s")
    assert " fp8 " in r.output and " bf16 " in r.output
    one = CliRunner().invoke(main, ["sweep", "llama3-8b-h100.yaml", "--vary", "gbs=64,128"])
    assert says(one.output, "MFU against the BF16 peak (989 TFLOP/s)")
    j = json.loads(
        CliRunner()
        .invoke(main, ["sweep", "llama3-8b-h100.yaml", "--vary", "dtype=bf16,fp8", "--json"])
        .stdout
    )
    assert [p["mfu_peak"] for p in j["points"]] == ["bf16", "fp8"]


def test_memory_margin_is_the_usable_memory_above_the_peak():
    """'headroom' meant HBM less the peak in plan's equivalent list, while fits measures against
    the usable memory (HBM less the reserve); the word is gone, the figure is the usable one's."""
    from perfmodel.engine.practice import separates
    from perfmodel.engine.search import search
    from perfmodel.inputs import load_plan

    plan = load_plan("llama3-8b-h100.yaml")
    best = search(plan, top=2).results
    _, lines = separates(plan, best)
    for e, text in zip(best, lines):
        margin = (e.values["usable_bytes"] - e.values["total_bytes"]) / 1e9
        assert text.startswith(f"{margin:.0f} GB memory margin")


def test_calibration_factor_inf_is_refused_by_name_without_numpy_warnings():
    """factors.compute: .inf passed 'not v > 0', then numpy warned with source lines and the
    error blamed the plan's links."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = run(
            "cal_factor_inf_numpy_warnings",
            *("estimate", "p8.yaml", "--calibration", "cal.yaml", "--json"),
        )
    one_line_error(r, "cal.yaml: factors.compute must be a finite number above 0")
