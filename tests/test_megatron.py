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
    assert r.exit_code == 0 and unknown in r.stderr


def test_emitted_arguments_read_back_to_the_same_prediction(tmp_path):
    r = invoke("plan", "gpt3-175b.yaml", "--gpus", "512", "--emit", "megatron")
    assert r.exit_code == 0 and r.output.startswith("# GPT-3 175B on 512 x A100")
    script = tmp_path / "run.sh"
    # the comment lines above the arguments, then the arguments after the launcher, as a user
    # pastes them (bash ends a command at a comment line, so they cannot follow a continuation)
    comments = [ln for ln in r.output.splitlines() if ln.startswith("#")]
    arguments = "\n".join(ln for ln in r.output.splitlines() if not ln.startswith("#"))
    script.write_text(
        "\n".join(comments)
        + "\ntorchrun --nproc_per_node 8 --nnodes 64 pretrain_gpt.py \\\n"
        + arguments
        + "\n"
    )
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
