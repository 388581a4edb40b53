"""plan: the vectorized search (issue 3)."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cli import main
from perfmodel.engine.estimate import estimate
from perfmodel.engine.search import search
from perfmodel.engine.space import enumerate_space
from perfmodel.errors import PerfModelError
from perfmodel.inputs import load_plan


@pytest.fixture(scope="module")
def gpt3():
    return load_plan("gpt3-175b.yaml")


def test_search_finds_a_feasible_best(gpt3):
    r = search(gpt3, top=3)
    assert r.feasible > 0 and len(r.results) == 3
    times = [e.values["step_time_s"] for e in r.results]
    assert times == sorted(times)
    assert all(e.values["fits"] for e in r.results)
    assert r.evaluated == r.feasible + r.rejected["does not fit in memory (configurations)"]


def test_results_multiply_out_to_the_gpu_count(gpt3):
    space = enumerate_space(gpt3)
    k = space.knobs
    assert ((k.tp * k.pp * k.dp * k.cp) == 512).all()
    assert ((1536 % (k.dp * k.micro_batch_size)) == 0).all()
    # cp only while each rank keeps 4,096 tokens (the smallest published CP chunk): none at 2,048
    assert set(k.cp) == {1}
    longer = enumerate_space(gpt3.with_training(seq_length=8192)).knobs
    assert set(longer.cp) == {1, 2}
    assert (k.pp * k.vp <= 96).all()  # every chunk holds a layer
    assert (k.pp <= 96).all()  # uneven stages: any pp up to the layer count
    assert (96 % k.tp == 0).all() and (k.tp <= 8).all()


@settings(max_examples=15, deadline=None)
@given(nodes=st.sampled_from([1, 2, 4, 8, 16, 32]), gbs_mult=st.integers(1, 4))
def test_every_search_result_multiplies_out(nodes, gbs_mult):
    plan = load_plan("gpt3-175b.yaml")
    n = 8 * nodes
    plan = plan.with_system(num_gpus=n).with_training(global_batch_size=64 * gbs_mult)
    k = enumerate_space(plan).knobs
    assert ((k.tp * k.pp * k.dp * k.cp) == n).all()


def test_fixed_knobs_restrict_the_space(gpt3):
    fixed = gpt3.model_copy(
        update={"parallel": gpt3.parallel.model_copy(update={"tp": 8, "recompute": "full"})}
    )
    k = enumerate_space(fixed).knobs
    assert set(k.tp) == {8} and set(k.recompute) == {2}


def test_contradicting_fixed_knobs(gpt3):
    bad = gpt3.model_copy(
        update={"parallel": gpt3.parallel.model_copy(update={"vp": 2, "schedule": "1f1b"})}
    )
    with pytest.raises(PerfModelError, match="contradict"):
        search(bad)


def test_prime_gpu_count_has_no_configuration(gpt3):
    """97 GPUs: tp must divide the heads (1), pp = 97 exceeds the 96 layers, and dp = 97 does not
    divide the global batch of 1536."""
    prime = gpt3.with_system(num_gpus=97, gpus_per_node=1)
    with pytest.raises(PerfModelError, match="no valid configuration for 97 GPUs"):
        search(prime)


def test_seven_gpus_hold_seven_uneven_stages(gpt3):
    """pp = 7 does not divide 96 layers: Megatron-Core runs it with an uneven layout (14 on each
    middle stage, fewer on the ends that carry the embedding and the LM head)."""
    space = enumerate_space(gpt3.with_system(num_gpus=7, gpus_per_node=8).with_parallel(tp=1, pp=7))
    assert len(space.knobs) > 0 and (space.knobs.pp == 7).all()


def test_nothing_fits_names_the_smallest_change(gpt3):
    small = gpt3.with_system(num_gpus=8)
    r = search(small)
    assert r.feasible == 0 and "nothing fits" in r.hint and "smallest change" in r.hint


def test_cli_plan_json(runner):
    r = runner.invoke(main, ["plan", "gpt3-175b.yaml", "--gpus", "512", "--top", "2", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert {"evaluated", "feasible", "rejected", "search_time_s", "results"} <= set(d)
    best = d["results"][0]
    for key in (
        "step_time_s",
        "tokens_per_s",
        "tokens_per_s_per_gpu",
        "model_tflops_per_gpu",
        "hardware_tflops_per_gpu",
        "mfu",
        "hfu",
        "breakdown_s",
        "memory",
        "config",
        "warnings",
    ):
        assert key in best
    for key in (
        "tp",
        "pp",
        "dp",
        "vp",
        "micro_batch_size",
        "global_batch_size",
        "num_micro_batches",
        "sequence_parallel",
        "recompute",
        "zero_stage",
        "schedule",
    ):
        assert key in best["config"]


def test_cli_plan_text(runner):
    r = runner.invoke(main, ["plan", "gpt3-175b.yaml", "--gpus", "512", "--top", "3"])
    assert (
        r.exit_code == 0
        and "Top 3" in r.output
        and "evaluated" in r.output
        and "rejected" in r.output
    )


def test_cli_plan_sort_memory(runner):
    r = runner.invoke(main, ["plan", "gpt3-175b.yaml", "--sort", "memory", "--top", "3", "--json"])
    mems = [x["memory"]["total_bytes"] for x in json.loads(r.output)["results"]]
    assert mems == sorted(mems)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--top", "0"], "--top"),
        (["--gpus", "7", "--tp", "2"], "parallel.tp 2 does not divide num_gpus(7)"),
        (["--gpus", "13"], "not a multiple of gpus_per_node"),
        (["--vp", "2", "--schedule", "1f1b"], "contradict"),
    ],
)
def test_cli_plan_bad_input(runner, args, needle):
    r = runner.invoke(main, ["plan", "gpt3-175b.yaml"] + args)
    assert r.exit_code != 0 and needle in r.output and "Traceback" not in r.output


def test_global_batch_smaller_than_dp(runner, tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(
        "model: gpt3-175b\nsystem: {gpu: a100-80gb, num_gpus: 512, intra_node_link: nvlink3,"
        " inter_node_link: ib-hdr}\ntraining: {global_batch_size: 4}\nparallel: {tp: 8, pp: 8, cp:"
        " 1}\n"
    )
    r = runner.invoke(main, ["plan", str(f)])
    # the batch alone leaves nothing: the batch, the dp it meets and one that works (issue 40)
    assert r.exit_code == 1 and "4 is not a multiple of dp x micro_batch_size" in r.output
    assert "use 8" in r.output
    r = runner.invoke(
        main, ["estimate", str(f)]
    )  # free knobs: estimate searches them, and says why it cannot
    assert r.exit_code == 1 and "4 is not a multiple of dp x micro_batch_size" in r.output


@pytest.mark.parametrize("name", ["gpt3-175b.yaml", "llama3.1-405b-h100.yaml"])
def test_simulated_step_never_below_the_search_bound(name):
    """plan ranks by a lower bound on the simulated step (cost/pipeline.pipeline_lower_bound); it
    must hold for every configuration, unequal stages and interleaving included, or --top K could
    miss the best.
    """
    plan = load_plan(name)
    space = enumerate_space(plan)
    rng = np.random.default_rng(7)
    checked = 0
    for i in rng.choice(len(space.knobs), size=60, replace=False):
        cfg = space.knobs.config(int(i), plan.training.global_batch_size)
        if cfg.pp * cfg.num_micro_batches * cfg.vp > 200_000:
            continue  # keep the test fast
        v = estimate(plan, cfg).values
        assert v["step_time_s"] >= v["simulated_step_lower_bound_s"] * (1 - 1e-9), cfg
        checked += 1
    assert checked >= 20


def test_plan_top_k_agrees_on_the_best():
    """Issue 14: --top 1 and --top 5 must name the same best configuration."""
    plan = load_plan("gpt3-175b.yaml")
    one, five = search(plan, top=1).results[0], search(plan, top=5).results
    assert one.config == five[0].config
    assert [e.values["step_time_s"] for e in five] == sorted(e.values["step_time_s"] for e in five)


def test_json_rejections_carry_stable_rule_ids():
    """Issue 15: `rejected` in --json is a list of {rule, reason, count}; the rule IDs are those of
    `check --list-rules`, so scripts do not parse English."""
    import json

    from click.testing import CliRunner

    from perfmodel.cli import main
    from perfmodel.review.check import RULES

    out = json.loads(
        CliRunner().invoke(main, ["plan", "gpt3-175b.yaml", "--gpus", "512", "--json"]).output
    )
    rej = out["rejected"]
    assert rej and all(r["rule"] in RULES and r["count"] > 0 and r["reason"] for r in rej)
    assert {r["rule"] for r in rej} >= {"PM101", "PM103"}
    hbm = next(r for r in rej if r["rule"] == "PM101")
    assert out["evaluated"] == out["feasible"] + hbm["count"]


def test_sort_memory_marks_equivalence_against_the_fastest_listed():
    """The first row under --sort memory is the leanest, not the best: equivalence to the best
    is judged against the fastest row listed (issue 19: every row was marked equivalent), inside
    its out-of-sample typical band (issue 28)."""
    import math

    from perfmodel.engine import search as srch
    from perfmodel.inputs import load, presets

    plan = load("gpt3-175b").plan
    result = srch.search(plan, 5, "memory")
    srch.annotate(plan, result, presets.error_bands(), rank=False)
    steps = [e.values["step_time_s"] for e in result.results]
    assert steps == [e.values["step_time_s"] for e in srch.search(plan, 5, "memory").results]
    fastest = min(result.results, key=lambda e: e.values["step_time_s"])
    for e, step in zip(result.results, steps):
        margin = fastest.band.typical
        assert e.equivalent_to_best == (step <= fastest.values["step_time_s"] * math.exp(margin))
    assert not all(e.equivalent_to_best for e in result.results)


def test_the_search_never_proposes_a_schedule_the_framework_lacks():
    """Megatron-LM and DeepSpeed have no GPipe schedule: the search does not offer it, so an
    emitted pick runs as predicted (issue 19, found by the round-trip fuzz: GPipe beat 1F1B by
    0.05% and read back as 1F1B)."""
    import json

    from perfmodel.cost.pipeline import SCHEDULE_CODES
    from perfmodel.engine.space import enumerate_space
    from perfmodel.inputs import load
    from perfmodel.specs.framework import PROFILES

    base = load("llama3-8b-h100").plan
    for name, profile in PROFILES.items():
        plan = base.model_copy(
            update={"training": base.training.model_copy(update={"framework": name})}
        )
        codes = set(enumerate_space(plan).knobs.schedule.tolist())
        # no pipeline parallelism: one stage, whose schedule code is 1F1B's
        allowed = {SCHEDULE_CODES[s] for s in profile["schedules"] or ("1f1b",)}
        assert codes and codes <= allowed, (name, json.dumps(sorted(codes)))


def _bound_and_total(plan, knobs):
    """memory_lower_bound and the priced total of every row of ``knobs``."""
    from perfmodel.engine.memory import memory_lower_bound
    from perfmodel.engine.search import evaluate_chunked

    return memory_lower_bound(plan, knobs), evaluate_chunked(plan, knobs)["total_bytes"]


def _sample(knobs, n=4000):
    return knobs.take(np.arange(0, len(knobs), max(1, len(knobs) // n)))


BUNDLED = [
    "deepseek-v3-gb200.yaml",
    "deepseek-v3-h100.yaml",
    "gpt-1t.yaml",
    "gpt3-175b-3d.yaml",
    "gpt3-175b.yaml",
    "llama2-70b-h100.yaml",
    "llama3-8b-h100.yaml",
    "llama3.1-405b-gb200.yaml",
    "llama3.1-405b-h100.yaml",
]


@pytest.mark.parametrize("name", BUNDLED)
def test_the_memory_bound_never_exceeds_what_a_configuration_needs(name):
    """The search sets aside, unpriced, what its memory bound proves cannot fit
    (engine/memory.memory_lower_bound); the bound must sit at or under every priced total, or the
    search would drop a configuration that fits."""
    plan = load_plan(name)
    bound, total = _bound_and_total(plan, _sample(enumerate_space(plan, False).knobs))
    assert (bound <= total * (1 + 1e-9)).all()
    assert (bound > 0.3 * total).mean() > 0.5  # and it is not vacuous


@pytest.mark.parametrize("framework", ["megatron", "torchtitan", "deepspeed"])
def test_the_memory_bound_holds_under_every_switch_set_and_profile(framework):
    """Under each memory switch set the plan's framework runs (each on the rows that can run it:
    activation offloading at pp 1 without recompute), and under profiles that keep the head's input
    gathered (torchtitan) or shard the states per tensor (DeepSpeed), the bound stays under the
    priced total: no switch sheds the head's logits, which the bound counts."""
    from perfmodel.engine import memory_switches as ms
    from perfmodel.engine.memory import switchless_bytes

    base = load_plan("llama3-8b-h100.yaml")
    plan = base.with_training(framework=framework)
    knobs = _sample(enumerate_space(plan, False).knobs, 1500)
    sets = ms.usable_sets(plan)
    assert framework != "megatron" or any(ms.is_offload(n) for n in sets)
    for name in ["", *sets]:
        k = knobs.take(
            np.flatnonzero(ms.runs_with(name, knobs.zero_stage, knobs.recompute, knobs.pp))
            if name
            else slice(None)
        )
        if not len(k):
            continue
        k.memory_switch = np.full(len(k), ms.SET_CODES[name])
        bound, total = _bound_and_total(plan, k)
        assert (bound <= total * (1 + 1e-9)).all(), name
        # what no set sheds (with_switches tries no set on a row it alone does not fit)
        assert (switchless_bytes(plan, k) <= bound).all(), name


def test_the_memory_bound_counts_the_loss_logits_of_a_micro_batch():
    """Llama 3 8B at tp 1, pp 2, a micro-batch of 32 sequences of 8,192 tokens: the last stage
    holds the head's input and the output layer's (2 + 2 bytes x s b h = 4.3 GB) and Megatron's
    fp32 logits (4 x s b V = 134.5 GB, V = 128,256): 138.8 GB, over the mean model states under
    the distributed optimizer over dp 8 (some 30 GB), so that is the bound, and such a row is not
    priced on an 80 GB H100."""
    from perfmodel.engine.memory import memory_lower_bound
    from perfmodel.engine.memory_verdict import fits_mask
    from perfmodel.engine.reserve import usable_bytes

    plan = load_plan("llama3-8b-h100.yaml")
    k = enumerate_space(plan, False).knobs
    rows = (k.tp == 1) & (k.pp == 2) & (k.cp == 1) & (k.micro_batch_size == 1)
    one = k.take([np.flatnonzero(rows & (k.zero_stage == 1) & (k.dp_shard == 0))[0]])
    one.micro_batch_size = np.array([32])
    s, h, V = 8192, 4096, 128256
    expected = 4.0 * s * 32 * h + 4.0 * s * 32 * V
    assert expected == pytest.approx(138.78e9, rel=1e-3)
    bound = memory_lower_bound(plan, one)
    assert bound[0] == pytest.approx(expected, rel=1e-12)
    assert not fits_mask(bound, usable_bytes(plan.system))[0]


def test_a_pool_with_a_horizon_keeps_the_exact_top_and_everything_inside_it(gpt3):
    """plan's pool (search with ``exact`` and ``horizon``) holds the same exact fastest as the full
    pool, and of the rest exactly those within the horizon of the fastest: what annotate counts as
    equivalent and ranks by practice. Only the others go unsimulated."""
    full = search(gpt3, top=50).results
    edge = full[0].values["step_time_s"] * 1.03
    pool = search(gpt3, top=50, exact=3, horizon=lambda fastest: edge).results
    steps = [e.values["step_time_s"] for e in full]
    assert [e.config for e in pool[:3]] == [e.config for e in full[:3]]
    inside = [e.config for e in full[3:] if e.values["step_time_s"] <= edge]
    assert [e.config for e in pool[3:]] == inside
    assert len(inside) < len(full) - 3 and steps == sorted(steps)


def test_the_memory_bound_never_reads_the_global_batch():
    """memory_lower_bound prices plans that differ in the global batch alone on one of them
    (by_plan.batchless, so that a sweep of the batch validates each switched copy once): that
    needs the bound to read no batch, which the bound of each plan on its own shows, under each
    switch set."""
    from perfmodel.engine import memory_switches as ms
    from perfmodel.engine.memory import _lower_bound, memory_lower_bound
    from perfmodel.specs.by_plan import batchless

    plan = load_plan("llama3-8b-h100.yaml")
    knobs = _sample(enumerate_space(plan, False).knobs, 300)
    other = plan.with_training(global_batch_size=4 * plan.training.global_batch_size)
    assert batchless(other) is batchless(plan)
    for name in ["", *ms.usable_sets(plan)]:
        k = knobs.take(slice(None))
        k.memory_switch = np.full(len(k), ms.SET_CODES[name])
        alone = _lower_bound(other, k)
        assert np.array_equal(_lower_bound(plan, k), alone), name
        assert np.array_equal(memory_lower_bound(other, k), alone), name
