"""The memory-saving switches as searched knobs (issue 37 item 3, engine/memory_switches.py): a
switched configuration is priced exactly as a plan that states the switch's fields; the search
tries the switches only where memory asks and the framework runs them; the answer says which it
turns on, and the launch script it emits carries their flags."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import helpers
import numpy as np
import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.engine import memory_switches as ms
from perfmodel.engine.estimate import Knobs, estimate, resolve_config
from perfmodel.engine.evaluate import KEEP, evaluate_chunked
from perfmodel.engine.search import search
from perfmodel.inputs import load_plan

EDGE = Path(__file__).parent / "data" / "repro" / "pick_at_memory_edge"
# NVIDIA-like layout of Llama 3.1 70B on 512 H100: 82.5 GB of 81.2 GB without recompute (tight)
LAYOUT = dict(tp=4, pp=4, vp=4, cp=1, micro_batch_size=1, sequence_parallel=True, zero_stage=1)
LAYOUT_ARGS = ["--tp", "4", "--pp", "4", "--vp", "4", "--cp", "1", "--mbs", "1", "--sp"]
LAYOUT_ARGS += ["--zero", "1", "--dp", "32"]


@pytest.fixture(scope="module")
def edge():
    return load_plan(str(EDGE / "plan.yaml"))


def run(*args: str):
    """A command in the pick_at_memory_edge reproducer's folder (tests/helpers.run)."""
    return helpers.run("pick_at_memory_edge", *args)


def _case(switch_set: str):
    """A plan and a configuration a set runs on: the recompute modules on DeepSeek-V3 (MLA) with
    selective recompute, the rest on Llama 3.1 405B in FP8 (where the FP8 gather applies)."""
    if ms.names(switch_set)[0] in ms.RECOMPUTE_SWITCHES:
        plan = load_plan("deepseek-v3-h100.yaml")
        return plan, resolve_config(
            plan,
            tp=4,
            pp=8,
            vp=1,
            ep=64,
            zero_stage=1,
            sequence_parallel=True,
            recompute="selective",
        )
    if ms.is_offload(switch_set):  # Megatron-Core offloads with pp 1 and no recompute only
        plan = load_plan("llama3-8b-h100.yaml")
        return plan, resolve_config(plan, tp=2, pp=1, cp=1, zero_stage=1, recompute="none")
    plan = load_plan("llama3.1-405b-h100.yaml").with_training(dtype="fp8")
    return plan, resolve_config(plan, tp=8, pp=8, vp=4, zero_stage=1, sequence_parallel=True)


@pytest.mark.parametrize("switch_set", ms.SETS[1:])
def test_a_switched_configuration_is_priced_as_the_plan_that_states_it(switch_set):
    """Every set: the configuration carrying the set and the plain configuration of the plan with
    the set's fields give the same step and memory."""
    plan, cfg = _case(switch_set)
    switched = estimate(plan, replace(cfg, memory_switch=switch_set)).values
    stated = estimate(ms.applied(plan, switch_set), cfg).values
    for key in ("step_time_s", "total_bytes", "optimizer_bytes", "gradients_bytes", "dp_comm"):
        assert switched[key] == pytest.approx(stated[key], rel=1e-12), key


@pytest.mark.parametrize("switch", list(ms.SWITCHES))
def test_each_switch_saves_memory_at_its_cost_in_time(switch):
    """Each switch against the first set that holds it without it: moments in BF16 halve the
    optimizer's moments, in FP8 quarter them, FP16 master weights halve the master copy, BF16 main
    gradients halve the gradient buffer, FP8 weights drop the 16-bit copy: none makes the step
    slower (they move fewer bytes),
    and the search bounds a switched step by what they change (switchable_s). The MLA recompute
    modules save activations and cost recompute time."""
    with_it = next(x for x in ms.SETS if switch in ms.names(x))  # the first set that holds it
    without = "+".join(n for n in ms.names(with_it) if n != switch)
    plan, cfg = _case(with_it)
    base = estimate(plan, replace(cfg, memory_switch=without)).values
    v = estimate(plan, replace(cfg, memory_switch=with_it)).values
    assert v["total_bytes"] < base["total_bytes"]
    if switch in ms.RECOMPUTE_SWITCHES:  # in place of the attention core's recompute
        assert v["activations_bytes"] < base["activations_bytes"]
        assert v["recompute"] > 0
        return
    assert v["closed_form_step_time_s"] >= base["closed_form_step_time_s"] - base["switchable_s"]
    if switch == "optimizer-cpu-offload":  # the host's step is slower than the GPU's
        assert v["optimizer_bytes"] == 0.0 and v["step_time_s"] > base["step_time_s"]
        return
    if ms.is_offload(switch):  # the copy the pass does not hide adds to the step
        assert v["activations_bytes"] < base["activations_bytes"]
        assert v["step_time_s"] >= base["step_time_s"]
        return
    assert v["step_time_s"] <= base["step_time_s"] * (1 + 1e-12)
    if switch == "bf16-main-grads":
        assert v["gradients_bytes"] == pytest.approx(base["gradients_bytes"] / 2)
    if switch == "fp8-moments":  # 4 B master + 2 x 1 B moments, from 4 + 2 x 4: half
        assert v["optimizer_bytes"] == pytest.approx(base["optimizer_bytes"] / 2)
    if switch == "fp16-main-params":  # beside BF16 moments: 2 + 2 x 2 B, from 4 + 2 x 2
        assert v["optimizer_bytes"] == pytest.approx(base["optimizer_bytes"] * 6 / 8)


def test_evaluation_of_mixed_sets_equals_each_set_alone(edge):
    """evaluate_chunked prices rows of several sets a set at a time, each row as it would be with
    its set alone (arrays, no loop per configuration)."""
    cfgs = [
        replace(resolve_config(edge, recompute=r, **LAYOUT), memory_switch=s)
        for r in ("none", "selective", "full")
        for s in ("", "bf16-main-grads", "bf16-moments+bf16-main-grads")
    ]
    mixed = evaluate_chunked(edge, Knobs.from_configs(cfgs))
    for i, c in enumerate(cfgs):
        alone = evaluate_chunked(edge, Knobs.from_configs([c]))
        for key in KEEP:
            assert mixed[key][i] == pytest.approx(alone[key][0], rel=1e-12), (key, c)


def test_profiles_gate_the_switches(edge):
    """Megatron-Core's profile runs the precision-aware optimizer (no FP8 gather for BF16); FSDP,
    DeepSpeed, InternEvo and HAI-LLM run none; a field the plan states is not searched."""
    offloads = [f"activation-offload-{k}" for k in range(1, 9)]
    assert ms.usable_sets(edge) == [
        "bf16-main-grads",
        "bf16-moments",
        "bf16-moments+bf16-main-grads",
        *offloads,
        "offload-attention",
        "offload-modules",
        "bf16-moments+bf16-main-grads+fp16-main-params",
        "fp8-moments+bf16-main-grads",
        "fp8-moments+bf16-main-grads+fp16-main-params",
        "optimizer-cpu-offload",
    ]
    # the offload, FP8 moments and FP16 masters: not on ROCm; the offload not without a host
    for framework in ("primus", "megatron-rocm"):
        rocm = ms.usable_sets(edge.with_training(framework=framework))
        assert not {n for s in rocm for n in ms.names(s)} & {
            "optimizer-cpu-offload",
            "fp8-moments",
            "fp16-main-params",
            *offloads,
            *ms.MODULE_SWITCHES,
        }
        assert "bf16-moments+bf16-main-grads" in rocm
    # a plan that states its moments or master weights is not searched for them
    stated = ms.usable_sets(edge.with_training(exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16"))
    assert not any("moments" in s for s in stated)
    remainders = ms.usable_sets(edge.with_training(main_params_dtype="remainders"))
    assert not any("fp16-main-params" in s for s in remainders)
    hostless = edge.with_system(host_memory_bandwidth_bytes_per_s=None)
    assert "optimizer-cpu-offload" not in ms.usable_sets(hostless)
    # MLA's up-projections only where the model has MLA; "mlp" only beside dense layers
    dsv3 = load_plan("deepseek-v3-h100.yaml")
    assert {"mla-up-proj", "mla-up-proj-mlp"} <= set(ms.usable_sets(dsv3))
    assert not set(ms.RECOMPUTE_SWITCHES) & set(ms.usable_sets(edge))
    assert not set(ms.RECOMPUTE_SWITCHES) & set(
        ms.usable_sets(dsv3.with_training(recompute_modules=["core_attn"]))
    )
    one = np.array([1, 1, 1])
    rows = ms.runs_with("mla-up-proj", np.array([1, 1, 0]), np.array([1, 2, 1]), one)
    assert list(rows) == [True, False, True]
    got = ms.runs_with("bf16-moments", np.array([1, 0]), np.array([1, 1]), one[:2])
    assert list(got) == [True, False]
    assert "fp8-param-gather" in ms.usable_sets(edge.with_training(dtype="fp8"))
    for framework in ("fsdp", "deepspeed", "internevo", "hai-llm", "megatron-2022"):
        assert ms.usable_sets(edge.with_training(framework=framework)) == [], framework
    stated = edge.with_training(
        exp_avg_dtype="fp32",
        optimizer_cpu_offload=0.0,
        cpu_offloading_num_layers=0,
        offload_modules=[],
    )
    assert ms.usable_sets(stated) == ["bf16-main-grads"]
    sgd = edge.with_training(optimizer="sgd", cpu_offloading_num_layers=0, offload_modules=[])
    assert ms.usable_sets(sgd) == ["bf16-main-grads", "optimizer-cpu-offload"]


def test_the_search_switches_only_what_memory_asks_for(edge):
    """At the tight layout with recompute free, the answer runs no recompute and fits with margin
    with the fewest switches that make it so, about as fast as the tight plain one; every switched
    configuration listed is one that is tight or does not fit without its switches."""
    plan = edge.with_parallel(**LAYOUT, dp=32)
    r = search(plan, top=3)
    first = r.results[0]
    assert first.config.recompute == "none" and not first.values["tight"]
    assert first.config.memory_switch == "bf16-main-grads"
    tight = estimate(plan, resolve_config(plan, recompute="none")).values
    assert tight["tight"]
    assert first.values["step_time_s"] <= tight["step_time_s"] * (1 + 1e-9)
    # every switched configuration the search lists needs its switches: tight or over without
    small = load_plan("llama3-8b-h100.yaml")
    for p, results in ((small, search(small, top=20).results), (plan, r.results)):
        for e in results:
            if e.config.memory_switch:
                plain = estimate(p, replace(e.config, memory_switch="")).values
                assert plain["tight"] or not plain["fits"], e.config
    # ZeRO 0 runs no distributed optimizer, which Megatron asserts for each switch
    z0 = search(edge.with_parallel(**{**LAYOUT, "zero_stage": 0}, dp=32), top=5)
    assert not any(e.config.memory_switch for e in z0.results)


def test_a_plain_configuration_inside_the_band_comes_before_a_switched_one():
    """GPT-3 175B on 512 A100: switched layouts are up to 3.5% faster, inside the band of the
    plain one that fits with margin, which stays the answer; the switched ones are listed."""
    j = json.loads(
        CliRunner().invoke(main, ["plan", "gpt3-175b.yaml", "--gpus", "512", "--json"]).output
    )
    first = j["results"][0]
    assert first["config"]["memory_switch"] == "" and first["memory"]["verdict"] == "fits"
    switched = [e for e in j["results"] if e["config"]["memory_switch"]]
    assert switched and all(e["equivalent_to_best"] for e in switched)
    hi = first["expected_error"]["step_time_range_s"][1]
    assert all(
        e["step_time_s"] * hi / first["step_time_s"] >= first["step_time_s"] for e in switched
    )


def test_the_answer_names_its_switches_and_the_script_carries_them():
    """Text, --json and the emitted launch script say what the answer turns on; the script read
    back gives the same step and memory."""
    j = json.loads(run("plan", "plan.yaml", *LAYOUT_ARGS, "--json").output)
    assert j["results"][0]["config"]["memory_switch"] == "bf16-main-grads"
    text = " ".join(run("plan", "plan.yaml", *LAYOUT_ARGS).output.split())
    assert (
        "with main gradients in BF16 (--use-precision-aware-optimizer --main-grads-dtype bf16)"
        in text
    )
    assert " ".join(ms.LEGEND.split()) in text
    est = json.loads(run("estimate", "plan.yaml", *LAYOUT_ARGS, "--json").output)
    assert est["config"] == j["results"][0]["config"]
    script = run("plan", "plan.yaml", *LAYOUT_ARGS, "--emit", "megatron").output
    assert "--use-precision-aware-optimizer" in script and "--main-grads-dtype bf16" in script
    lines = [ln.rstrip(" \\") for ln in script.splitlines() if ln.startswith("--")]
    from perfmodel.inputs.megatron_emit import read_back

    back = read_back(load_plan(str(EDGE / "plan.yaml")), lines)
    assert back.training.grad_accum_fp32 is False
    got = estimate(back, resolve_config(back)).values
    want = j["results"][0]
    assert got["step_time_s"] == pytest.approx(want["step_time_s"], rel=2e-3)
    assert got["total_bytes"] == pytest.approx(want["memory"]["total_bytes"], rel=1e-9)


def test_switch_codes_round_trip_through_the_arrays():
    cfgs = [
        replace(resolve_config(load_plan("llama3-8b-h100.yaml")), memory_switch=s) for s in ms.SETS
    ]
    k = Knobs.from_configs(cfgs)
    assert list(k.memory_switch) == list(np.arange(len(ms.SETS)))
    assert [k.config(i, cfgs[0].global_batch_size) for i in range(len(cfgs))] == cfgs


def test_a_switched_answer_passes_check_and_check_offers_the_switch_as_a_fix():
    """`check` reviews the answer plan gives (its switches applied): no memory error; with the
    layout stated in full and no switch, PM101 names the switch as the fastest change that fits
    with margin."""
    r = run("check", "plan.yaml", *LAYOUT_ARGS)
    assert r.exit_code == 0 and "PM101" not in r.output
    assert "memory_switch=bf16-main-grads" in " ".join(r.output.split())
    fixed = run("check", "plan.yaml", *LAYOUT_ARGS, "--recompute", "none", "--json")
    pm101 = next(f for f in json.loads(fixed.output) if f["rule"] == "PM101")
    assert pm101["fix"].startswith("main gradients in BF16 (--use-precision-aware-optimizer")


def test_recompute_modules_reach_the_launch_script_and_back():
    """A recompute-module switch is written as --recompute-modules and read back the same, with
    the same step."""
    from perfmodel.inputs.megatron_emit import launch_text, read_back

    plan, cfg = _case("mla-up-proj")
    cfg = replace(cfg, memory_switch="mla-up-proj")
    est = estimate(plan, cfg)
    text = launch_text(ms.applied(plan, cfg.memory_switch), est)
    assert "--recompute-modules mla_up_proj" in text
    back = read_back(plan, [ln.rstrip(" \\") for ln in text.splitlines() if ln.startswith("--")])
    assert back.training.recompute_modules == ["mla_up_proj"]
    got = estimate(back, resolve_config(back)).values["step_time_s"]
    assert got == pytest.approx(est.values["step_time_s"], rel=1e-9)
