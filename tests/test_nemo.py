"""`perfmodel import nemo` (issue 15, item 4): NeMo 1 Megatron configs and Megatron-Bridge config
dumps read into plans, every key accounted for, and what cannot be modelled refused."""

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.errors import PerfModelError
from perfmodel.inputs.nemo import read_recipe

DATA = Path(__file__).parent / "data" / "nemo"
LLAMA = DATA / "megatron_llama_config.yaml"
BRIDGE = DATA / "bridge_llama3_8b.yaml"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_nemo1_llama_example():
    imp = read_recipe(yaml.safe_load(LLAMA.read_text()), "h100-sxm", vocab_size=32000)
    m, p, t, s = (imp.plan[k] for k in ("model", "parallel", "training", "system"))
    assert (m["num_layers"], m["hidden_size"], m["ffn_hidden_size"], m["num_attention_heads"]) == (
        12,
        768,
        3072,
        12,
    )
    assert m["seq_length"] == 4096 and m["mlp"] == "swiglu" and m["normalization"] == "rmsnorm"
    assert (
        not m["add_bias_linear"]
        and not m["tied_embeddings"]
        and not m["dropout"]
        and "num_query_groups" not in m
    )
    assert (p["tp"], p["pp"], p["micro_batch_size"], t["global_batch_size"]) == (1, 1, 4, 8)
    assert (
        p["recompute"] == "none" and p["zero_stage"] == 0
    )  # fused_adam, not distributed_fused_adam
    assert t["dtype"] == "fp32" and (s["num_gpus"], s["gpus_per_node"]) == (1, 1)
    assert t["persist_layer_norm"] is True and t["grad_accumulation_fusion"] is False
    assert {"exp_manager.*", "model.tokenizer", "model.masked_softmax_fusion"} <= set(imp.ignored)
    assert imp.unrecognized == []


def test_bridge_dump_predicts_as_the_llama3_8b_preset(tmp_path):
    out = tmp_path / "imported.yaml"
    r = invoke("import", "nemo", BRIDGE, "--gpu", "h100-sxm", "--gpus", "8", "-o", out)
    assert r.exit_code == 0 and f"wrote {out}" in r.stderr, r.output
    assert (
        "ignored (no effect on the cost): train.train_iters, model.rotary_base, tokenizer.*,"
        " checkpoint.*"
        in " ".join(r.stderr.split())  # wrapped at 80 columns
    )
    preset = tmp_path / "preset.yaml"
    preset.write_text(
        yaml.safe_dump(
            {
                "model": "llama3-8b",
                "system": {
                    "gpu": "h100-sxm",
                    "num_gpus": 8,
                    "intra_node_link": "nvlink4",
                    "inter_node_link": "ib-ndr",
                },
                "training": {
                    "global_batch_size": 128,
                    "dtype": "bf16",
                    "overlap_grad_reduce": True,
                    "overlap_param_gather": True,
                },
                "parallel": {
                    "tp": 1,
                    "pp": 1,
                    "cp": 2,
                    # the dump has no cp_comm_type: Megatron-Core's default, p2p (issue 40)
                    "cp_comm_type": "p2p",
                    "vp": 1,
                    "micro_batch_size": 1,
                    "sequence_parallel": False,
                    "recompute": "none",
                    "zero_stage": 1,
                    "schedule": "1f1b",
                },
            }
        )
    )
    a, b = (json.loads(invoke("estimate", f, "--json").output) for f in (out, preset))
    assert a["config"] == b["config"] and a["step_time_s"] == pytest.approx(
        b["step_time_s"], rel=1e-12
    )
    assert a["memory"]["total_bytes"] == pytest.approx(b["memory"]["total_bytes"], rel=1e-12)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"activation": "reglu"}, "model.activation: 'reglu'"),
        ({"normalization": "batchnorm"}, "model.normalization"),
        (
            {
                "activations_checkpoint_granularity": "full",
                "activations_checkpoint_method": "block",
                "activations_checkpoint_num_layers": 2,
            },
            "only recomputing every layer",
        ),
    ],
)
def test_what_cannot_be_modelled_is_refused(change, message):
    data = yaml.safe_load(LLAMA.read_text())
    data["model"].update(change)
    with pytest.raises(PerfModelError) as e:
        read_recipe(data, "h100-sxm", vocab_size=32000)
    assert message in str(e.value)


def test_token_dropping_is_read_as_the_load_it_sets():
    """Issue 30: a NeMo config's moe_expert_capacity_factor (NeMo's MegatronTokenDropCallback sets
    1.0 with padding) becomes the model's capacity, which caps the expert load."""
    data = yaml.safe_load(LLAMA.read_text())
    data["model"].update({"moe_expert_capacity_factor": 1.0})
    imp = read_recipe(data, "h100-sxm", vocab_size=32000)
    assert imp.plan["model"]["moe_expert_capacity_factor"] == 1.0


def test_cli_errors():
    r = invoke("import", "nemo", LLAMA, "--gpu", "h100-sxm")
    assert r.exit_code == 1 and "pass --vocab-size N" in r.output
    r = invoke("import", "nemo", BRIDGE, "--gpu", "h100-sxm")
    assert r.exit_code == 1 and "trainer.devices x trainer.num_nodes" in r.output
    r = invoke("import", "nemo", DATA / "nope.yaml", "--gpu", "h100-sxm")
    assert r.exit_code == 1 and "no such file" in r.output
    with pytest.raises(PerfModelError, match="'model' section"):
        read_recipe({"trainer": {}}, "h100-sxm")


def test_check_estimate_and_compare_take_launch_files_directly(tmp_path):
    gpt3 = Path(__file__).parent / "data" / "megatron" / "train_gpt3_175b_distributed.sh"
    r = invoke("check", gpt3)
    assert (
        r.exit_code == 1
        and "give the GPU with --gpu NAME" in r.output
        and "perfmodel import megatron" in r.output
    )
    r = invoke("check", gpt3, "--gpu", "a100-80gb", "--gpus", "128")
    notes = " ".join(r.stderr.split())  # the notes wrap at 80 columns
    assert r.exit_code == 0 and "PM301" in r.stdout and "assumed: vocabulary 50,257" in notes
    imported = tmp_path / "b.yaml"
    assert (
        invoke(
            "import", "nemo", BRIDGE, "--gpu", "h100-sxm", "--gpus", "8", "-o", imported
        ).exit_code
        == 0
    )
    direct = json.loads(
        invoke("estimate", BRIDGE, "--gpu", "h100-sxm", "--gpus", "8", "--json").stdout
    )
    via_file = json.loads(invoke("estimate", imported, "--json").stdout)
    assert (
        direct["step_time_s"] == via_file["step_time_s"] and direct["config"] == via_file["config"]
    )
    r = invoke("compare", imported, BRIDGE, "--gpu", "h100-sxm", "--gpus", "8")
    assert r.exit_code == 0 and "take the same time" in r.stdout


@pytest.mark.parametrize(
    "keys, dispatcher, overlap",
    [
        (
            {"moe_token_dispatcher_type": "flex", "moe_flex_dispatcher_backend": "deepep"},
            "deepep",
            False,
        ),
        # Megatron-Bridge dumps carry TransformerConfig's default backend beside any dispatcher
        (
            {"moe_token_dispatcher_type": "alltoall", "moe_flex_dispatcher_backend": "deepep"},
            "alltoall",
            False,
        ),
        (
            {"moe_token_dispatcher_type": "alltoall", "overlap_moe_expert_parallel_comm": True},
            "alltoall",
            True,
        ),
        ({"moe_token_dispatcher_type": "flex", "moe_enable_deepep": True}, "deepep", False),
    ],
)
def test_moe_dispatcher_keys_read_as_megatron_core_reads_them(keys, dispatcher, overlap):
    """Issue 21: a recipe names DeepEP through the flex dispatcher, as Megatron-LM's launch
    arguments do (the same reader, perfmodel/inputs/megatron_moe.py)."""
    data = yaml.safe_load(LLAMA.read_text())
    data["model"].update({"num_moe_experts": 8, "moe_router_topk": 2, **keys})
    training = read_recipe(data, "h100-sxm", vocab_size=32000).plan["training"]
    assert training["moe_token_dispatcher_type"] == dispatcher
    assert training.get("moe_a2a_overlap", False) is overlap


@pytest.mark.parametrize(
    "optim,expect",
    [
        # apex DistributedFusedAdam as NeMo 1.x builds it over bf16 O2 weights (NeMo v2.0.0rc0
        # megatron_base_model.setup_optimization): fp32 moments and the fp32 master's 16 low bits,
        # the gradient buffer in grad_sync_dtype (optim.dtype unless set)
        ({}, ("fp32", "remainders", True)),
        ({"grad_sync_dtype": "bf16"}, ("fp32", "remainders", False)),
        # the Nemotron-4 340B recipe: bf16 moments, no master copy, bf16 gradients
        ({"dtype": "bf16", "grad_sync_dtype": "bf16"}, ("bf16", "none", False)),
    ],
)
def test_distributed_fused_adam_keeps_apexs_states(optim, expect):
    data = yaml.safe_load(LLAMA.read_text())
    data["trainer"]["precision"] = "bf16"
    data["model"]["megatron_amp_O2"] = True
    data["model"]["optim"] = {"name": "distributed_fused_adam", **optim}
    t = read_recipe(data, "h100-sxm", vocab_size=32000).plan["training"]
    got = (t.get("exp_avg_dtype", "fp32"), t["main_params_dtype"], t["grad_accum_fp32"])
    assert got == expect
    data["model"]["optim"]["dtype"] = "fp16"
    with pytest.raises(
        PerfModelError, match="distributed_fused_adam is modelled with fp32 or bf16"
    ):
        read_recipe(data, "h100-sxm", vocab_size=32000)
