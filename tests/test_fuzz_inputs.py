"""Fuzzing the commands added since issue 14 (issue 19, item 8): Megatron-LM launch files and NeMo
recipes for `import`, the `plan --emit megatron` round trip, `sweep`, `compare`, `report`, and
MoE and MLA config.json files. The contract is test_fuzz.py's: a clean one-line error or a
finite result, never an internal error. Bounded for CI by PERFMODEL_FUZZ_EXAMPLES (default 40;
the round trip, two searches an example, runs a quarter of that)."""

import json

import pytest
import yaml
from click.testing import CliRunner
from helpers import emit_round_trip
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz import BASE, FUZZ, NASTY, assert_contract, mutate, settings, to_yaml
from test_models import DEEPSEEK_V3, QWEN3_MOE

from perfmodel.cli import main
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets

ROUND_TRIP = settings(FUZZ, max_examples=max(FUZZ.max_examples // 4, 5))

MEGATRON = {
    "--num-layers": "8",
    "--hidden-size": "1024",
    "--num-attention-heads": "16",
    "--seq-length": "2048",
    "--micro-batch-size": "1",
    "--global-batch-size": "64",
    "--tensor-model-parallel-size": "2",
    "--pipeline-model-parallel-size": "2",
    "--vocab-size": "32000",
}
MEGATRON_FLAGS = sorted(MEGATRON) + [
    "--bf16",
    "--fp16",
    "--swiglu",
    "--sequence-parallel",
    "--num-query-groups",
    "--group-query-attention",
    "--recompute-granularity",
    "--recompute-method",
    "--num-virtual-stages-per-pipeline-rank",
    "--context-parallel-size",
    "--expert-model-parallel-size",
    "--num-experts",
    "--moe-router-topk",
    "--decoder-first-pipeline-num-layers",
    "--pipeline-model-parallel-layout",
    "--use-distributed-optimizer",
    "--deepspeed",
    "--zero-stage",
    "--use-megatron-fsdp",
    "--data-parallel-sharding-strategy",
    "--attention-backend",
    "--multi-latent-attention",
    "--kv-lora-rank",
    "--bogus-flag",
]
SHELL_NOISE = st.sampled_from(
    ["", "'", '"', "$OPTS", "${X:-4}", "$((2**3))", "\\", "#", ";", "|", "`", "$(echo 8)", "*"]
)


def _word(value) -> str:
    return "" if value is None else str(value)


@FUZZ
@given(data=st.data(), n=st.integers(1, 4))
def test_generated_megatron_launch_files(tmp_path_factory, data, n):
    args = dict(MEGATRON)
    for _ in range(n):
        flag = data.draw(st.sampled_from(MEGATRON_FLAGS))
        args[flag] = data.draw(st.one_of(NASTY.map(_word), SHELL_NOISE))
    words = " ".join(f"{k} {v}".strip() for k, v in args.items())
    f = tmp_path_factory.mktemp("meg") / "run.sh"
    f.write_text(f"OPTS='--bf16'\ntorchrun --nproc_per_node 8 pretrain_gpt.py {words}\n")
    a = ["import", "megatron", str(f), "--gpu", "h100-sxm", "--gpus", "16"]
    r = CliRunner().invoke(main, a)
    assert_contract(r, a)
    if r.exit_code == 0:
        out = f.with_name("plan.yaml")
        out.write_text(r.stdout)
        e = CliRunner().invoke(main, ["estimate", str(out), "--json"])
        assert_contract(e, ["estimate", "of", words])


NEMO = {
    "trainer": {"devices": 8, "num_nodes": 2, "precision": "bf16-mixed"},
    "model": {
        "num_layers": 8,
        "hidden_size": 1024,
        "ffn_hidden_size": 4096,
        "num_attention_heads": 16,
        "encoder_seq_length": 2048,
        "global_batch_size": 64,
        "micro_batch_size": 1,
        "tensor_model_parallel_size": 2,
        "pipeline_model_parallel_size": 1,
        "bias": False,
        "activation": "swiglu",
        "normalization": "rmsnorm",
        "sequence_parallel": True,
        "tokenizer": {"library": "megatron"},
    },
}
NEMO_KEYS = {
    "trainer": ["devices", "num_nodes", "precision", "strategy", "bogus_knob"],
    "model": (
        sorted(NEMO["model"])
        + [
            "fp8",
            "hidden_dropout",
            "activations_checkpoint_granularity",
            "activations_checkpoint_method",
            "virtual_pipeline_model_parallel_size",
            "context_parallel_size",
            "num_moe_experts",
            "ub_tp_comm_overlap",
            "share_embeddings_and_output_weights",
            "cpu_offloading",
            "num_query_groups",
        ]
    ),
}
YAML11 = st.sampled_from(["off", "on", "yes", "No", "y", "???", "${.hidden_size}", "1_000", "0x10"])


@FUZZ
@given(data=st.data(), n=st.integers(1, 4))
def test_generated_nemo_recipes(tmp_path_factory, data, n):
    recipe = json.loads(json.dumps(NEMO))
    for _ in range(n):
        section = data.draw(st.sampled_from(sorted(NEMO_KEYS)))
        key = data.draw(st.sampled_from(NEMO_KEYS[section]))
        recipe[section][key] = data.draw(st.one_of(NASTY, YAML11))
    text = yaml.safe_dump(recipe).replace("'", "")  # unquoted, as people write YAML 1.1
    f = tmp_path_factory.mktemp("nemo") / "recipe.yaml"
    f.write_text(text)
    a = ["import", "nemo", str(f), "--gpu", "h100-sxm", "--vocab-size", "32000"]
    assert_contract(CliRunner().invoke(main, a), a)


SMALL = st.fixed_dictionaries(
    {
        "tp": st.sampled_from([None, 1, 2, 4]),
        "pp": st.sampled_from([None, 1, 2, 4]),
        "zero_stage": st.sampled_from([None, 0, 1, 3]),
        "recompute": st.sampled_from([None, "none", "selective", "full"]),
        "framework": st.sampled_from(["megatron-core", "megatron-2021", "deepspeed"]),
        "num_layers": st.sampled_from([6, 8, 9]),
        "global_batch_size": st.sampled_from([32, 64]),
    }
)


@ROUND_TRIP
@given(knobs=SMALL)
def test_generated_plans_round_trip_through_megatron_arguments(tmp_path_factory, knobs):
    """Whatever `plan` picks, `import megatron` of its `--emit megatron` estimates the same."""
    plan = json.loads(json.dumps(BASE))
    plan["parallel"] = {k: v for k in ("tp", "pp", "zero_stage", "recompute") if (v := knobs[k])}
    plan["model"]["num_layers"] = knobs["num_layers"]
    plan["training"] |= {
        "framework": knobs["framework"],
        "global_batch_size": knobs["global_batch_size"],
    }
    d = tmp_path_factory.mktemp("trip")
    (d / "p.yaml").write_text(yaml.safe_dump(plan))
    trip = emit_round_trip(d / "p.yaml", d)
    assert_contract(trip.searched, knobs)
    if trip.searched.exit_code:
        return
    assert trip.emitted.exit_code == 0, (knobs, trip.emitted.output)
    want = trip.best["step_time_s"]
    assert trip.estimate["step_time_s"] == pytest.approx(want, rel=1e-9), knobs


VARY = st.sampled_from(
    [
        "gpus",
        "gbs",
        "seq",
        "gpu",
        "framework",
        "dtype",
        "inter_node_bandwidth",
        "parallel.tp",
        "model.hidden_size",
        "training.bogus",
        "nosuch",
        "",
    ]
)


@FUZZ
@given(field=VARY, values=st.lists(NASTY.map(_word), min_size=1, max_size=3))
def test_generated_sweeps(field, values):
    a = ["sweep", "llama3-8b-h100", "--vary", f"{field}={','.join(values)}", "--json"]
    assert_contract(CliRunner().invoke(main, a), a)


@FUZZ
@given(data=st.data(), n=st.integers(1, 2), command=st.sampled_from(["compare", "report"]))
def test_generated_compare_and_report(tmp_path_factory, data, n, command):
    d = tmp_path_factory.mktemp(command)
    (d / "a.yaml").write_text(to_yaml(mutate(data, n)))
    a = (
        ["compare", str(d / "a.yaml"), "llama3-8b-h100", "--json"]
        if command == "compare"
        else ["report", str(d / "a.yaml"), "-o", str(d / "r.html")]
    )
    assert_contract(CliRunner().invoke(main, a), a)


MOE_MLA_KEYS = sorted(set(QWEN3_MOE) | set(DEEPSEEK_V3)) + ["num_local_experts", "head_dim"]


@FUZZ
@given(base=st.sampled_from(["qwen3_moe", "deepseek_v3"]), data=st.data(), n=st.integers(1, 3))
def test_generated_moe_and_mla_configs(base, data, n):
    cfg = dict(QWEN3_MOE if base == "qwen3_moe" else DEEPSEEK_V3)
    for _ in range(n):
        cfg[data.draw(st.sampled_from(MOE_MLA_KEYS))] = data.draw(NASTY)
    try:
        m = presets.model_from_hf_config(cfg)
    except PerfModelError as e:
        assert len(str(e)) < 2000 and "\n" not in str(e).strip()
        return
    assert m.num_layers >= 1 and m.hidden_size >= 1
    assert m.is_moe or not any(cfg.get(k) for k in ("num_experts", "n_routed_experts"))
