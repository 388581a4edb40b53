"""Error bands that hold on runs the model never saw (issue 28; SPEC 13): bands from out-of-sample
errors by class, widened where no run validated a combination, measured by their coverage; and a
search that says when it cannot choose."""

import math

import pytest

from perfmodel.engine import answer, practice, uncertainty
from perfmodel.engine import search as srch
from perfmodel.inputs import load_plan, presets
from perfmodel.specs.router import ROUTER_LOAD


def _runs() -> uncertainty.Runs:
    return uncertainty.Runs(presets.error_bands()["runs"])


def _plan(model, gpu, n, framework, per_node=8, **training):
    return presets.plan_from_mapping(
        {
            "model": model,
            "system": {"gpu": gpu, "num_gpus": n, "gpus_per_node": per_node},
            "training": {"global_batch_size": 256, "framework": framework, **training},
        },
        "t",
    )


def test_conformal_rank():
    """Split conformal's quantile is the ceil((n+1) q)-th smallest score (Angelopoulos and Bates
    2021, Sec. 1): of 1..10, the 8th for 68%; 95% needs 19 scores."""
    scores = list(range(1, 11))
    assert uncertainty.conformal(scores, 0.68) == 8
    assert uncertainty.conformal(scores, 0.95) is None
    assert uncertainty.conformal(range(1, 20), 0.95) == 19


def test_coverage_out_of_sample_is_near_nominal():
    """benchmarks/band_coverage.py's figures: each run's out-of-sample error against the band the
    other sources give it. The bounds follow from the method, not from today's figures: split
    conformal's typical band holds 68% of exchangeable runs, so over n runs its share lies within
    two binomial standard errors of 68% (sqrt(0.68 x 0.32 / n): +-9 points at 103 runs); the worst
    band (95% nominal) holds at least 90%; and the median typical half-width stays under 20%, the
    out-of-sample error a band is for (a band wider than that says little). History: before issue
    28 the bands held 30% and 72% at a 5.9% median; over 74 runs 68%, 93% and 12.8%; over 103,
    71%, 99% and 16.6%; the figures of today are what benchmarks/band_coverage.py prints."""
    c = uncertainty.coverage(_runs())
    n = c["runs"]
    assert n >= 113
    se = math.sqrt(uncertainty.TYPICAL * (1 - uncertainty.TYPICAL) / n)
    assert abs(c["typical_coverage"] - uncertainty.TYPICAL) <= 2 * se
    assert c["worst_coverage"] >= 0.90
    assert c["median_typical_half_width"] <= 0.20
    assert all(r["worst"] >= r["typical"] > 0 for r in c["rows"])


@pytest.mark.xfail(
    strict=True,
    reason=(
        "published-2026c's Hopper runs join the class (MLPerf v5.1 of Cisco, HPE and Nebius;"
        " DGX Cloud v25.05's Llama 3.1 405B and Nemotron-4 340B): dense Megatron on Hopper is"
        " 15 runs of 3 sources, its 68% rank 11.2% (was within 10% on NeMo 24.07's 8 alone);"
        " Nebius's 405B on H200 +12%, Cisco's 8B on 128 H100 over Ethernet -29%"
    ),
)
def test_megatron_core_on_hopper_at_a_published_layout_gets_a_band_within_10pct():
    """Issue 28: a band is useful only where it is narrow where the model is good. Megatron-Core on
    Hopper at the layouts NeMo 24.07 published (dense, FP8) is out of sample within about 5% on
    average; its band stays within +-10%."""
    bands = presets.error_bands()
    for name in ("nemo-llama2-70b-64gpu", "nemo-gpt3-175b-128gpu", "nemo-llama2-7b-8gpu"):
        case = next(c for c in presets.validation_cases() if c["name"] == name)
        est = answer.estimate_or_search(case["plan"], presets.error_bands())[0]
        b = uncertainty.of_estimate(case["plan"], bands, est)
        assert b.typical <= 0.10, (name, b.typical, b.basis)


def test_runs_no_fit_touches_are_out_of_sample_as_shipped():
    """A source no calibration is fitted on (MLPerf, IBM's fms-fsdp, Primus, Megatron-Bridge's MoE
    runs on Blackwell, torchtitan's 2024 notes, DGX Cloud's dense recipes, Narayanan 2021's ZeRO-3
    table, whose host loop is counted, not fitted; DGX Cloud's
    MoE recipes are in the Hopper BF16 fit) keeps its shipped error;
    one every fit of which it sits in moves when it is left out (the DeepSeek-V3 report's run, on
    which its router family's load is fitted, goes to that family's prior)."""
    runs = presets.error_bands()["runs"]
    untouched = [r for r in runs.values() if r["refit"] == "no fit touches this source"]
    assert {r["table"] for r in untouched} == {
        "mlperf-llama31",
        "mlperf51-llama31",
        "torchtitan-2024",
        "dgxc-2505",
        "fms-fsdp",
        "primus-pipeline",
        "mbridge-moe-blackwell",
        "narayanan2021-table2",
    }
    (report,) = [r for r in runs.values() if r["table"] == "deepseek-v3-report"]
    # left out, the load goes to aux_loss's figure: a heavier busiest expert is a slower step
    heavier = ROUTER_LOAD["aux_loss"] > ROUTER_LOAD["aux_free_bias"]
    assert (report["oos_log_error"] > report["log_error"]) == heavier
    assert all(r["oos_log_error"] == r["log_error"] for r in untouched)
    torchtitan = [r for r in runs.values() if r["table"] == "torchtitan-2412"]
    assert all(r["oos_log_error"] != r["log_error"] for r in torchtitan)


def test_band_names_its_class_and_count():
    """GPT-3 175B on A100 under Megatron takes the class of Megatron's dense Ampere runs
    (Korthikanti 2022, Narayanan 2021): its half-width is their errors' 68% rank."""
    p = _plan("gpt3-175b", "a100-80gb", 512, "megatron-core")
    cfg = answer.estimate_or_search(p.with_parallel(tp=8, pp=8, cp=1), presets.error_bands())[
        0
    ].config
    b = uncertainty.band(p, presets.error_bands(), cfg)
    runs = [
        r
        for r in _runs().runs.values()
        if r["family"] == "Megatron" and r["arch"] == "ampere" and not r["moe"]
    ]
    assert b.runs == len(runs) and f"{len(runs)} runs of 2 sources" in b.basis
    assert b.typical == uncertainty.conformal([r["oos_log_error"] for r in runs], 0.68)
    assert b.worst > b.typical
    # the Ampere runs ran Megatron-LM's 2021 and 2022 profiles: megatron-core on A100 is said, and
    # not added (the family's profiles hold each other's bands)
    assert b.unvalidated == ("megatron-core on Ampere",)
    k22 = uncertainty.band(p.with_training(framework="megatron-2022"), presets.error_bands(), cfg)
    assert not k22.unvalidated and k22.typical == b.typical


def test_what_no_run_combined_widens_the_band_and_is_said():
    """Issue 28's case: PP and CP under FSDP (torchtitan's stack) on 256 H100. Runs of PyTorch FSDP
    used each (torchtitan's 405B on PP 8, its 8B on CP 8) but none both, so the band widens by the
    error of the runs that combined them elsewhere, in quadrature."""
    p = _plan("llama3-70b", "h100-sxm", 256, "fsdp", seq_length=8192)
    plain = answer.estimate_or_search(
        p.with_parallel(tp=8, pp=1, cp=1, zero_stage=3), presets.error_bands()
    )[0]
    odd = answer.estimate_or_search(
        p.with_parallel(tp=2, pp=4, cp=4, zero_stage=3), presets.error_bands()
    )[0]
    bands = presets.error_bands()
    a, b = uncertainty.of_estimate(p, bands, plain), uncertainty.of_estimate(p, bands, odd)
    assert b.unvalidated == ("pipeline parallelism with context parallelism under PyTorch FSDP",)
    assert not a.unvalidated
    assert b.typical > a.typical and "widened by" in b.basis
    r = _runs()
    both, _ = r._ingredient("cp+pp", uncertainty._full(uncertainty.features(p, odd.config)))
    assert b.typical == pytest.approx(math.hypot(a.typical, both))


def test_a_format_never_run_on_a_part_is_unvalidated():
    """NVFP4 on B200: no published run; GB200 NVFP4 has runs."""
    bands = presets.error_bands()
    for gpu, said in (("b200", True), ("gb200", False)):
        p = _plan("llama3-8b", gpu, 8, "megatron-core", dtype="nvfp4")
        est = answer.estimate_or_search(p.with_parallel(tp=1, pp=1, cp=1), presets.error_bands())[0]
        b = uncertainty.of_estimate(p, bands, est)
        assert ("FP4 on " + gpu.upper() in b.unvalidated) == said


def test_plan_ranks_equivalent_configurations_by_validated_practice():
    """Inside the fastest one's band the model cannot rank; the listed order puts first the
    configuration nearest validated practice (engine/practice.key), and the count of equivalents
    is taken over the whole ranked pool."""
    p = load_plan("gpt3-175b.yaml").with_system(num_gpus=512)
    result = srch.search(p, srch.RANK_POOL)
    srch.annotate(p, result, presets.error_bands(), keep=5)
    fastest_s = min(e.values["step_time_s"] for e in result.results)
    same = [e for e in result.results if e.equivalent_to_best]
    assert result.equivalents >= len(same) >= 2
    # a configuration whose memory fits with margin before a tight one (issue 37), then practice
    keys = [(bool(e.values["tight"]), *practice.key(p, e)) for e in same]
    assert keys == sorted(keys)
    b = same[0].band
    assert all(e.values["step_time_s"] <= fastest_s * math.exp(b.typical) * 1.001 for e in same)
    # the first is not the fastest here: CP at 2,048 tokens is faster by less than the band
    assert same[0].config.cp == 1


def test_separates_says_only_what_differs():
    p = load_plan("gpt3-175b.yaml").with_system(num_gpus=512)
    result = srch.search(p, 20)
    srch.annotate(p, result, presets.error_bands())
    same = [e for e in result.results if e.equivalent_to_best]
    shared, lines = practice.separates(p, same)
    assert len(lines) == len(same)
    for text in shared:
        assert not any(text in line for line in lines)


@pytest.mark.parametrize("bad", [0.0, 0.5])
def test_compare_says_equal_within_the_band(bad):
    """`compare` calls two plans equal when their step times differ by less than the wider band,
    and says by how much one is faster otherwise."""
    from perfmodel.review.compare import Side, verdict

    p = _plan("gpt3-175b", "a100-80gb", 512, "megatron-core")
    est = answer.estimate_or_search(p.with_parallel(tp=8, pp=8, cp=1), presets.error_bands())[0]
    est.band = uncertainty.of_estimate(p, presets.error_bands(), est)
    other = answer.estimate_or_search(p.with_parallel(tp=8, pp=8, cp=1), presets.error_bands())[0]
    other.band = est.band
    other.values = {**other.values, "step_time_s": other.values["step_time_s"] * (1 + bad + 1e-3)}
    text = verdict(Side("A", p, est, {}), Side("B", p, other, {}))
    assert ("equal within the band" in text) == (bad == 0.0)


def test_issue_28s_fsdp_pick_is_the_validated_layout_when_the_model_cannot_rank():
    """Llama 3.1 70B on 256 H100 under `fsdp`: the fastest predicted layouts combine PP and CP,
    which no FSDP run validated; a layout of FSDP with TP (torchtitan's kind) lies inside their
    band, so it is listed first, and its band names nothing unvalidated."""
    p = _plan("llama3-70b", "h100-sxm", 256, "fsdp", seq_length=8192)
    result = srch.search(p, srch.RANK_POOL)
    fastest = result.results[0]
    assert fastest.config.pp > 1 or fastest.config.cp > 1
    srch.annotate(p, result, presets.error_bands(), keep=5)
    first = result.results[0]
    assert first.equivalent_to_best and first.config.pp == 1 and first.config.cp == 1
    assert not first.band.unvalidated
    assert first.values["step_time_s"] > fastest.values["step_time_s"]
