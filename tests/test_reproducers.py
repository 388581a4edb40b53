"""The team's reproducers (tests/data/repro/NAME, copied from the shared reproducer set with their
README.txt): inputs perfmodel mishandled, each now a faithful reading or one clear error (issue 19).
"""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import one_line_error, run, says

from perfmodel.cli import main

REPRO = Path(__file__).parent / "data" / "repro"


def test_mfu_above_one():
    """FP8 on B200 printed MFU 104.4% against the BF16 peak; MFU is now against the FP8 peak."""
    r = run("mfu_above_one", "estimate", "fp8.yaml", "--json")
    j = json.loads(r.stdout)
    assert j["mfu_peak"] == "fp8" and 0 < j["mfu"] < 1 and 0 < j["hfu"] < 1
    assert "against the FP8 peak" in j["flop_convention"]


def test_mfu_against_bf16_peak_says_why_it_can_exceed_one(tmp_path):
    text = (REPRO / "mfu_above_one" / "fp8.yaml").read_text() + "  mfu_peak: bf16\n"
    (tmp_path / "fp8-bf16.yaml").write_text(text)
    j = json.loads(
        CliRunner().invoke(main, ["estimate", str(tmp_path / "fp8-bf16.yaml"), "--json"]).stdout
    )
    fp8 = json.loads(run("mfu_above_one", "estimate", "fp8.yaml", "--json").stdout)
    # the same step against the BF16 peak: twice the FP8 figure on B200 (4.5 vs 2.25 PFLOP/s),
    # which exceeds 1 once the FP8 GEMMs pass half their peak, and the convention line says so
    assert j["mfu_peak"] == "bf16" and j["mfu"] == pytest.approx(2 * fp8["mfu"])
    assert "can exceed 100%" in j["flop_convention"]


@pytest.mark.parametrize("name", sorted(p.name for p in REPRO.iterdir() if p.is_dir()))
def test_every_reproducer_has_its_readme(name):
    assert (REPRO / name / "README.txt").is_file()


@pytest.mark.parametrize(
    "case, needles",
    [
        ("hf_architectures_ignored", ["architectures ['MambaForCausalLM'] is not a llama model"]),
        ("hf_deepseek_no_moe_intermediate_size", ["moe_intermediate_size is missing"]),
        ("hf_kv_lora_rank_zero", ["kv_lora_rank: 0"]),
        ("hf_llama4_chunk_zero", ["attention_chunk_size must be a whole number >= 1, got 0"]),
        ("hf_llama4_step_beyond_layers", ["interleave_moe_layer_step 100 leaves no MoE layer"]),
        ("hf_mixtral_no_intermediate_size", ["intermediate_size is missing"]),
        ("hf_mixtral_no_num_local_experts", ["num_local_experts is missing"]),
        ("hf_qwen3moe_no_moe_intermediate_size", ["moe_intermediate_size is missing"]),
        ("hf_zero_experts_dense", ["num_experts: 0", "model_type qwen3"]),
    ],
)
def test_config_json_errors_name_the_key(case, needles):
    """Internal errors (KeyError) and silent readings of config.json became one line naming the
    key the user wrote."""
    one_line_error(run(case, "memory", "plan.yaml", "--json"), *needles)


def test_config_json_zero_experts_refused_in_every_moe_family():
    from perfmodel.errors import PerfModelError
    from perfmodel.inputs.hf import model_fields

    base = {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8, "vocab_size": 10}
    for family, key in (("deepseek_v3", "n_routed_experts"), ("mixtral", "num_local_experts")):
        with pytest.raises(PerfModelError, match=f"{key}: 0"):
            model_fields({**base, "model_type": family, key: 0})


def test_llama4_moe_layers_and_no_rope_layers_read_as_transformers_reads_them():
    """moe_layers, when given, says which layers are MoE (it was ignored: all 48 were);
    no_rope_layers all 0 means every layer is global attention (it named perfmodel's own field in
    an error)."""
    from perfmodel.inputs.presets import model

    one = model(str(REPRO / "hf_llama4_moe_layers_ignored" / "config.json"))
    assert sum(one.moe_pattern()) == 1 and one.moe_pattern()[0] == 1
    nope = model(str(REPRO / "hf_llama4_no_rope_layers_zero" / "config.json"))
    assert not nope.attention_chunk_size
    r = run("hf_llama4_no_rope_layers_zero", "estimate", "plan.yaml")
    assert "chunked_attention_fraction" not in r.output and "internal error" not in r.output


def imported(case: str, *extra: str) -> dict:
    """The plan `import megatron run.sh --gpu h100-sxm` writes for a reproducer, parsed."""
    import yaml

    r = run(case, "import", "megatron", "run.sh", "--gpu", "h100-sxm", *extra)
    assert r.exit_code == 0, r.output
    return yaml.safe_load(r.stdout) | {"_stderr": r.stderr}


@pytest.mark.parametrize(
    "case, needles",
    [
        ("meg_dropout_abc", ["--attention-dropout abc: not a number"]),
        ("meg_vp_per_stage_zero", ["--num-layers-per-virtual-pipeline-stage 0"]),
        ("meg_both_vp_arguments", ["--num-virtual-stages-per-pipeline-rank together"]),
        ("meg_fp16_and_bf16", ["--bf16 and --fp16 together"]),
        ("meg_swiglu_and_squared_relu", ["--swiglu and --squared-relu together"]),
        ("meg_attention_backend_bogus", ["--attention-backend bogus: Megatron-LM accepts"]),
        ("meg_recompute_method_bogus", ["--recompute-method bogus: Megatron-LM accepts"]),
        ("meg_mla_flag_alone", ["--multi-latent-attention without --kv-lora-rank"]),
        ("meg_two_commands", ["2 launch commands (lines 1, 2)"]),
    ],
)
def test_megatron_arguments_refused_by_name(case, needles):
    """Internal errors, and contradictory or bogus arguments that were taken silently."""
    one_line_error(run(case, "import", "megatron", "run.sh", "--gpu", "h100-sxm"), *needles)


def test_megatron_scripts_read_as_bash_reads_them():
    """Quoted $OPTS, a multi-line "..." variable, a variable reassigned after the command, and
    $((...)) arithmetic (2**11, and a large no-cost product) as bash expands them."""
    quoted = imported("meg_quoted_string_var")
    assert (
        quoted["parallel"]["sequence_parallel"] and quoted["parallel"]["recompute"] == "selective"
    )
    assert imported("meg_multiline_string_var")["model"]["num_layers"] == 24
    assert imported("meg_var_reassigned_later")["model"]["num_layers"] == 12
    assert imported("meg_arith_power")["model"]["hidden_size"] == 2048
    assert "--train-samples" in imported("meg_arith_large_nocost")["_stderr"]


def test_megatron_long_word_reads_in_linear_time(tmp_path):
    """One 2 MB word (--data-path) took 70 s through shlex; the reader is one pass."""
    import shutil
    import subprocess
    import sys
    import time

    shutil.copy(REPRO / "meg_long_word" / "make.sh", tmp_path)
    subprocess.run(["sh", "make.sh"], cwd=tmp_path, check=True, capture_output=True)
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "perfmodel", "import", "megatron", "run.sh", "--gpu", "h100-sxm"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    # a generous bound against the old 70 s (not a speed test: machines are noisy)
    assert time.perf_counter() - t0 < 30


def test_megatron_readings_follow_megatron_lm():
    # --num-query-groups defaults to 1: at tp 2 Megatron-Core cannot split one KV group, and says so
    gqa = run("meg_gqa_without_groups", "import", "megatron", "run.sh", "--gpu", "h100-sxm")
    one_line_error(gqa, "num_query_groups(1) is not divisible by tp(2)")
    assert imported("meg_position_none")["model"]["position_embedding"] == "none"
    # the asynchronous TP all-reduce is Megatron-LM's default; --tp-comm-overlap is userbuffers'
    overlap = imported("meg_tp_comm_overlap_mapping")["training"]
    assert overlap["tp_comm_overlap"] and not overlap["tp_comm_overlap_ub"]
    from perfmodel.inputs.megatron import read_args

    script = (REPRO / "meg_tp_comm_overlap_mapping" / "run.sh").read_text().strip()
    ub = read_args(script + " --tp-comm-overlap\n", "h100-sxm").plan["training"]
    assert ub["tp_comm_overlap_ub"] and ub["tp_comm_overlap"]
    fsdp = imported("meg_fsdp_args_not_read")
    assert fsdp["parallel"]["zero_stage"] == 3 and "not recognized" not in fsdp["_stderr"]
    twice = imported("meg_duplicate_flag")
    assert twice["parallel"]["tp"] == 4 and "given more than once" in twice["_stderr"]


def test_megatron_command_line_values_replace_the_files_with_a_note():
    out = imported("meg_cli_overrides_file", "--gpus", "32", "--vocab-size", "50000")
    assert out["system"]["num_gpus"] == 32 and out["model"]["vocab_size"] == 50000
    assert "replaces the file's 8 x 2 = 16" in out["_stderr"]
    assert "--vocab-size 50000 replaces the file's --vocab-size 32000" in out["_stderr"]


def test_megatron_overrides_apply_before_the_layout_is_checked():
    r = run(
        "meg_override_validated_first",
        "estimate",
        "run.sh",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "6",
        "--pp",
        "3",
        "--json",
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["config"]["pp"] == 3


def nemo(case: str, *extra: str) -> dict:
    """The plan `import nemo recipe.yaml --gpu h100-sxm` writes for a reproducer, parsed."""
    import yaml

    r = run(case, "import", "nemo", "recipe.yaml", "--gpu", "h100-sxm", *extra)
    assert r.exit_code == 0, r.output
    return yaml.safe_load(r.stdout) | {"_stderr": r.stderr}


@pytest.mark.parametrize(
    "case, needles",
    [
        ("nemo_checkpoint_method_bogus", ["activations_checkpoint_method: 'bogus'; NeMo accepts"]),
        ("nemo_mandatory_missing", ["model.ffn_hidden_size: ??? is OmegaConf's mandatory value"]),
        ("nemo_num_nodes_true", ["trainer.num_nodes: True is not a count"]),
    ],
)
def test_nemo_values_refused_by_name(case, needles):
    one_line_error(run(case, "import", "nemo", "recipe.yaml", "--gpu", "h100-sxm"), *needles)


def test_nemo_values_typed_as_omegaconf_types_them():
    """Strings where NeMo's dataclasses hold bools and floats, and YAML 1.1's 'off', read as
    OmegaConf reads them rather than by Python's bool() of a string."""
    bias = nemo("nemo_bool_string_bias")["model"]
    assert bias["add_bias_linear"] is False and bias["tied_embeddings"] is False
    assert nemo("nemo_yaml11_off")["model"]["add_bias_linear"] is False
    assert nemo("nemo_dropout_string_zero")["model"]["dropout"] is False
    assert nemo("nemo_fp8_string_false")["training"]["dtype"] == "bf16"
    # "false" is off: nothing to offload, nothing to refuse
    offload = nemo("nemo_cpu_offloading_string_false")["_stderr"]
    assert "ignored (no effect on the cost): model.cpu_offloading" in offload


def test_nemo_bridge_sections_read_as_megatron_bridge_reads_them():
    sgd = nemo("nemo_bridge_optimizer_sgd", "--gpus", "16")
    assert sgd["training"]["optimizer"] == "sgd"
    fp16 = nemo("nemo_mixed_precision_mapping", "--gpus", "16")
    assert fp16["training"]["dtype"] == "fp16"
    strategy = nemo("nemo_trainer_strategy_tp")
    assert strategy["parallel"]["tp"] == 4


def test_nemo_unknown_keys_and_sections_are_not_recognized():
    keys = nemo("nemo_unknown_keys_unreported", "--gpus", "16")["_stderr"]
    assert "not recognized" in keys and "trainer.bogus_knob" in keys and "ddp.bogus_knob" in keys
    section = nemo("nemo_unknown_section_costless")["_stderr"]
    assert "not recognized" in section and "parallelism" in section
    assert "no effect on the cost): parallelism" not in section


def test_nemo_userbuffers_off_keeps_the_async_tp_overlap(tmp_path):
    """ub_tp_comm_overlap: false turns off userbuffers only; the key absent and false agree."""
    case = REPRO / "nemo_ub_tp_comm_overlap_false"
    absent = "\n".join(
        ln
        for ln in (case / "recipe.yaml").read_text().splitlines()
        if "ub_tp_comm_overlap" not in ln
    )
    (tmp_path / "recipe.yaml").write_text(absent + "\n")
    times = []
    for folder in (case, tmp_path):
        r = CliRunner().invoke(
            main, ["estimate", str(folder / "recipe.yaml"), "--gpu", "h100-sxm", "--json"]
        )
        assert r.exit_code == 0, r.output
        times.append(json.loads(r.stdout)["step_time_s"])
    assert times[0] == pytest.approx(times[1], rel=1e-9)


def comment_text(emitted: str) -> str:
    """The comment lines of an emitted launch text as one line (they wrap at 80 columns)."""
    return " ".join(
        " ".join(ln.lstrip("#").split()) for ln in emitted.splitlines() if ln.startswith("#")
    )


def emitted_and_read_back(tmp_path, case: str, plan_file: str, gpu: str) -> tuple[dict, dict]:
    """The reproducer's plan searched (its best as JSON) and its `--emit megatron` text imported
    and estimated (tests/helpers.py emit_round_trip), with the emitted text and the imported plan
    as _emitted and _back."""
    from helpers import emit_round_trip

    trip = emit_round_trip(REPRO / case / plan_file, tmp_path, gpu)
    assert trip.estimate is not None, (trip.searched.output, trip.emitted and trip.emitted.output)
    return trip.best, trip.estimate | {"_emitted": trip.emitted.stdout, "_back": trip.back}


def test_emit_keeps_the_first_and_last_stage_layers(tmp_path):
    """decoder_first/last_pipeline_num_layers (8, 8) were dropped: 6.49 s read back against the
    plan's 7.29 s. vp 10 no longer passes with 8 layers on a stage (each chunk needs a layer)."""
    best, back = emitted_and_read_back(
        tmp_path, "emit_drops_stage_layers", "plan.yaml", "a100-80gb"
    )
    # a vp that does not divide the 8 layers (5) has the split written as a layout; the pick is the
    # nearest validated practice among those the model cannot rank (issue 28), fewer chunks first
    vp = best["config"]["vp"]
    assert vp <= 9
    assert ("--pipeline-model-parallel-layout" in back["_emitted"]) == bool(8 % vp)
    parallel = back["_back"]["parallel"]
    assert (
        parallel["decoder_first_pipeline_num_layers"]
        == 8
        == parallel["decoder_last_pipeline_num_layers"]
    )
    assert back["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-9)


def test_emit_writes_the_layout_an_uneven_split_needs(tmp_path):
    """61 layers on pp 32 were emitted without the arguments Megatron-Core needs to split them;
    the balanced split (1, 2 x 29, 1, 1) is a --pipeline-model-parallel-layout."""
    from helpers import emit_round_trip

    # pp 32 fixed: the search's answer has moved off it since tight configurations are kept and
    # ranked (issue 37); the emit of an uneven split is what is tested here
    text = (REPRO / "emit_uneven_split_unlaunchable" / "deepseek.yaml").read_text()
    (tmp_path / "deepseek.yaml").write_text(text + "parallel: {pp: 32}\n")
    trip = emit_round_trip(tmp_path / "deepseek.yaml", tmp_path, "h100-sxm")
    assert trip.estimate is not None, (trip.searched.output, trip.emitted and trip.emitted.output)
    best, back = trip.best, trip.estimate | {"_emitted": trip.emitted.stdout}
    # the layout in Megatron-Core's repeat syntax ('Et|(tt|)*29...'), read back stage by stage
    assert "--pipeline-model-parallel-layout 'Et|(tt|)*" in back["_emitted"]
    assert back["stage_layers"] == best["stage_layers"]
    assert back["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-9)


def test_emit_carries_the_framework_profile(tmp_path):
    """A megatron-2021 plan read back as megatron-core (4.95 s against 5.71 s); the emitted text
    now names its profile in a comment `import megatron` reads, and says what today's
    Megatron-LM would run."""
    best, back = emitted_and_read_back(
        tmp_path, "emit_framework_profile_lost", "plan.yaml", "a100-80gb"
    )
    assert "# perfmodel: framework megatron-2021" in back["_emitted"]
    assert "today's Megatron-LM runs these arguments as megatron-core" in comment_text(
        back["_emitted"]
    )
    assert back["_back"]["training"]["framework"] == "megatron-2021"
    assert back["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-9)


def test_emit_zero3_reads_back_as_zero3(tmp_path):
    best, back = emitted_and_read_back(
        tmp_path, "emit_zero3_not_read_back", "plan.yaml", "h100-sxm"
    )
    assert best["config"]["zero_stage"] == 3 == back["config"]["zero_stage"]
    assert back["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-9)


def test_emit_writes_userbuffers_overlap_only_with_sequence_parallelism():
    out = run("emit_tp_comm_overlap_without_sp", "plan", "a.yaml", "--emit", "megatron").stdout
    assert "--tp-comm-overlap" not in out or "--sequence-parallel" in out


def test_emit_with_json_is_json():
    r = run("emit_json_ignored", "plan", "a.yaml", "--emit", "megatron", "--json")
    j = json.loads(r.stdout)
    assert "--num-layers 32" in j["arguments"] and j["launcher"].startswith("torchrun")
    assert j["step_time_s"] > 0 and j["config"]["tp"] >= 1


def test_compare_empty_path_says_the_argument_is_empty():
    one_line_error(run("compare_empty_path", "compare", "a.yaml", ""), "the plan argument is empty")


def test_nothing_fits_hint_names_context_parallelism():
    """The hint's leanest configuration is the least memory over every knob, cp included: since
    ZeRO-3 counts its gathered layers (two layers' weights and one's gradients in flight), tp 8
    without cp (394.1 GB) is leaner than tp 4 cp 2 under ZeRO-3 (398.4 GB)."""
    r = run("hint_omits_cp", "plan", "nofit.yaml")
    assert (
        r.exit_code == 1
        and "the leanest configuration (tp=8 pp=1 dp=1" in r.output
        and "394.1 GB" in r.output
    )


def test_memory_reads_launch_files_with_its_gpu():
    r = run("memory_launch_file", "memory", "run.sh", "--gpu", "h100-sxm", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["capacity_bytes"] == pytest.approx(85.52e9, rel=1e-3)


def test_memory_refuses_quick_options_with_a_plan():
    r = run("memory_quick_options_ignored", "memory", "a.yaml", "--model", "gpt3-175b",
            "--gbs", "4096", "--json")  # fmt: skip
    one_line_error(r, "--model and --gbs are for the quick case")
    one_line_error(
        run("memory_quick_options_ignored", "memory", "a.yaml", "--gpu", "a100-40gb"),
        "--gpu is for Megatron-LM launch files and NeMo recipes",
    )


def test_stage_layer_messages_name_the_field_given():
    r = run("msg_last_stage_layers", "plan", "last100.yaml")
    one_line_error(r, "parallel.decoder_last_pipeline_num_layers: 100 layers on the last stage")
    c = run("msg_last_stage_layers", "check", "last100.yaml")
    assert "parallel.decoder_last_pipeline_num_layers:" in c.output
    assert "fix: fix" not in c.output and "fix: give pp >= 2" in c.output


def test_pp_not_dividing_the_gpus_is_named():
    r = run("msg_pp_not_dividing_gpus", "plan", "pp5.yaml")
    one_line_error(r, "parallel.pp 5 does not divide num_gpus(64)")
    assert "node boundary" not in r.output and "a multiple of 8" not in r.output


def test_report_refuses_to_overwrite_its_plan(tmp_path):
    import shutil

    shutil.copy(REPRO / "report_overwrites_plan" / "a.yaml", tmp_path / "a.yaml")
    before = (tmp_path / "a.yaml").read_text()
    r = CliRunner().invoke(
        main, ["report", str(tmp_path / "a.yaml"), "-o", str(tmp_path / "a.yaml")]
    )
    one_line_error(r, "that is the input file")
    assert (tmp_path / "a.yaml").read_text() == before


def test_sweep_reads_launch_files():
    r = run("sweep_launch_file", "sweep", "run.sh", "--gpu", "h100-sxm", "--vary", "gpus=16,32")
    assert r.exit_code == 0, r.output
    assert "tp2" in r.stdout


def test_sweep_checks_the_plot_name_before_the_work():
    r = run("sweep_plot_noext_after_work", "sweep", "a.yaml", "--vary", "gpus=16,32",
            "--plot", "noext")  # fmt: skip
    assert r.exit_code == 2 and "give the file an extension" in r.output
    assert "Sweep of" not in r.output


def test_sweep_values_are_bounded_and_reported():
    from perfmodel.review import sweep as sw

    values = (REPRO / "sweep_500_values" / "values.txt").read_text().strip()
    path, vals = sw.parse_vary(f"gbs={values}")  # 500 values: within the bound
    assert len(vals) == 500
    too_many = ",".join(str(16 * i) for i in range(1, sw.MAX_VALUES + 2))
    one_line_error(run("sweep_500_values", "sweep", "a.yaml", "--vary", f"gbs={too_many}"),
                   f"a sweep takes at most {sw.MAX_VALUES}")  # fmt: skip
    calls = []
    plan = (
        __import__("perfmodel.inputs", fromlist=["load"])
        .load(str(REPRO / "sweep_500_values" / "a.yaml"))
        .plan
    )
    sw.sweep(plan, path, vals[:3], progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, 3), (1, 3), (2, 3), (3, 3)]  # from none to all, as each value ends


# issue 33: the reproducers of the new user's fuzzing


def test_dp_shard_must_divide_the_resolved_dp():
    """dp_shard was checked against dp only when dp was given: dp_shard 3 (or 1000, or 64) of the
    dp 32 resolved from num_gpus ran, 1000 with less memory than the full shard."""
    case = "hsdp_dp_shard_not_dividing_dp"
    one_line_error(run(case, "estimate", "f.yaml", "--dp-shard", "1000", "--json"),
                   "parallel.dp_shard: dp_shard(1000) does not divide dp(32)")  # fmt: skip
    one_line_error(run(case, "memory", "sh3.yaml"), "dp_shard(3) does not divide dp(32)")
    for args in (["sh3.yaml"], ["f.yaml", "--dp-shard", "64"]):
        r = run(case, "check", *args)
        assert r.exit_code == 1 and "PM102" in r.output and "does not divide dp(32)" in r.output
    assert run(case, "estimate", "f.yaml", "--dp-shard", "8").exit_code == 0


def test_emit_carries_the_nvlink_domain_and_import_assumes_the_rack(tmp_path):
    """GB200 plans (nvlink_domain 72) emitted and read back as one 4-GPU tray per NVLink domain:
    2.62 s emitted, 8.05 s read back. The emitted text carries the domain in a comment that
    `import megatron` reads; without it, import assumes the NVL72 rack and says so."""
    case = "emit_gb200_nvlink_domain_lost"
    # the layout the bundled plan's search picks, fixed (the emit is what is tested; the round
    # trip of every bundled plan's full search is test_megatron's)
    fixed = ("--tp", "1", "--pp", "6", "--vp", "5", "--mbs", "1", "--cp", "1")
    emitted = json.loads(run(case, "plan", "deepseek-v3-gb200", *fixed, "--emit", "megatron",
                             "--json").stdout)  # fmt: skip
    assert emitted["nvlink_domain"] == 72
    text = run(case, "plan", "deepseek-v3-gb200", *fixed, "--emit", "megatron").stdout
    assert "# perfmodel: nvlink_domain 72" in text
    (tmp_path / "args.sh").write_text("torchrun --nproc_per_node 4 --nnodes 576 x.py \\\n" + text)
    back = CliRunner().invoke(main, ["estimate", str(tmp_path / "args.sh"), "--gpu", "gb200",
                                     "--vocab-size", "129280", "--json"])  # fmt: skip
    assert back.exit_code == 0, back.output
    assert json.loads(back.stdout)["step_time_s"] == pytest.approx(emitted["step_time_s"], 1e-9)
    # the reproducer's files were emitted before the marker: the assumed rack gives them back
    # the megatron-2021 file was emitted from a search that gave that profile sequence parallelism
    # and selective recompute, which Megatron-LM 2021 did not have (issue 38): it is refused now,
    # naming the profile and what it lacks
    r = run(case, "estimate", "llama405b_megatron-2021.sh", "--gpu", "gb200", "--vocab-size",
            "128256", "--json")  # fmt: skip
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert "megatron-2021 has no sequence parallelism" in " ".join(r.stderr.split())
    for script, vocab in (("args.sh", "129280"), ("llama405b_deepspeed.sh", "128256"),
                          ("llama405b_megatron-core.sh", "128256")):  # fmt: skip
        predicted = float(re.search(r"predicted ([\d.]+) s per step",
                                    (REPRO / case / script).read_text()).group(1))  # fmt: skip
        r = run(case, "estimate", script, "--gpu", "gb200", "--vocab-size", vocab, "--json")
        assert "an NVLink domain of 72 GPUs" in " ".join(r.stderr.split())
        assert max(map(len, r.stderr.splitlines())) <= 80
        # the files carry the prediction of the model they were emitted with; it has moved since
        # (MoE switches, schedules, memory) by a few percent, while the misread rack was 3x
        assert json.loads(r.stdout)["step_time_s"] == pytest.approx(predicted, rel=0.1)
    marked = (REPRO / case / "args.sh").read_text() + "\n# perfmodel: nvlink_domain 64\n"
    (tmp_path / "m.sh").write_text(marked)
    r = CliRunner().invoke(main, ["import", "megatron", str(tmp_path / "m.sh"), "--gpu", "gb200",
                                  "--vocab-size", "129280"])  # fmt: skip
    assert "nvlink_domain: 64" in r.stdout and "an NVLink domain of 72" not in r.output


def test_reshard_after_forward_false_holds_every_layers_weights():
    """fully_shard(reshard_after_forward=False) keeps each layer's gathered 16-bit weights from its
    forward to its backward: the step lost its second all-gather but the memory stayed 64.04 GB.
    At the forward's end all 32 layers' weights are unsharded, where FULL_SHARD holds two layers'
    (the one computing and the one prefetched): 2 B x P x (1 - 2/32) more."""
    case = "fsdp_reshard_after_forward_memory"
    off, on = (json.loads(run(case, "estimate", f, "--json").stdout)
               for f in ("raf_false.yaml", "raf_true.yaml"))  # fmt: skip
    assert off["step_time_s"] < on["step_time_s"]
    p = on["memory"]["params_per_gpu"]  # Llama-3 8B unsharded
    grown = off["memory"]["total_bytes"] - on["memory"]["total_bytes"]
    assert grown == pytest.approx(2 * p * (1 - 2 / 32), rel=0.02)


def test_nemo_bridge_mixed_precision_recipes_read_by_name(tmp_path):
    """Recipe names were read by substring: bf16_with_mxfp8_mixed as fp8, bf16_with_nvfp4_mixed
    as bf16, the subchannel (blockwise) recipe's scaling lost. Megatron-Bridge's
    mixed_precision.py: mxfp8 is fp8 e4m3 with fp8_recipe mxfp8, nvfp4 fp4 e2m1, subchannel
    fp8_recipe blockwise (a Hopper recipe: refused on B200)."""
    case = "nemo_bridge_mixed_precision_recipes"
    seen = {}
    for name, gpu in (("bf16_with_mxfp8_mixed", "b200"), ("bf16_with_nvfp4_mixed", "b200"),
                      ("bf16_with_fp8_subchannel_scaling_mixed", "h100-sxm")):  # fmt: skip
        r = run(case, "import", "nemo", f"{name}.yaml", "--gpu", gpu, "--gpus", "8")
        assert r.exit_code == 0, r.output
        seen[name] = __import__("yaml").safe_load(r.stdout)["training"]
    assert seen["bf16_with_mxfp8_mixed"]["dtype"] == "mxfp8"
    assert seen["bf16_with_mxfp8_mixed"]["fp8_param_gather"] is True
    assert seen["bf16_with_nvfp4_mixed"]["dtype"] == "nvfp4"
    assert seen["bf16_with_fp8_subchannel_scaling_mixed"]["fp8_recipe"] == "blockwise"
    one_line_error(run(case, "import", "nemo", "bf16_with_fp8_subchannel_scaling_mixed.yaml",
                       "--gpu", "b200", "--gpus", "8"),
                   "mixed_precision bf16_with_fp8_subchannel_scaling_mixed (fp8_recipe blockwise)",
                   "use mixed_precision bf16_with_mxfp8_mixed")  # fmt: skip
    text = (REPRO / case / "bf16_with_mxfp8_mixed.yaml").read_text()
    (tmp_path / "r.yaml").write_text(text.replace("bf16_with_mxfp8_mixed", "bf16_with_fp9"))
    r = CliRunner().invoke(main, ["import", "nemo", str(tmp_path / "r.yaml"), "--gpu", "b200"])
    one_line_error(r, "mixed_precision: 'bf16_with_fp9' is not a Megatron-Bridge recipe")


def test_nemo_fp8_is_a_format_string(tmp_path):
    """model.fp8: hybrid was refused as "not true or false": Megatron-Core's fp8 is a format
    (e4m3, hybrid). Under mixed_precision bf16_mixed, which Megatron-Bridge applies over the model
    config (fp8 None), it is off and said so; without it, it is FP8 with its recipe."""
    case = "nemo_fp8_hybrid_string_refused"
    under = nemo(case, "--gpus", "8")
    assert under["training"]["dtype"] == "bf16"
    assert "model.fp8 hybrid is off under mixed_precision bf16_mixed" in under["_stderr"]
    text = (REPRO / case / "recipe.yaml").read_text().replace("mixed_precision: bf16_mixed", "")
    for fmt in ("hybrid", "e4m3"):
        (tmp_path / "r.yaml").write_text(text.replace("fp8: hybrid", f"fp8: {fmt}"))
        r = CliRunner().invoke(main, ["import", "nemo", str(tmp_path / "r.yaml"), "--gpu",
                                      "h100-sxm", "--gpus", "8"])  # fmt: skip
        training = __import__("yaml").safe_load(r.stdout)["training"]
        assert training["dtype"] == "fp8" and training["fp8_recipe"] == "tensorwise"
    (tmp_path / "r.yaml").write_text(text.replace("fp8: hybrid", "fp8: e5m2"))
    r = CliRunner().invoke(main, ["import", "nemo", str(tmp_path / "r.yaml"), "--gpu",
                                  "h100-sxm", "--gpus", "8"])  # fmt: skip
    one_line_error(r, "model.fp8: 'e5m2'; Megatron-Core takes e4m3 or hybrid")


def test_nemo_keys_go_through_the_megatron_readers():
    """Bridge's precision-aware optimizer (optimizer.exp_avg_dtype bf16), recompute_modules,
    offloading, router groups and Megatron-FSDP were dropped or "not recognized"; they are read
    as `import megatron` reads the same arguments, in the recipe's words."""
    aware = nemo("nemo_bridge_precision_aware_optimizer_dropped", "--gpus", "8")["training"]
    assert aware["exp_avg_dtype"] == "bf16" == aware["exp_avg_sq_dtype"]
    case = "nemo_bridge_precision_aware_optimizer_dropped"
    states = [json.loads(run(case, "estimate", f, "--gpu", "h100-sxm", "--gpus", "8",
                             "--json").stdout)["memory"]["optimizer_bytes"]
              for f in ("base.yaml", "recipe.yaml")]  # fmt: skip
    assert states[1] == pytest.approx(states[0] * 8 / 12)  # 4 + 2 + 2 B, not 4 + 4 + 4
    keys = nemo("nemo_cost_keys_not_recognized", "--gpus", "8")
    assert keys["training"]["recompute_modules"] == ["mlp"]
    assert keys["model"]["moe_router_num_groups"] == 4 == 2 * keys["model"]["moe_router_group_topk"]
    assert keys["parallel"]["zero_stage"] == 3
    assert "not recognized" not in keys["_stderr"]
    assert "cpu_offloading_num_layers 4 without model.cpu_offloading" in keys["_stderr"]


def test_nemo_cpu_offloading_true_is_read_not_refused(tmp_path):
    """model.cpu_offloading: true was refused as "perfmodel cannot model", though the plan's
    training.cpu_offloading_num_layers is Megatron-Core's offloading."""
    text = (REPRO / "nemo_cost_keys_not_recognized" / "recipe.yaml").read_text()
    text = text.replace("recompute_granularity: selective", "recompute_granularity: null")
    text = text.replace("  recompute_modules: [mlp]\n", "  cpu_offloading: true\n")
    (tmp_path / "r.yaml").write_text(text)
    r = CliRunner().invoke(main, ["import", "nemo", str(tmp_path / "r.yaml"), "--gpu",
                                  "h100-sxm", "--gpus", "8"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert __import__("yaml").safe_load(r.stdout)["training"]["cpu_offloading_num_layers"] == 4


def test_megatron_fp8_recipe_without_format_is_accounted_for():
    r = run("meg_fp8_recipe_unaccounted", "import", "megatron", "run.sh", "--gpu", "h100-sxm")
    assert r.exit_code == 0
    assert "--fp8-recipe (read only with --fp8-format; FP8 is off)" in " ".join(r.stderr.split())


def test_group_limited_routing_must_reach_topk_experts():
    """256 groups of 1 expert, 1 group a token may reach, top-8: accepted and predicted faster
    than the real 8/4 routing. Megatron-Core's group_limited_topk cannot pick 8 of 1."""
    case = "moe_group_topk_unreachable"
    for cmd in ("estimate", "check"):
        one_line_error(run(case, cmd, "plan.yaml"),
                       "moe_router_topk(8) exceeds the 1 experts a token can reach")  # fmt: skip
    # through a config.json, in its own keys
    one_line_error(run(case, "estimate", "config_g64.yaml", "--json"),
                   "num_experts_per_tok(6) exceeds", "topk_group(1)", "n_group(64)")  # fmt: skip
    assert run(case, "estimate", "dsv3.yaml", "--json").exit_code == 0  # 8 groups, 4 reached


def test_recompute_modules_conflicts_and_absent_modules_are_refused():
    case = "recompute_modules_conflict"
    one_line_error(run(case, "estimate", "both.yaml", "--json"),
                   "op_sac and layer_sac are one torchtitan choice")  # fmt: skip
    one_line_error(run(case, "check", "dense_mla.yaml"),
                   "mla_up_proj, moe_act not in Llama-3 8B (no MLA, no MoE)")  # fmt: skip
    assert run(case, "estimate", "op.yaml", "--json").exit_code == 0


def test_activation_offloading_only_under_a_framework_that_runs_it():
    """cpu_offloading_num_layers is Megatron-Core's --cpu-offloading-num-layers: taken without a
    word under fsdp (64.04 -> 59.11 GB) and deepspeed (136.1 -> 123.2 GB)."""
    case = "offloading_framework_unchecked"
    one_line_error(run(case, "check", "off_fsdp.yaml"), "fsdp has no activation offloading")
    one_line_error(run(case, "estimate", "off_deepspeed.yaml", "--json"),
                   "deepspeed has no activation offloading")  # fmt: skip
    assert run(case, "estimate", "off.yaml", "--json").exit_code == 0  # megatron-core


def test_emit_writes_cpu_offloading(tmp_path):
    """training.cpu_offloading_num_layers 8 was not emitted: the arguments ran, and read back,
    without offloading (136.1 GB against the plan's 123.2 GB)."""
    best, back = emitted_and_read_back(tmp_path, "emit_drops_cpu_offloading", "plan.yaml", "gb200")
    assert "--cpu-offloading \\\n--cpu-offloading-num-layers 8" in back["_emitted"]
    assert back["_back"]["training"]["cpu_offloading_num_layers"] == 8
    assert back["memory"]["total_bytes"] == pytest.approx(best["memory"]["total_bytes"], 1e-9)
    assert back["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-9)


def test_emit_says_the_hsdp_split_is_not_in_the_arguments():
    """fsdp1's best is HSDP (dp 512, dp_shard 256); Megatron-LM's arguments shard over all 512,
    and the comments said nothing of it."""
    r = run("emit_hsdp_dp_shard_dropped", "plan", "gpt3-175b", "--framework", "fsdp1",
            "--emit", "megatron")  # fmt: skip
    comments = comment_text(r.stdout)
    assert "not in these arguments: the HSDP split (dp_shard 256, 2 replicas of dp 512)" in (
        comments
    )


def test_emit_comments_within_80_columns():
    out = run("emit_comment_lines_124", "plan", "f.yaml", "--emit", "megatron").stdout
    comments = [ln for ln in out.splitlines() if ln.startswith("#")]
    assert len(comments) >= 4 and max(map(len, comments)) <= 80
    assert "# perfmodel: framework fsdp" in comments  # the marker stays one line


def test_emit_with_nothing_to_emit_writes_nothing_to_stdout():
    # gpt3-175b-3d is 0.8 GB over the usable line, inside the memory band: tight, it is kept since
    # issue 37; a 15 GB reserve puts it beyond the band
    r = run("emit_nothing_fits_on_stdout", "plan", "gpt3-175b-3d", "--emit", "megatron",
            "--memory-reserve", "15GB")  # fmt: skip
    assert r.exit_code == 1 and r.stdout == "" and "nothing fits" in r.stderr


def test_memory_reserve_at_or_above_the_hbm_is_refused(tmp_path):
    """--memory-reserve 80GiB on an 85.5 GB GPU printed usable -378.5 MB."""
    for cmd in ("memory", "estimate"):
        r = run("memory_reserve_beyond_hbm", cmd, "f.yaml", "--memory-reserve", "80GiB")
        assert r.exit_code == 2 and "Traceback" not in r.output
        assert says(r.output, "--memory-reserve: 85.9 GB is not below the 85.5 GB of HBM")
    text = (REPRO / "memory_reserve_beyond_hbm" / "f.yaml").read_text()
    (tmp_path / "f.yaml").write_text(text.replace("gpus_per_node: 8", "gpus_per_node: 8,"
                                                  " memory_reserve: 90 GB"))  # fmt: skip
    r = CliRunner().invoke(main, ["estimate", str(tmp_path / "f.yaml")])
    one_line_error(r, "memory_reserve: 90.0 GB is not below the 85.5 GB of HBM")


def test_does_not_fit_names_the_usable_line_and_the_reserve():
    """'DOES NOT FIT: 64.0 GB needed per GPU, 85.5 GB of HBM' (64 < 85.5): the limit that failed
    is the HBM less the reserve; check gave a negative excess over the whole HBM."""
    r = run("does_not_fit_message_ignores_reserve", "estimate", "f.yaml", "--memory-reserve",
            "50 %")  # fmt: skip
    first = " ".join(r.stdout.split("\n\n")[0].split())
    # 71.9 GB: torchtitan's fp32 loss logits are counted since (engine/memory.py)
    assert first.startswith("DOES NOT FIT: 71.9 GB needed, 42.8 GB usable (85.5 GB HBM less a"
                            " 42.8 GB reserve; --memory-reserve)")  # fmt: skip
    c = " ".join(run("reserve_negative_over_bundled_plan", "check", "gpt3-175b-3d").output.split())
    assert "808.6 MB over the 81.6 GB usable (85.9 GB HBM less a 4.29 GB reserve" in c
    assert "tight: inside the memory model's +-10.2% band" in c
    # 0.8 GB over is inside the memory band: plan keeps it, tight (issue 37); beyond the band,
    # with a 15 GB reserve, nothing fits and the message names the usable line
    p = " ".join(run("reserve_negative_over_bundled_plan", "plan", "gpt3-175b-3d").output.split())
    assert "memory: tight (808.6 MB over, +-10.2%)" in p
    p = " ".join(run("reserve_negative_over_bundled_plan", "plan", "gpt3-175b-3d",
                     "--memory-reserve", "15GB").output.split())  # fmt: skip
    assert "nothing fits in the 70.9 GB usable (85.9 GB HBM less the reserve" in p


def test_compare_json_carries_the_training_run():
    """--tokens was silently ignored under compare --json: no days, GPU-hours or cost."""
    case = "compare_json_drops_training_run"
    with_tokens = json.loads(run(case, "compare", "fp.yaml", "fp.yaml", "--tokens", "1T",
                                 "--json").stdout)  # fmt: skip
    text = " ".join(run(case, "compare", "fp.yaml", "fp.yaml", "--tokens", "1T").stdout.split())
    for plan in with_tokens["plans"]:
        r = plan["training_run"]
        assert r["tokens"] == 1e12 and r["days"] > 0 and r["cost_usd"] > 0
        assert f"{r['gpu_hours']:,.0f}" in text
    assert with_tokens["plans"][1]["delta_vs_first"]["training_run"]["days"] == 0
    plain = json.loads(run(case, "compare", "fp.yaml", "fp.yaml", "--json").stdout)
    assert plain["plans"][0]["training_run"] is None


def test_sweep_marks_a_row_that_does_not_fit():
    r = run("sweep_fixed_not_fit_unmarked", "sweep", "f.yaml", "--vary",
            "gpu=h100-sxm,a100-40gb", "--fixed")  # fmt: skip
    rows = {ln.split()[0]: ln for ln in r.stdout.splitlines() if ln[:4] in ("h100", "a100")}
    assert "71.9 GB NO" in rows["a100-40gb"] and " NO " not in rows["h100-sxm"]
    assert "system.gpu=a100-40gb: DOES NOT FIT (memory NO): 71.9 GB needed, 40.8 GB usable" in (
        " ".join(r.stdout.split())
    )


def test_memory_quick_case_applies_the_framework():
    """--framework was ignored without a plan file (61.49 GB under every profile), and fsdp's
    --dp-shard refused as "not ZeRO-3 under megatron-core"."""
    totals = {}
    for fw in ("fsdp", "deepspeed", "megatron-core"):
        r = CliRunner().invoke(
            main,
            [
                "memory",
                "--model",
                "llama3-8b",
                "--gpu",
                "h100-sxm",
                "--gpus",
                "8",
                "--zero",
                "3",
                "--framework",
                fw,
                "--json",
            ],
        )
        totals[fw] = json.loads(r.stdout)["total_bytes"]  # fmt: skip
    assert len(set(totals.values())) == 3
    r = CliRunner().invoke(
        main,
        [
            "memory",
            "--model",
            "llama3-8b",
            "--gpu",
            "h100-sxm",
            "--gpus",
            "8",
            "--zero",
            "3",
            "--framework",
            "fsdp",
            "--dp-shard",
            "4",
        ],
    )
    assert r.exit_code == 0 and "megatron-core" not in r.output  # fmt: skip


def test_a_field_given_under_both_its_names_is_named_once():
    one_line_error(run("alias_and_name_both_given", "estimate", "both.yaml"),
                   "'reshard_after_forward' and 'zero3_reshard_after_forward' name one field;"
                   " give one of them")  # fmt: skip


def test_dp_replicate_alone_is_named_in_the_layout_error():
    """dp_replicate 4 without dp_shard on 32 GPUs was reported as dp(4), which the plan lacks."""
    r = run("dp_replicate_error_names_dp", "estimate", "plan.yaml")
    one_line_error(r, "parallel.dp_replicate: dp_replicate(4) x dp_shard(1) = 4 ranks, 32 GPUs",
                   "set dp_shard 8")  # fmt: skip


def test_a_framework_without_expert_parallelism_searches_ep_1():
    """The search built ep 8 under fsdp (the rule masked cp and ep together where ep was still
    1), then failed on its own pick: 'fsdp has no context or expert parallelism (cp(2), ep(8))',
    knobs the bundled plan does not fix. Now what a framework cannot run is masked where its knob is
    built: fsdp (which runs torchtitan's EP since issue 40) keeps only the (ep, etp) pairs
    torchtitan's mesh folds, etp = tp or 1, and fsdp1 (no CP or EP) says nothing fits, as a
    search does."""
    case = "plan_message_names_unset_cp_ep"
    r = run(case, "plan", "deepseek-v3-h100", "--framework", "fsdp", "--json")
    assert r.exit_code == 0, r.output
    configs = [c["config"] for c in json.loads(r.stdout)["results"]]
    assert all(c["etp"] in (1, c["tp"]) for c in configs)
    assert "the framework cannot run it ((ep, etp) pairs)" in " ".join(
        run(case, "plan", "deepseek-v3-h100", "--framework", "fsdp").output.split()
    )
    one = run(case, "plan", "deepseek-v3-h100", "--framework", "fsdp1")
    assert one.exit_code == 1 and "Error:" not in one.output and "nothing fits" in one.output


def test_megatron_errors_name_the_arguments():
    """The errors named perfmodel's plan fields (training.fp8_recipe, training.dtype mxfp8,
    recompute_modules.0), not the launch file's arguments, and their fix in the plan's terms."""
    case = "meg_errors_name_plan_fields"
    one_line_error(run(case, "import", "megatron", "blockwise_b200.sh", "--gpu", "b200"),
                   "--fp8-recipe blockwise on B200", "use --fp8-recipe mxfp8")  # fmt: skip
    one_line_error(run(case, "import", "megatron", "mxfp8_h800.sh", "--gpu", "h800"),
                   "--fp8-format e4m3 --fp8-recipe mxfp8: H800-SXM5-80GB has no mxfp8")  # fmt: skip
    r = run(case, "import", "megatron", "modules_comma.sh", "--gpu", "h100-sxm")
    one_line_error(r, "--recompute-modules core_attn,mlp: Megatron-LM takes them space-separated"
                      " (--recompute-modules core_attn mlp)")  # fmt: skip
    assert "training" not in r.output


def test_compare_and_sweep_tables_fit_80_columns(monkeypatch):
    """Three plans side by side were 85 columns wide, and a sweep over framework names 83: the
    number columns never gave way. Now a number cell of several words wraps between them."""
    monkeypatch.delenv("COLUMNS", raising=False)
    outputs = [
        run("compare_three_plans_width", "compare", "d.yaml", "dp.yaml", "f.yaml").stdout,
        run("sweep_framework_width_83", "sweep", "llama3-8b-h100", "--vary",
            "framework=fsdp,megatron-core,hai-llm").stdout,
        run("sweep_framework_width_83", "sweep", "i1.yaml", "--vary",
            "parallel.sharding_strategy=FULL_SHARD,SHARD_GRAD_OP").stdout,
    ]  # fmt: skip
    for out in outputs:
        assert out.strip() and max(map(len, out.splitlines())) <= 80
    # the wrapped cell keeps its number with its unit
    assert "9.08 GB" in outputs[0] and "(-739.6 MB)" in outputs[0]


def test_plain_table_wraps_a_number_column_only_when_the_text_cannot_give_way():
    from perfmodel.output.console import fit_widths

    rows = [["a", "9.08 GB (-739.6 MB)"], ["b", "1 GB"]]
    assert fit_widths(["x", "y"], rows, [False, True], 80) == [1, 19]  # fits: untouched
    assert fit_widths(["x", "y"], rows, [False, True], 20)[1] == 17  # as much as needed
    assert fit_widths(["x", "y"], rows, [False, True], 12)[1] == len("(-739.6 MB)")
