"""Megatron-Core's fine-grained activation offloading (issue 37 item 3): the saved tensors of chosen
modules (--offload-modules) in every layer go to host memory and back, at any pp and beside
selective recompute; priced from the layer's own op descriptions, read from and written to
Megatron-LM's arguments and Megatron-Bridge's recipes, and searched as memory switch sets."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from helpers import REPRO, deepseek_v3_pp8_vp4

from perfmodel.cost import offload_modules as offm
from perfmodel.engine import memory_switches as ms
from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.engine.per_layer import layer_block
from perfmodel.errors import PerfModelError
from perfmodel.inputs import load_plan
from perfmodel.inputs.megatron import read_args
from perfmodel.inputs.megatron_emit import to_args
from perfmodel.inputs.presets import plan_from_mapping
from perfmodel.specs import Plan

ATTENTION = ["core_attn", "attn_proj"]


def _moved(block, modules, recompute, recompute_modules, act_bytes):
    """What one set of modules moves under one recompute code (cost/offload_modules)."""
    return offm.offloaded_table(block, [modules], recompute_modules, act_bytes)[0][recompute]


def _llama(**training) -> Plan:
    """Llama 3 8B on one H100 node at tp 1 pp 2 dp 4, micro-batches of one 8,192-token sequence."""
    plan = load_plan("llama3-8b-h100.yaml").with_parallel(
        tp=1, pp=2, dp=4, micro_batch_size=1, recompute="none", vp=1, cp=1, zero_stage=1
    )
    return plan.with_training(**training) if training else plan


def test_a_llama_layer_offloads_the_attention_cores_inputs_and_output():
    """core_attn's group holds Q, K, V and the softmax's log-sum-exp (FlashAttention's saved
    tensors), attn_proj's the core's output: 2 B x s x (q + 2 kv + q) + 4 B x heads x s."""
    plan = _llama()
    block = layer_block(plan, resolve_config(plan), "dense")
    s, q, kv, heads = 8192, 4096, 1024, 32
    expected = 2 * s * (q + 2 * kv + q) + 4 * heads * s
    assert expected == 168_820_736
    for recompute in (0, 1):  # selective recompute of core_attn keeps the same inputs
        got = _moved(block, tuple(ATTENTION), recompute, ("core_attn",), 2)
        assert float(got) == pytest.approx(expected)
    # full recompute keeps the layer's input only: the groups hold nothing
    assert float(_moved(block, tuple(ATTENTION), 2, ("core_attn",), 2)) == 0
    # a module's group holds its ops' kept tensors: every module is found in the layer
    assert offm.present(block) == {"attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm"}


def test_every_module_maps_to_ops_that_keep_something_on_a_mla_moe_layer():
    """DeepSeek-V3's MoE layer: each of Megatron-Core's modules is found among the ops (a renamed
    op in cost/ would leave one empty and fail here), and offloading all of them moves most, but
    not all, of what the layer keeps (the router's input, the experts' fc2 input and the shared
    experts have no group)."""
    plan = load_plan("deepseek-v3-h100.yaml")
    block = layer_block(plan, resolve_config(plan, tp=2, pp=16, ep=64), "moe")
    every = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm")
    for module in (*every, "expert_fc1", "moe_act", "fused_group_mlp"):
        assert float(_moved(block, (module,), 0, (), 2)) > 0, module
    moved = float(_moved(block, (*every, "expert_fc1", "moe_act"), 0, (), 2))
    kept = float(block.activation_bytes(0))
    assert 0.5 * kept < moved < kept


def test_selective_recompute_of_the_layernorm_leaves_its_output_unmoved():
    """With the layernorms recomputed (Megatron-Core's CheckpointWithoutOutput), the Q, K, V
    projection's input is rebuilt, not kept: qkv_linear's group has nothing of it to move."""
    plan = _llama()
    block = layer_block(plan, resolve_config(plan), "dense")
    plain = float(_moved(block, ("qkv_linear",), 1, ("core_attn",), 2))
    rebuilt = float(_moved(block, ("qkv_linear",), 1, ("layernorm",), 2))
    assert plain == pytest.approx(2 * 8192 * 4096) and rebuilt == 0


def test_the_memory_and_the_host_hold_what_every_micro_batch_in_flight_offloads():
    """pp 2: the first stage holds 2 micro-batches of 16 layers; all go to the host but the one
    group Megatron-Core keeps back (its offload margin), one layer's worth here."""
    plain = estimate(_llama(), resolve_config(_llama()))
    plan = _llama(offload_modules=ATTENTION)
    off = estimate(plan, resolve_config(plan))
    per_layer = 168_820_736
    assert off.values["activations_host_bytes"] == pytest.approx(per_layer * 16 * 2)
    drop = plain.values["activations_bytes"] - off.values["activations_bytes"]
    assert drop == pytest.approx(per_layer * (16 * 2 - 1))
    # the copy (2.7 GB a micro-batch each way at 27 GB/s) hides behind each pass's compute
    assert off.values["step_time_s"] == pytest.approx(plain.values["step_time_s"])


def test_a_slow_host_link_shows_in_the_step():
    """The copy the pass does not hide waits in it: over a 1 GB/s link 2.7 GB take 3.2 s a
    micro-batch, far beyond a stage's pass."""
    plan = _llama(offload_modules=ATTENTION)
    link = plan.system.host_link.model_copy(update={"bandwidth_bytes_per_s": 1e9})
    slow = plan.with_system(host_link=link)
    fast = estimate(plan, resolve_config(plan)).values["step_time_s"]
    assert estimate(slow, resolve_config(slow)).values["step_time_s"] > fast + 16 * 2 * 2.5


@pytest.mark.parametrize(
    "change, words",
    [
        ({"offload_modules": ["attn_proj"]}, "add core_attn or drop attn_proj"),
        ({"offload_modules": ["expert_fc1"]}, "needs experts"),
        ({"offload_modules": ["core_attn"], "framework": "fsdp"}, "use framework: megatron-core"),
        ({"offload_modules": ["core_attn"], "cpu_offloading_num_layers": 4}, "drop one"),
    ],
)
def test_what_megatron_core_asserts_is_refused_by_name(change, words):
    plan = load_plan("llama3-8b-h100.yaml").with_parallel(pp=1, recompute="none")
    with pytest.raises(ValueError, match=r"training\.offload_modules") as e:
        Plan.model_validate({**plan.model_dump(), "training": {**_given(plan), **change}})
    assert words in str(e.value)


def _given(plan: Plan) -> dict:
    return plan.training.given()


def test_full_recompute_and_a_missing_host_link_are_refused():
    plan = load_plan("llama3-8b-h100.yaml")
    data = {**plan.model_dump(), "training": {**_given(plan), "offload_modules": ATTENTION}}
    with pytest.raises(ValueError, match="nothing to offload"):
        Plan.model_validate({**data, "parallel": {**data["parallel"], "recompute": "full"}})
    with pytest.raises(ValueError, match=r"needs system\.host_link"):
        Plan.model_validate({**data, "system": {**data["system"], "host_link": None}})


ARGS = (
    "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --ffn-hidden-size 14336"
    " --seq-length 8192 --group-query-attention --num-query-groups 8 --swiglu"
    " --position-embedding-type rope --normalization RMSNorm --disable-bias-linear"
    " --untie-embeddings-and-output-weights --tensor-model-parallel-size 1"
    " --pipeline-model-parallel-size 2 --micro-batch-size 1 --global-batch-size 64 --bf16"
    " --use-distributed-optimizer"
)


def _read(extra: str):
    return read_args(ARGS + " " + extra, "h100-sxm", 8, 128256)


def test_megatron_arguments_are_read_as_megatron_core_reads_them():
    got = _read("--fine-grained-activation-offloading --offload-modules core_attn attn_proj")
    assert got.plan["training"]["offload_modules"] == ATTENTION
    # the modules without the switch offload nothing (TransformerConfig reads them with it)
    quiet = _read("--offload-modules core_attn")
    assert "offload_modules" not in quiet.plan["training"]
    assert any("offloads nothing" in a for a in quiet.assumed)
    with pytest.raises(PerfModelError, match="asserts at least one module"):
        _read("--fine-grained-activation-offloading")
    with pytest.raises(PerfModelError, match="gdp_qkv is not among them"):
        _read("--fine-grained-activation-offloading --offload-modules gdp_qkv")


def test_the_emitted_arguments_read_back_to_the_same_step_and_memory():
    plan = _llama(offload_modules=ATTENTION)
    cfg = resolve_config(plan)
    est = estimate(plan, cfg)
    args = to_args(plan, cfg.as_dict())
    assert "--fine-grained-activation-offloading" in args
    assert "--offload-modules core_attn attn_proj" in args
    back = read_args(" ".join(args), "h100-sxm", 8, 128256)
    back.plan["system"]["intra_node_link"] = "nvlink4"
    back.plan["system"]["inter_node_link"] = "ib-ndr"
    again = plan_from_mapping(back.plan, "emitted")
    est2 = estimate(again, resolve_config(again))
    assert est2.values["step_time_s"] == pytest.approx(est.values["step_time_s"])
    assert est2.values["total_bytes"] == pytest.approx(est.values["total_bytes"])


def test_the_sets_are_gated_as_the_plan_validates_them():
    dense = load_plan("llama3-8b-h100.yaml")
    assert {"offload-attention", "offload-modules"} <= set(ms.usable_sets(dense))
    assert not {"offload-attention-experts", "offload-modules-experts"} & set(ms.usable_sets(dense))
    moe = load_plan("deepseek-v3-h100.yaml")
    sets = set(ms.usable_sets(moe))
    assert {"offload-attention", "offload-attention-experts", "offload-modules-experts"} <= sets
    assert "offload-modules" not in sets
    for blocked in (
        dense.with_parallel(recompute="full"),
        dense.with_training(framework="fsdp"),
        dense.with_training(framework="primus"),
        dense.with_system(host_link=None),
        dense.with_training(cpu_offloading_num_layers=4),
        dense.with_training(offload_modules=["core_attn"]),  # stated: taken as given
    ):
        assert not set(ms.MODULE_SWITCHES) & set(ms.usable_sets(blocked))
    rows = ms.runs_with(
        "offload-attention", np.array([1, 1, 1]), np.array([0, 1, 2]), np.array([4, 8, 1])
    )
    assert list(rows) == [True, True, False]


def test_a_tight_layout_stays_first_where_its_offloaded_twin_is_slower_beyond_the_band():
    """The bundled 3D plan (tp 8 pp 8 without SP, ZeRO 0, everything fixed) is 0.8 GB over the
    usable line, tight. Offloading every module fits it with margin, but its 2.1 GB a micro-batch
    over A100's shared PCIe Gen4 does not hide: 18.8 s against 11.1 s. The tight layout stays
    first, its offloaded twin listed and named as the fastest that fits; estimate prices the plan
    as stated and names the switch plan would turn on."""
    from click.testing import CliRunner

    from perfmodel.cli import main

    out = CliRunner().invoke(main, ["plan", "gpt3-175b-3d.yaml", "--json"])
    j = json.loads(out.output)
    first, safe = j["results"][0], j["fastest_that_fits"]
    assert first["config"]["memory_switch"] == "" and first["memory"]["verdict"] == "tight"
    assert safe["config"]["memory_switch"] == "offload-modules"
    assert safe["memory"]["verdict"] == "fits"
    assert safe["step_time_s"] > 1.5 * first["step_time_s"]
    est = CliRunner().invoke(main, ["estimate", "gpt3-175b-3d.yaml"]).output
    assert "`perfmodel plan` turns on a memory switch for this layout" not in est
    assert "tight (808.6 MB over" in est


def test_where_cp_is_free_an_offloading_answer_meets_the_narrower_cp_chunks():
    """DeepSeek-V3 on 1,024 H100 at tp 1 pp 8 ep 64 vp 4, micro-batches of one 4,096-token
    sequence: without CP nothing fits but by offloading every module and the experts' inputs
    (35.8 s, the copy exposed in both passes); CP 4 below the published chunk fits at 14.6 s, and
    the search takes it."""
    from perfmodel.engine.search import search

    plan = plan_from_mapping(deepseek_v3_pp8_vp4(), "t")
    best = search(plan, top=1).results[0]
    assert best.config.cp > 1 and best.config.memory_switch == ""
    pinned = plan.with_parallel(cp=1)
    offloaded = search(pinned, top=1).results[0]
    assert ms.is_module_offload(offloaded.config.memory_switch)
    assert offloaded.values["step_time_s"] > 2 * best.values["step_time_s"]


def test_the_usable_fine_grained_sets_are_nested_as_the_search_assumes():
    """engine/switch_rows._module_offload prices the last set first and drops the rows it does not
    fit: that holds only if each usable set offloads what the one before does, and more."""
    for name in ("llama3-8b-h100.yaml", "deepseek-v3-h100.yaml"):
        plan = load_plan(name)
        sets = [s for s in ms.usable_sets(plan) if ms.is_module_offload(s)]
        chosen = [set(ms.SWITCHES[s].fields["offload_modules"]) for s in sets]
        assert len(chosen) >= 2
        assert all(a < b for a, b in itertools.pairwise(chosen)), name


def test_a_bridge_recipe_reads_the_fine_grained_offloading(tmp_path):
    """Megatron-Bridge's ConfigContainer keys model.fine_grained_activation_offloading and
    model.offload_modules are read as Megatron-LM reads the arguments they are; the modules without
    the switch offload nothing, and say so."""
    import yaml
    from click.testing import CliRunner

    from perfmodel.cli import main

    base = REPRO / "nemo_cost_keys_not_recognized"
    text = (base / "recipe.yaml").read_text().replace("  cpu_offloading_num_layers: 4\n", "")

    def imported(extra: str) -> tuple[dict, str]:
        (tmp_path / "r.yaml").write_text(text.replace("  bf16: true\n", f"  bf16: true\n{extra}"))
        args = ["import", "nemo", str(tmp_path / "r.yaml"), "--gpu", "h100-sxm", "--gpus", "8"]
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 0, r.output
        return yaml.safe_load(r.stdout), r.stderr

    on = "  fine_grained_activation_offloading: true\n  offload_modules: [core_attn, attn_proj]\n"
    plan, _ = imported(on)
    assert plan["training"]["offload_modules"] == ["core_attn", "attn_proj"]
    plan, said = imported("  offload_modules: [core_attn]\n")
    assert "offload_modules" not in plan["training"]
    assert "offloads nothing" in " ".join(said.split())
