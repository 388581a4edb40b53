"""Megatron-LM's language both ways (issue 15, item 4): the published example scripts read into
plans, every argument accounted for, and `plan --emit megatron` read back to the same prediction."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.errors import PerfModelError
from perfmodel.inputs.megatron import read_args, tokens

DATA = Path(__file__).parent / "data" / "megatron"
GPT3 = DATA / "train_gpt3_175b_distributed.sh"
MIXTRAL = DATA / "train_mixtral_8x7b_distributed.sh"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_gpt3_example_reads_as_gpt3_175b():
    imp = read_args(GPT3.read_text(), "a100-80gb", num_gpus=128)
    m, p, t = imp.plan["model"], imp.plan["parallel"], imp.plan["training"]
    assert (m["num_layers"], m["hidden_size"], m["num_attention_heads"], m["seq_length"]) == (
        96,
        12288,
        96,
        2048,
    )
    assert m["vocab_size"] == 50257 and any("GPT-2's BPE" in a for a in imp.assumed)
    assert (p["tp"], p["pp"], p["micro_batch_size"], t["global_batch_size"], t["dtype"]) == (
        8,
        16,
        1,
        1536,
        "fp16",
    )
    # Megatron's defaults, not perfmodel's: biases, tied embeddings, dropout, no SP, no distributed
    # optimizer
    assert m["add_bias_linear"] and m["tied_embeddings"] and m["dropout"] and m["mlp"] == "gelu"
    assert p["sequence_parallel"] is False and p["zero_stage"] == 0 and p["vp"] == 1
    # Megatron-LM's opt-in overlaps stay off; its asynchronous TP all-reduce is on by default
    assert t["tp_comm_overlap"] and not t.get("tp_comm_overlap_ub")
    assert not any(t[k] for k in ("overlap_grad_reduce", "overlap_param_gather"))  # opt-in
    assert {"--lr", "--rampup-batch-size", "--save", "--tensorboard-dir", "--split"} <= set(
        imp.ignored
    )
    assert imp.unrecognized == []


def test_gpt3_example_on_its_own_8_gpus_says_what_to_do():
    r = invoke("import", "megatron", GPT3, "--gpu", "a100-80gb")
    assert r.exit_code == 1 and "tp(8) * pp(16) = 128" in r.output and "--gpus N" in r.output


def test_mixtral_example_with_its_defaults_and_comments():
    imp = read_args(MIXTRAL.read_text(), "h100-sxm", vocab_size=32000)
    m, p, t, s = (imp.plan[k] for k in ("model", "parallel", "training", "system"))
    assert (
        m["num_moe_experts"],
        m["moe_router_topk"],
        m["num_query_groups"],
        m["ffn_hidden_size"],
    ) == (2, 2, 2, 896)
    assert (
        m["mlp"] == "swiglu"
        and m["normalization"] == "rmsnorm"
        and m["position_embedding"] == "rope"
    )
    assert not m["add_bias_linear"] and not m["tied_embeddings"] and not m["dropout"]
    assert (s["num_gpus"], s["gpus_per_node"]) == (2, 2)  # ${SLURM_NNODES:-"1"} nodes of 2
    assert (p["ep"], p["etp"], p["zero_stage"]) == (2, 1, 1) and t[
        "dtype"
    ] == "fp32"  # --bf16 is commented out
    assert t["overlap_grad_reduce"] and t["overlap_param_gather"] and t["tp_comm_overlap"]
    assert not t.get("tp_comm_overlap_ub")
    assert p["sequence_parallel"] is False and any("turns it off" in a for a in imp.assumed)  # TP 1
    assert "--moe-grouped-gemm" not in imp.ignored + imp.unrecognized  # commented out
    assert imp.unrecognized == ["--no-masked-softmax-fusion"]
    r = invoke("import", "megatron", MIXTRAL, "--gpu", "h100-sxm", "--vocab-size", "32000")
    unknown = (
        "not recognized, ignored (check they do not change the cost): --no-masked-softmax-fusion"
    )
    # stderr wraps at 80 columns: compare the words
    assert r.exit_code == 0 and unknown in " ".join(r.stderr.split())
    assert max(len(ln) for ln in r.stderr.splitlines()) <= 80


def test_emitted_arguments_read_back_to_the_same_prediction(tmp_path):
    r = invoke("plan", "gpt3-175b.yaml", "--gpus", "512", "--emit", "megatron")
    assert r.exit_code == 0 and r.output.startswith("--num-layers 96 \\\n")
    assert "\n# GPT-3 175B on 512 x A100" in r.output
    script = tmp_path / "run.sh"
    # the output as it is, after the launcher's line: the comments follow the arguments, so the
    # continuation reaches them all (a comment line would end the command, as bash reads it)
    script.write_text("torchrun --nproc_per_node 8 --nnodes 64 pretrain_gpt.py \\\n" + r.output)
    plan = tmp_path / "plan.yaml"
    r = invoke(
        "import", "megatron", script, "--gpu", "a100-80gb", "--vocab-size", "51200", "-o", plan
    )
    assert r.exit_code == 0 and f"wrote {plan}" in r.stderr, r.output
    best = json.loads(
        invoke("plan", "gpt3-175b.yaml", "--gpus", "512", "--top", "1", "--json").output
    )["results"][0]
    est = json.loads(invoke("estimate", plan, "--json").output)
    assert est["searched"] == {} and est["config"] == best["config"]
    assert est["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-12)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "--num-layers 2 --encoder-num-layers 2",
            "cannot model --encoder-num-layers (encoder-decoder models (T5))",
        ),
        ("--num-layers two", "--num-layers two: not a whole number"),
        ("--num-layers 2 4", "--num-layers takes one value, got 2"),
        ("--swiglu yes", "--swiglu is a switch"),
        ("--recompute-method block --recompute-num-layers 2", "recomputing only some layers"),
        ("--normalization Foo", "--normalization Foo"),
        (
            (
                "--num-layers 2 --micro-batch-size 1 --global-batch-size 8 --hidden-size 64"
                " --num-attention-heads 2 --vocab-size 100"
            ),
            "the GPU count is not in the arguments",
        ),
        ("--moe-layer-freq __import__('os')", "--moe-layer-freq"),
        ("--moe-layer-freq [0]*999999*999999", "too large an expression"),
        ("--moe-layer-freq [0,2]", "must hold 0 and 1"),
    ],
)
def test_bad_arguments_are_one_line_errors(text, message):
    with pytest.raises(PerfModelError, match=None) as e:
        read_args(text, "h100-sxm")
    assert message in str(e.value), str(e.value)


def test_cli_errors():
    assert invoke("import", "megatron", "nope.sh", "--gpu", "h100-sxm").exit_code == 1
    r = invoke("import", "megatron", MIXTRAL, "--gpu", "h100-sxm")
    assert r.exit_code == 1 and "pass --vocab-size N" in r.output
    r = invoke("import", "megatron", MIXTRAL, "--gpu", "z900", "--vocab-size", "32000")
    assert r.exit_code == 1 and "z900" in r.output and "Traceback" not in r.output
    assert tokens("A=3\nB=$(($A*4))\n--x $B # c\n") == ["--x", "12"]


PLANS = sorted(p.stem for p in (Path(__file__).parents[1] / "configs" / "plans").glob("*.yaml"))
PROFILE_NAMES = ("megatron-core", "megatron-2021", "megatron-2022", "deepspeed")


@pytest.mark.parametrize("framework", PROFILE_NAMES)
@pytest.mark.parametrize("name", PLANS)
def test_every_bundled_plan_round_trips_under_every_profile(tmp_path, name, framework):
    """`import megatron` of `plan --emit megatron` estimates what the plan predicted (issue 19,
    item 6): layer split, ZeRO stage, CP exchange and framework profile survive the trip. The
    launch file cannot name the links, so the plan's system section is put back."""
    import yaml
    from helpers import emit_round_trip, says

    from perfmodel.inputs import load

    mapping = yaml.safe_load((Path("configs/plans") / f"{name}.yaml").read_text())
    mapping.setdefault("training", {})["framework"] = framework
    source = tmp_path / "p.yaml"
    source.write_text(yaml.safe_dump(mapping))
    trip = emit_round_trip(source, tmp_path)
    searched = trip.searched
    if searched.exit_code == 1:  # nothing fits, or the profile cannot run the fixed knobs
        if searched.stdout.startswith("{"):
            assert json.loads(searched.stdout)["results"] == []
        else:
            assert searched.output.count("Error:") == 1 and says(searched.output, "use framework")
        return
    if framework == "deepspeed" and load(str(source)).plan.model.is_moe:
        assert trip.emitted.exit_code == 1 and "DeepSpeed-MoE" in trip.emitted.output
        return
    assert trip.emitted.exit_code == 0, trip.emitted.output
    assert trip.back["training"]["framework"] == framework
    want, got = trip.best, trip.estimate
    assert got["config"]["zero_stage"] == want["config"]["zero_stage"]
    assert got["stage_layers"] == want["stage_layers"]
    assert got["step_time_s"] == pytest.approx(want["step_time_s"], rel=1e-9)


BASE = (
    "--num-layers 8 --hidden-size 64 --num-attention-heads 2 --micro-batch-size 1"
    " --global-batch-size 8 --vocab-size 100 --pipeline-model-parallel-size 4"
)


@pytest.mark.parametrize(
    "extra, message",
    [
        ("--pipeline-model-parallel-layout 'Et|tt|tt|ttL|t'", "5 stages for pp(4) x vp(1) = 4"),
        (
            "--pipeline-model-parallel-layout 'Et|tt|tt|tmL'",
            "1 MTP layer(s) ('m') for --mtp-num-layers 0",
        ),
        (
            "--mtp-num-layers 1 --pipeline-model-parallel-layout 'Et|tm|tt|ttL'",
            "put every 'm' in the last entry",
        ),
        ("--pipeline-model-parallel-layout 'Et|tt|tt|ttL'", "places 7 layers; --num-layers is 8"),
        ("--pipeline-model-parallel-layout 'Et|tttt|t|ttL'", "middle stages of 1 to 4 layers"),
        ("--pipeline-model-parallel-layout 'tt|Et|tt|ttL'", "the first stage must hold E"),
        ("--pipeline-model-parallel-layout 'Et|tt|tt|tx'", "characters besides E, t, m, L"),
        (
            (
                "--pipeline-model-parallel-layout 'Et|(tt|)*2,ttL'"
                " --decoder-first-pipeline-num-layers 2"
            ),
            "--decoder-first-pipeline-num-layers together",
        ),
        ("--deepspeed --zero-stage 4", "--zero-stage 4: DeepSpeed's ZeRO stages are 0 to 3"),
        ("\n# perfmodel: framework megatron-1999\n", "unknown framework"),
    ],
)
def test_layouts_and_profiles_refused_by_name(extra, message):
    import re

    with pytest.raises(PerfModelError, match=re.escape(message)):
        read_args(BASE + " " + extra, "h100-sxm", num_gpus=4)


def test_layouts_read_with_their_repeats():
    """'(tt|)*2' and 'x*n' repeat as Megatron-Core's layout strings do; an even layout is the
    default split; Megatron-DeepSpeed's --deepspeed, --zero-stage and Ulysses size are read."""
    uneven = read_args(
        BASE + " --pipeline-model-parallel-layout 'Et*1|(tt|)*2,t*3L'", "h100-sxm", 4
    )
    par = uneven.plan["parallel"]
    assert (par["decoder_first_pipeline_num_layers"], par["decoder_last_pipeline_num_layers"]) == (
        1,
        3,
    )
    even = read_args(BASE + " --pipeline-model-parallel-layout 'Ett|tt|tt|ttL'", "h100-sxm", 4)
    assert "decoder_first_pipeline_num_layers" not in even.plan["parallel"]
    ds = read_args(
        BASE + " --deepspeed --zero-stage 1 --ds-sequence-parallel-size 2", "h100-sxm", 8
    )
    assert ds.plan["training"]["framework"] == "deepspeed"
    assert (ds.plan["parallel"]["zero_stage"], ds.plan["parallel"]["cp"]) == (1, 2)
    assert ds.plan["parallel"]["cp_comm_type"] == "a2a"


def test_mtp_layers_are_read_from_the_flag_and_the_layout():
    """Issue 21: --mtp-num-layers builds the MTP layers; a layout places them ('m') in its last
    entry, beside the loss, as Megatron-Core does by default; the emitted launch writes both."""
    from perfmodel.inputs.megatron_layout import layout_text

    imp = read_args(
        BASE + " --mtp-num-layers 1 --pipeline-model-parallel-layout 'Et|ttt|ttt|tmL'",
        "h100-sxm",
        num_gpus=4,
    )
    assert imp.plan["model"]["mtp_num_layers"] == 1
    par = imp.plan["parallel"]
    assert (par["decoder_first_pipeline_num_layers"], par["decoder_last_pipeline_num_layers"]) == (
        1,
        1,
    )
    assert layout_text([1, 3, 3, 1], 1, mtp=1) == "Et|ttt|ttt|tmL"


MOE = BASE + " --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 2"


@pytest.mark.parametrize(
    "extra, dispatcher, note",
    [
        ("", "alltoall", None),
        ("--moe-token-dispatcher-type allgather", "allgather", None),
        ("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep", "deepep", None),
        ("--moe-token-dispatcher-type flex --moe-enable-deepep", "deepep", None),
        (
            "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep",
            "hybridep",
            "costed as DeepEP's dispatch",
        ),
        # Megatron reads the backend only behind the flex dispatcher
        ("--moe-flex-dispatcher-backend deepep", "alltoall", None),
    ],
)
def test_moe_dispatchers_read_as_megatron_lm_reads_them(extra, dispatcher, note):
    """Issue 21: DeepEP and HybridEP run behind Megatron-Core's flex dispatcher
    (--moe-flex-dispatcher-backend, 0.14+; --moe-enable-deepep before)."""
    imp = read_args(MOE + " " + extra, "h100-sxm", num_gpus=8)
    assert imp.plan["training"].get("moe_token_dispatcher_type", "alltoall") == dispatcher
    if note:
        assert any(note in a for a in imp.assumed)
    if "backend" in extra and "flex" not in extra:
        assert any("only with" in i for i in imp.ignored)


@pytest.mark.parametrize(
    "extra, message",
    [
        ("--moe-token-dispatcher-type flex", "needs its backend"),
        ("--moe-enable-deepep", "needs --moe-token-dispatcher-type flex"),
        ("--moe-token-dispatcher-type deepep", "takes alltoall, allgather or flex"),
        ("--moe-flex-dispatcher-backend nccl --moe-token-dispatcher-type flex", "deepep or"),
        ("--overlap-moe-expert-parallel-comm 1", "is a switch"),
    ],
)
def test_moe_dispatcher_mistakes_are_refused_by_name(extra, message):
    with pytest.raises(PerfModelError, match=message):
        read_args(MOE + " " + extra, "h100-sxm", num_gpus=8)


def test_moe_overlap_and_kernel_switches():
    imp = read_args(
        MOE + " --overlap-moe-expert-parallel-comm --moe-grouped-gemm --moe-permute-fusion",
        "h100-sxm",
        num_gpus=8,
    )
    assert imp.plan["training"]["moe_a2a_overlap"] is True
    assert any("--moe-grouped-gemm, --moe-permute-fusion" in a for a in imp.assumed)
    assert not imp.unrecognized and "moe_router_family" not in imp.plan["model"]
    forced = read_args(MOE + " --moe-router-force-load-balancing", "h100-sxm", num_gpus=8)
    assert forced.plan["model"]["moe_router_family"] == "balanced"


def test_token_drop_and_expert_bias_read_as_the_load_they_set():
    """Issue 30: --moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity fixes every
    expert's load at the capacity (NeMo's MegatronTokenDropCallback: 1.0, padded); the expert bias
    is DeepSeek-V3's auxiliary-loss-free family; padding without a capacity is refused."""
    drop = read_args(
        MOE + " --moe-expert-capacity-factor 1.25 --moe-pad-expert-input-to-capacity",
        "h100-sxm",
        num_gpus=8,
    )
    model = drop.plan["model"]
    assert model["moe_expert_capacity_factor"] == 1.25
    assert model["moe_pad_expert_input_to_capacity"] is True
    bias = read_args(MOE + " --moe-router-enable-expert-bias", "h100-sxm", num_gpus=8)
    assert bias.plan["model"]["moe_router_family"] == "aux_free_bias"
    with pytest.raises(PerfModelError, match="needs --moe-expert-capacity-factor"):
        read_args(MOE + " --moe-pad-expert-input-to-capacity", "h100-sxm", num_gpus=8)


def test_deepseek_v3_emits_what_megatron_lm_launches(tmp_path):
    """The emitted DeepSeek-V3 arguments name the flex dispatcher with DeepEP, the all-to-all
    overlap, node-limited routing and the blockwise FP8 recipe, and read back to the plan's
    prediction; a DualPipe configuration is refused (Megatron-LM has no such schedule)."""
    import yaml
    from helpers import emit_round_trip

    plan = yaml.safe_load(Path("configs/plans/deepseek-v3-gb200.yaml").read_text())
    plan["system"] = {"gpu": "h100-sxm", "num_gpus": 1024}
    plan["training"].update(
        {
            "fp8_recipe": "blockwise",
            "moe_a2a_overlap": True,
            "global_batch_size": 4096,
            "exp_avg_dtype": "bf16",
            "exp_avg_sq_dtype": "bf16",
        }
    )
    # vp 2: Megatron-LM asserts a virtual pipeline for the all-to-all overlap under pp > 1
    plan["parallel"] = {"tp": 1, "pp": 16, "ep": 64, "vp": 2, "micro_batch_size": 1}
    source = tmp_path / "ds.yaml"
    source.write_text(yaml.safe_dump(plan))
    trip = emit_round_trip(source, tmp_path)
    assert trip.emitted.exit_code == 0, trip.emitted.output
    text = trip.emitted.stdout
    for words in (
        "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep",
        "--overlap-moe-expert-parallel-comm",
        "--moe-router-num-groups 8 --moe-router-group-topk 4",
        "--fp8-recipe blockwise",
        "--use-precision-aware-optimizer",
        "--exp-avg-dtype bf16",
        "--exp-avg-sq-dtype bf16",
    ):
        assert words in text
    assert trip.estimate["step_time_s"] == pytest.approx(trip.best["step_time_s"], rel=1e-9)
    plan["training"]["framework"] = "hai-llm"
    plan["parallel"]["schedule"] = "dualpipe"
    plan["parallel"]["vp"] = 1
    plan["training"].pop("moe_a2a_overlap")
    plan["parallel"]["recompute"] = "full"
    source.write_text(yaml.safe_dump(plan))
    out = invoke("plan", source, "--emit", "megatron")
    assert out.exit_code == 1 and "DualPipe, which Megatron-LM has no schedule for" in out.output


def test_low_precision_formats_emit_megatron_lm_recipes():
    from perfmodel.inputs import presets
    from perfmodel.inputs.megatron_emit import to_args

    plan = presets.plan_from_mapping(
        {
            "model": "llama3-8b",
            "system": {"gpu": "b200", "num_gpus": 8},
            "training": {"global_batch_size": 8},
        },
        "t",
    )
    from perfmodel.engine.estimate import resolve_config

    def args(dtype):
        p = plan.with_training(dtype=dtype)
        return " ".join(to_args(p, resolve_config(p).as_dict()))

    assert "--fp8-format e4m3 --fp8-recipe mxfp8" in args("mxfp8")
    with pytest.raises(PerfModelError, match="no FP4 launch arguments"):
        args("nvfp4")


def test_the_precision_aware_optimizer_keeps_adams_moments_in_their_dtypes():
    """Megatron-Core's --use-precision-aware-optimizer with --exp-avg-dtype / --exp-avg-sq-dtype
    (DeepSeek-V3 keeps both in BF16, report Sec. 3.3.3): Adam's states are the fp32 master (4 B)
    and the two moments, 4 + 2 + 2 = 8 B a parameter instead of 12; a dtype without the switch is
    refused as Megatron-LM refuses it; an fp16 master copy is 2 B instead of 4."""
    from perfmodel.specs.precision import optimizer_state_bytes

    assert (
        optimizer_state_bytes("adam") == 12 and optimizer_state_bytes("adam", "bf16", "bf16") == 8
    )
    assert optimizer_state_bytes("adam", "fp8", "bf16") == 7 and optimizer_state_bytes("sgd") == 8
    aware = " --use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16"
    t = read_args(BASE + aware, "h100-sxm", num_gpus=4).plan["training"]
    assert (t["exp_avg_dtype"], t["exp_avg_sq_dtype"]) == ("bf16", "bf16")
    with pytest.raises(PerfModelError, match="needs --use-precision-aware-optimizer"):
        read_args(BASE + " --exp-avg-dtype bf16", "h100-sxm", num_gpus=4)
    # an fp16 master copy: 4 + 2 + 2 - 2 = 6 B; bf16 main gradients leave fp32 accumulation off
    t = read_args(BASE + aware + " --main-params-dtype fp16", "h100-sxm", num_gpus=4).plan
    assert t["training"]["main_params_dtype"] == "fp16"
    assert optimizer_state_bytes("adam", "bf16", "bf16", "fp16") == 6
    with pytest.raises(PerfModelError, match="needs --use-precision-aware-optimizer"):
        read_args(BASE + " --main-params-dtype fp16", "h100-sxm", num_gpus=4)
    grads = read_args(BASE + " --main-grads-dtype bf16", "h100-sxm", num_gpus=4).plan
    assert grads["training"]["grad_accum_fp32"] is False
    with pytest.raises(PerfModelError, match="takes fp32 or fp16"):
        read_args(BASE + aware + " --main-params-dtype bf16", "h100-sxm", num_gpus=4)
    from perfmodel.engine.estimate import estimate, resolve_config
    from perfmodel.inputs import load_plan

    plan = load_plan("llama3-8b-h100.yaml")
    one = estimate(plan, resolve_config(plan)).values["optimizer_bytes"]
    half = plan.with_training(exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16")
    assert estimate(half, resolve_config(half)).values["optimizer_bytes"] == pytest.approx(
        one * 8 / 12
    )


@pytest.mark.parametrize(
    "pattern, text",
    [
        ([0] * 3 + [1] * 58, "([0]*3+[1]*58)"),  # DeepSeek-V3: 3 dense layers, then MoE
        ([1, 0] * 24, "([1,0])*24"),  # every other layer
        ([0, 1, 1, 0], "[0,1,1,0]"),  # the plain list where it is the shortest
    ],
)
def test_moe_layer_freq_is_written_short_and_read_back(pattern, text):
    """--moe-layer-freq as Megatron-LM's moe_freq_type evaluates it, in its shortest form; the
    reader gives the pattern back."""
    from perfmodel.inputs.megatron import _layer_freq
    from perfmodel.inputs.megatron_emit import layer_freq_expression

    assert layer_freq_expression(pattern) == text
    assert _layer_freq(text) == pattern


def test_a_long_pipeline_layout_is_written_with_repeats():
    """Llama 3.1 405B's 126 layers on 64 stages: 'Et|(tt|)*62tL' (Megatron-Core's own repeat
    syntax, as in its docs' 'Et*3|(tt|)*29,m|L'), read back stage by stage."""
    from perfmodel.inputs.megatron_layout import layout_text, read_layout

    layers = [1] + [2] * 62 + [1]
    assert layout_text(layers, 1) == "Et|(tt|)*62tL"
    assert read_layout("Et|(tt|)*62tL", 64, 1) == layers
    assert layout_text([4, 4, 4, 5, 4, 4, 4, 3], 1) == "Et*4|t*4|t*4|t*5|(t*4|)*3tttL"
