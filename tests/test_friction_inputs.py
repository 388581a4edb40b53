"""Issue 33's smaller friction points: what a new user typed that was misread or refused."""

import json

import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.engine.answer import estimate_or_search
from perfmodel.engine.run import training_run
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets
from perfmodel.inputs.load import read_launch
from perfmodel.inputs.megatron import read_args

ARGS = (
    "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 24 --hidden-size 2048"
    " --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048"
    " --micro-batch-size 1 --global-batch-size 64 --tensor-model-parallel-size 2 --bf16"
    " --vocab-size 50304 "
)


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_recompute_activations_is_selective_recompute_as_megatron_reads_it():
    # megatron/training/arguments.py: recompute_activations sets recompute_granularity selective
    imp = read_args(ARGS + "--recompute-activations", "h100-sxm", 8)
    assert imp.plan["parallel"]["recompute"] == "selective"
    assert "--recompute-activations" not in imp.ignored + imp.unrecognized
    over = read_args(ARGS + "--recompute-granularity full --recompute-activations", "h100-sxm", 8)
    assert over.plan["parallel"]["recompute"] == "selective"
    assert any("--recompute-activations" in a for a in over.assumed)
    assert read_args(ARGS, "h100-sxm", 8).plan["parallel"]["recompute"] == "none"


def test_roofline_takes_the_models_sequence_length_and_says_so():
    d = json.loads(invoke("roofline", "--mbs", "2", "--model", "llama3-8b", "--json").output)
    assert d["tokens"] == 2 * presets.model("llama3-8b").seq_length
    assert "seq_length" in d["seq_len_assumed"]
    given = json.loads(
        invoke(
            "roofline", "--mbs", "2", "--model", "llama3-8b", "--seq-len", "512", "--json"
        ).output
    )
    assert given["tokens"] == 1024 and given["seq_len_assumed"] is None
    bare = json.loads(invoke("roofline", "--mbs", "64", "--json").output)
    assert bare["tokens"] == 64 and "counts tokens" in bare["seq_len_assumed"]
    assert "assumed: seq-len 1" in invoke("roofline", "--mbs", "64").output


def _long_context_plan(**parallel):
    return presets.plan_from_mapping(
        {
            "model": "llama3-70b",
            "system": {"gpu": "h100-sxm", "num_gpus": 16},
            "training": {"global_batch_size": 16, "seq_length": 32768},
            "parallel": {
                "tp": 2,
                "pp": 1,
                "cp": 8,
                "dp": 1,
                "vp": 1,
                "micro_batch_size": 1,
                "sequence_parallel": True,
                "recompute": "none",
                "zero_stage": 0,
                "schedule": "1f1b",
                **parallel,
            },
        },
        "plan.yaml",
    )


def test_estimate_prices_a_configuration_that_does_not_fit_with_a_memory_neutral_knob_free():
    est, chosen = estimate_or_search(
        _long_context_plan(), presets.error_bands()
    )  # cp_comm_type free
    assert not est.values["fits"] and set(chosen) == {"cp_comm_type"}
    fixed = {
        t: estimate_or_search(_long_context_plan(cp_comm_type=t), presets.error_bands())[0].values
        for t in ("p2p", "a2a")
    }
    assert est.values["step_time_s"] == min(v["step_time_s"] for v in fixed.values())
    # the memory does not depend on the exchange: the same bytes either way
    assert fixed["p2p"]["total_bytes"] == fixed["a2a"]["total_bytes"] == est.values["total_bytes"]
    with pytest.raises(PerfModelError, match="free"):  # a knob that changes memory, still an error
        estimate_or_search(_long_context_plan(recompute=None), presets.error_bands())


def _run(gpu, **system):
    plan = presets.plan_from_mapping(
        {
            "model": "llama3-8b",
            "system": {"gpu": gpu, "num_gpus": 64, **system},
            "training": {"global_batch_size": 64, "tokens": "1B"},
            "parallel": {"tp": 1, "pp": 1},
        },
        "plan.yaml",
    )
    return training_run(plan, 1.0)


def test_energy_has_one_scope_on_every_gpu():
    for gpu, system in (("h100-sxm", {}), ("gb200", {"gpus_per_node": 4, "nvlink_domain": 72})):
        run = _run(gpu, **system)
        # facility energy: GPUs at TDP, the rest of the node or rack, PUE (> the GPUs' alone)
        assert (
            run.energy_j > run.gpu_energy_j * presets.gpu(gpu).system_power_w_per_gpu / (
                presets.gpu(gpu).tdp_w
            ) * 0.999
        )
        assert any("the rest of the node or rack" in a for a in run.assumptions)
    # a GPU whose system has no power figure gives no facility energy, not a narrower one
    gpu = presets.gpu("h100-sxm-96gb")  # a 500 W board with no system sheet
    assert gpu.system_power_w_per_gpu is None and gpu.tdp_w
    bare = _run("h100-sxm-96gb")
    assert bare.energy_j is None and bare.gpu_energy_j > 0
    assert any("no facility energy" in a for a in bare.assumptions)


def test_a_python_nemo_recipe_says_how_to_dump_it_to_yaml(tmp_path):
    py = tmp_path / "recipe.py"
    py.write_text("from megatron.bridge.recipes.llama import llama3_8b_pretrain_config\n")
    with pytest.raises(PerfModelError, match=r"to_yaml\('recipe.yaml'\)"):
        read_launch(str(py), "nemo", "h100-sxm")
    assert "to_yaml" in invoke("import", "nemo", "--help").output
