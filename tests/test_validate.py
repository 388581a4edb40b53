"""Accuracy against published measurements (issue 4).

The efficiency parameters are fitted once, on Korthikanti 2022 Table 4 only
(benchmarks/calibrate_a100.py); link efficiencies come from NCCL bus-bandwidth
reports. Every step time below is a check, not a fit.
"""

import json

import pytest

from perfmodel.cli import main
from perfmodel.errors import PerfModelError
from perfmodel.inputs import load_plan, presets
from perfmodel.review.validate import measured_step_time, run_case, validate
from perfmodel.specs.router import ROUTER_LOAD


@pytest.fixture(scope="module")
def report():
    return validate()


def test_korthikanti_table5_targets(
    report,
):  # issue 4: mean <= 3%, max <= 6% (peer tool: 3.65% / 8.87%)
    t = report.tables["korthikanti2022-table5"]
    assert t["cases"] == 8
    assert t["mean_abs_error_pct"] <= 3.0
    assert t["max_abs_error_pct"] <= 6.0


def test_narayanan_table1_targets(report):  # issue 4: mean <= 5%, max <= 10%
    t = report.tables["narayanan2021-table1"]
    assert t["cases"] == 10
    assert t["mean_abs_error_pct"] <= 5.0 and t["max_abs_error_pct"] <= 10.0


def test_tables_report_which_way_the_model_leans(report):
    """The signed mean and the count of runs predicted too fast come from the same errors as
    |mean|."""
    for name, t in report.tables.items():
        errs = [c.error_pct for c in report.cases if c.table == name]
        assert t["mean_error_pct"] == pytest.approx(sum(errs) / len(errs))
        assert abs(t["mean_error_pct"]) <= t["mean_abs_error_pct"]
        assert t["runs_predicted_fast"] == sum(e < 0 for e in errs)


def test_same_pipeline_two_software_generations(report):
    """The 1T pipeline (tp 8, pp 64, micro-batch 1, m = 512, full recompute) ran on the same cluster
    in 2021 (Narayanan, 102.6 s) and 2022 (Korthikanti, 94.4 s); the model must see both within 3%,
    the difference coming only from the documented software settings of each run."""
    by = {c.name: c for c in report.cases}
    for name in ("n21-gpt-1008b", "k22-1t-full"):
        assert abs(by[name].error_pct) <= 3.0, (name, by[name].error_pct)
    assert by["n21-gpt-1008b"].predicted_s > by["k22-1t-full"].predicted_s


def test_sp_selective_is_faster_for_every_model(report):
    """SP + selective recompute beats full recompute on every Korthikanti model, by roughly the
    measured margin (+29% to +32%)."""
    assert len(report.sp_gain) == 4
    for g in report.sp_gain:
        # each run is predicted within ~3% (the table's target), so the gain within ~5 points of the
        # paper's
        assert abs(g["predicted_gain_pct"] - g["measured_gain_pct"]) <= 5.0, g


@pytest.mark.xfail(
    strict=True,
    reason=(
        "The issue's band is 25-35%; the model predicts +32.9% to +35.7%, 175B just above it"
        " (measured +31.9%). SP + selective runs are predicted 2-3 points more optimistic than"
        " full-recompute runs: at the layer level Table 4 already shows it (selective recompute"
        " measured 1.3 ms, model 1.08 ms), and the fit's three parameters cannot separate the"
        " attention core's memory-bound kernels from the rest. A fourth parameter for the core"
        " brings the gain into the band but moves every step time 1-3 points faster (README, 'How"
        " firm these figures are'), so the design stays as fixed before the checks."
    ),
)
def test_sp_selective_gain_within_issue_band(report):  # issue 4: 25-35% for every model
    for g in report.sp_gain:
        assert 25.0 <= g["predicted_gain_pct"] <= 35.0, g


def test_table4_per_layer_fit(report):
    """Table 4 is the calibration set: the fit should reproduce every time within 2%."""
    assert len(report.per_layer) == 5
    for r in report.per_layer:
        assert abs(r["fwd_error_pct"]) <= 2.0 and abs(r["bwd_error_pct"]) <= 2.0, r


def test_moe_zoo_long_context_target(report):  # issue 12: mean |error| <= 15% for each group
    t = report.tables["moezoo-long-context"]
    assert t["cases"] == 4 and t["mean_abs_error_pct"] <= 15.0


def test_moe_zoo_layouts_target(report):
    """Issue 12: <= 15% mean. Met since issue 21 costs the host loop of Megatron-Core's grouped
    expert GEMMs (35 us a local expert a pass, fitted on the MoE runs): the intra-node EP 8
    layouts (16 local experts a rank) had run ~40% slower than modelled."""
    assert report.tables["moezoo-qwen3-235b"]["mean_abs_error_pct"] <= 15.0


def test_megatron_core_convention_counts_causal_attention_and_active_experts():
    """Megatron-Core prints 6 B s (attention projections + k routed and the shared experts + logits)
    plus the causal half of the attention core. Qwen3-235B at 16,384 tokens, 256 sequences, 237
    TFLOP/s on 256 GPUs (the zoo's long-context table): written out by hand here."""
    case = next(c for c in presets.validation_cases() if c["name"] == "zoo-qwen3-235b-long-16384")
    h, a, g, d, fe, k, V, L, s, B = 4096, 64, 4, 128, 1536, 8, 151936, 94, 16384, 256
    attn = h * (a * d + 2 * g * d) + a * d * s / 2 * 2 + a * d * h
    mlp = h * fe * k * 3
    flops = B * s * (6 * mlp * L + 6 * attn * L + 6 * h * V)
    assert measured_step_time(case["plan"], case["measured"]) == pytest.approx(
        flops / (237e12 * 256), rel=1e-12
    )


def test_published_tflops_become_step_times():
    # Narayanan Table 1, 1T: 163 TFLOP/s per GPU on 3072 GPUs under eq. 3 -> 102.6 s per iteration
    case = next(c for c in presets.validation_cases() if c["name"] == "n21-gpt-1008b")
    assert measured_step_time(case["plan"], case["measured"]) == pytest.approx(102.6, abs=0.1)
    # NeMo 24.07: GPT-3 175B, 256 sequences of 2048 tokens at 726 tokens/s/GPU on 128 GPUs: 5.642 s
    # a step
    nemo = next(c for c in presets.validation_cases() if c["name"] == "nemo-gpt3-175b-128gpu")
    assert measured_step_time(nemo["plan"], nemo["measured"]) == pytest.approx(
        256 * 2048 / (726 * 128), rel=1e-12
    )
    assert measured_step_time(nemo["plan"], nemo["measured"]) == pytest.approx(5.642, abs=1e-3)


def test_bundled_cases_are_fully_pinned(report):
    """Every bundled run states all its knobs, as it ran: Narayanan's micro-batch, interleaving and
    DDP come from the authors' reproduction script (Megatron-LM examples/sc21/run_table_1.sh), and
    the NeMo 24.07 table's unstated SP, recompute and optimizer from that release's recipes
    (NeMo-Framework-Launcher 24.07), each named in its file. None is left to the search, which
    would pick what the model favours rather than what ran.
    """
    for c in report.cases:
        assert c.searched == [] and c.to_json()["chosen"] == {}
        if c.name.startswith("n21"):
            assert "examples/sc21/run_table_1.sh" in c.source and c.knobs_from
        if c.table == "nemo2407-fp8":
            assert c.knobs_from.startswith("NeMo 24.07 recipe")
            assert c.knobs_from_fields[:3] == ("sequence_parallel", "recompute", "zero_stage")
            assert c.estimate.config.zero_stage == 1  # distributed_fused_adam
            # the recipe's framework settings (issue 28): what its file sets is what the plan ran
            extra = c.to_json()["knobs"]
            for k in c.knobs_from_fields[3:]:
                assert extra[k] == getattr(c.plan.training, k), (c.name, k)


def test_nemo_runs_take_their_recipes_knobs(runner):
    """NeMo 24.07's Llama 3 8B ran its recipe's distributed optimizer (ZeRO-1), not the ZeRO-3 a
    search picks, and Nemotron-4 340B its recipe's selective recompute, not full recompute; each
    also its recipe's framework settings (issue 28): BF16 gradient sync (the launcher's example
    scripts, or the recipe's optim), userbuffers' TP overlap where the recipe sets it (the 70B
    runs), the unfused cross-entropy of the Llama 2 recipes, Nemotron's blocking p2p."""
    r = runner.invoke(
        main,
        ["validate", "nemo-llama3-8b-8gpu", "nemo-nemotron-340b-128gpu", "nemo-llama2-70b-64gpu"],
    )
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "nemo-llama3-8b-8gpu: sp False, rc none, zero 1, grad sync bf16 from the NeMo" in text
    assert "rc selective, zero 1, grad sync bf16, p2p overlap False from the NeMo 24.07" in text
    assert "fused CE False, TP overlap (ub) True from the NeMo 24.07 recipe" in text


def test_cli_names_where_each_runs_knobs_come_from(runner):
    r = runner.invoke(main, ["validate", "n21-gpt-76.1b", "k22-175b-full"])
    assert r.exit_code == 0, r.output
    # run_table_1.sh: MBS=2, 5 layers per virtual stage
    assert "n21-gpt-76.1b: mbs 2, vp 3 from the authors' run script" in r.output
    assert "published" in r.output.split("k22-175b-full", 1)[1].splitlines()[0]


def test_searched_knobs_are_chosen_and_reported():
    """A run that leaves knobs unstated gets them from the search, and the report names the
    choice."""
    case = dict(next(c for c in presets.validation_cases() if c["name"] == "n21-gpt-145.6b"))
    case["searched"] = ["micro_batch_size", "vp"]
    r = run_case(case)
    assert r.searched == ["micro_batch_size", "vp"]
    chosen = r.to_json()["chosen"]
    assert set(chosen) == {"micro_batch_size", "vp", "schedule"} and chosen["micro_batch_size"] >= 1
    # the search optimises over the unstated knobs, so it can only be as fast or faster than the
    # pinned run
    assert r.predicted_s <= run_case(
        next(c for c in presets.validation_cases() if c["name"] == "n21-gpt-145.6b")
    ).predicted_s * (1 + 1e-9)


def test_cli_validate_json(runner):
    r = runner.invoke(main, ["validate", "k22", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert {c["case"] for c in d["cases"]} == {
        "k22-22b-full",
        "k22-22b-sp-sel",
        "k22-175b-full",
        "k22-175b-sp-sel",
        "k22-530b-full",
        "k22-530b-sp-sel",
        "k22-1t-full",
        "k22-1t-sp-sel",
    }
    for c in d["cases"]:
        assert {"measured_step_time_s", "predicted_step_time_s", "error_pct", "source"} <= set(c)


def test_cli_validate_text(runner):
    r = runner.invoke(main, ["validate"])
    assert r.exit_code == 0 and "mean |error|" in r.output and "Table 4" in r.output


def test_unknown_case(runner):
    r = runner.invoke(main, ["validate", "gpt-9000"])
    assert r.exit_code == 1 and "no validation case or table matches gpt-9000" in r.output


def test_unknown_convention():
    plan = load_plan("gpt3-175b.yaml")
    with pytest.raises(PerfModelError, match="flop_convention"):
        measured_step_time(plan, {"tflops_per_gpu": 100, "flop_convention": "mine"})


def test_unknown_searched_knob_is_named():
    case = dict(next(c for c in presets.validation_cases() if c["name"] == "n21-gpt-1.7b"))
    case["searched"] = ["mbs_typo"]
    with pytest.raises(PerfModelError, match="mbs_typo"):
        run_case(case)


def test_cli_validate_breakdown(runner):
    r = runner.invoke(main, ["validate", "n21-gpt-76.1b", "--breakdown"])
    assert r.exit_code == 0, r.output
    assert (
        "over 1 run (MFU: predicted)" in r.output
        and "Per-iteration breakdown" in r.output
        and "DP grad sync" in r.output
    )
    r = runner.invoke(main, ["validate", "k22-22b-full", "--breakdown", "--json"])
    assert r.exit_code == 0, r.output
    case = json.loads(r.output)["cases"][0]
    assert case["estimate"]["step_time_s"] == pytest.approx(case["predicted_step_time_s"])
    assert set(case["estimate"]["breakdown_s"]) >= {"forward", "backward", "recompute", "optimizer"}


def test_error_bands_file_is_what_validate_measures(report):
    """configs/error_bands.yaml is generated by benchmarks/refresh_error_bands.py; its runs and
    their in-sample errors must not drift from a fresh validate (rerun the script after a model
    change); every run carries its out-of-sample error."""
    from perfmodel.engine.uncertainty import runs_from_report

    stored = presets.error_bands()["runs"]
    fresh = runs_from_report(report)
    assert set(stored) == set(fresh)
    for name, r in fresh.items():
        s = stored[name]
        assert {k: s[k] for k in r} == r, name
        assert isinstance(s["oos_log_error"], float) and s["refit"]


def test_validate_shows_out_of_sample_error_beside_in_sample(report, runner):
    """Issue 28: each table's error with its source left out of every fit that touches it."""
    import math

    t = report.tables["torchtitan-2412"]
    runs = [r for r in presets.error_bands()["runs"].values() if r["table"] == "torchtitan-2412"]
    oos = [abs(math.expm1(r["oos_log_error"])) * 100 for r in runs]
    assert t["oos_runs"] == len(runs) == 9
    assert t["oos_mean_abs_error_pct"] == pytest.approx(sum(oos) / len(oos))
    assert t["oos_mean_abs_error_pct"] > t["mean_abs_error_pct"]  # its clock is fitted on it
    r = runner.invoke(main, ["validate", "titan"])
    assert r.exit_code == 0 and "out of sample (its source left out of every fit)" in r.output


def test_each_result_carries_the_error_of_the_runs_nearest_in_kind():
    from perfmodel.engine.answer import estimate_or_search
    from perfmodel.engine.uncertainty import of_estimate

    bands = presets.error_bands()
    k22 = next(c for c in presets.validation_cases() if c["name"] == "k22-175b-full")["plan"]
    b = of_estimate(k22, bands, estimate_or_search(k22, presets.error_bands())[0])
    assert b.basis.startswith("dense Megatron on Ampere") and not b.unvalidated
    odd = load_plan("gpt3-175b.yaml").with_training(framework="deepspeed")
    # no published run on V100, and none of DeepSpeed's on Volta
    odd = odd.with_system(gpu=presets.gpu("v100-32gb")).with_parallel(tp=8, pp=8, cp=1)
    wide = of_estimate(odd, bands, estimate_or_search(odd, presets.error_bands())[0])
    assert wide.basis.startswith("every run") and "deepspeed on Volta" in wide.unvalidated
    assert wide.typical > b.typical


def test_plan_marks_equivalent_configurations(runner):
    r = runner.invoke(main, ["plan", "gpt3-175b.yaml", "--gpus", "512", "--json"])
    assert r.exit_code == 0
    results = json.loads(r.output)["results"]
    best = min(results, key=lambda row: row["step_time_s"])
    lo, hi = best["expected_error"]["step_time_range_s"]
    assert lo < best["step_time_s"] < hi
    for row in results:
        inside = row["step_time_s"] <= hi
        assert row["equivalent_to_best"] == inside
        assert (
            row["slower_link_step_time_s"] >= row["step_time_s"]
        )  # a slower link never speeds a step up


def test_blackwell_targets(report):
    """Issue 22: the eleven Megatron-Bridge runs on B200, GB200 and GB300 (FP8, MXFP8, NVFP4;
    Megatron-FSDP with activation offloading among them), mean |error| <= 8%, max <= 15%; one FP8
    fraction and one NVFP4 speedup for the generation, a sustained clock per part (issue 28;
    benchmarks/calibrate_gpu.py --gpu blackwell)."""
    t = report.tables["mbridge-blackwell"]
    assert t["cases"] == 11
    assert t["mean_abs_error_pct"] <= 8.0 and t["max_abs_error_pct"] <= 15.0
    formats = {c.plan.training.dtype for c in report.cases if c.table == "mbridge-blackwell"}
    assert formats == {"fp8", "mxfp8", "nvfp4"}


def test_moe_runs_target(report):
    """Issue 21: the MoE runs (the model zoo's EP/PP layouts, the 2026 runs and the DeepSeek-V3
    report's), mean |error| <= 10%, max <= 20% (issue 30: 8.3% and 19.1% once Megatron-Core's
    sort by local expert, FP8 row padding, per-expert fc2 bias, YaRN RoPE as PyTorch ops and FP8
    current scaling's amax pass are priced, cost/moe_kernels.py; they were 11.1% and 25.4%).
    Megatron-Bridge 26.04's H100 runs: Qwen3-30B-A3B within 20% (gpt-oss-120B's 12%: below)."""
    tables = ("moezoo-qwen3-235b", "moe-2026", "deepseek-v3-report")
    errs = {c.name: abs(c.error_pct) for c in report.cases if c.table in tables}
    assert len(errs) == 7
    assert sum(errs.values()) / len(errs) <= 10.0 and max(errs.values()) <= 20.0, errs
    assert errs["moe26-qwen3-30b-h100-fp8-16gpu"] <= 20.0


@pytest.mark.xfail(
    strict=True,
    reason=(
        "gpt-oss-120B on 64 H100 (Megatron-Bridge 26.04, BF16) is predicted 13% fast at the Hopper"
        " generation's one BF16 fraction (0.64, fitted on llm-foundry's and DGX Cloud's 15 runs;"
        " within 12% at the 0.60 the H100 had before it); its GB200 run is 40% fast: a cost"
        " particular to gpt-oss is missing on both (issue 30, docs/moe.md)"
    ),
)
def test_gpt_oss_on_h100(report):
    (case,) = [c for c in report.cases if c.name == "moe26-gptoss-120b-h100-bf16-64gpu"]
    assert abs(case.error_pct) <= 12.0


# the runs of shared/validation/published-2026b.yaml with a step time (issue 30): Megatron-Bridge
# 26.04's MoE runs on Blackwell, DGX Cloud v25.05's, torchtitan's Llama 3.1 405B at PP 8
PUBLISHED_2026B = ("mbridge-moe-blackwell", "dgxc-moe-2505")
TITAN_PP8 = ("titan-405b-512gpu-pp8-1f1b", "titan-405b-512gpu-pp8-interleaved")
KNOWN_MISSES = ("dgxc-deepseek-v3-h100-bf16-1024gpu", "mb2604-gptoss-120b-gb200-bf16-64gpu")
# DGX Cloud's GB200 MoE runs, of published-2026c.yaml (tests/test_validation_2026c.py), share the
# table of their recipes' H100 runs
DGXC_2026C = (
    "dgxc-grok1-314b-gb200-bf16-512gpu",
    "dgxc-deepseek-v3-gb200-bf16-512gpu",
    "dgxc-llama4-maverick-gb200-fp8-512gpu",
)


def test_published_2026b_moe_and_schedule_runs(report):
    """Issue 30: the eleven MoE and schedule runs of published-2026b.yaml each within 12% but the
    two strict xfails below (DGX Cloud's DeepSeek-V3, gpt-oss-120B on GB200); their mean: below."""
    errs = _published_2026b_errors(report)
    for name, e in errs.items():
        if name not in KNOWN_MISSES:
            assert e <= 12.0, (name, e)


def _published_2026b_errors(report) -> dict[str, float]:
    errs = {
        c.name: abs(c.error_pct)
        for c in report.cases
        if (c.table in PUBLISHED_2026B and c.name not in DGXC_2026C) or c.name in TITAN_PP8
    }
    assert len(errs) == 11
    return errs


def test_published_2026b_mean(report):
    """Their mean |error| within issue 30's 10%: 8.8% since torchtitan's async TP is modelled
    (issue 38: its 405B runs at PP 8 ran it, +10.1% and +8.0% before, +2.6% and +0.7% now); it was
    10.1%, a strict xfail, with the two known misses in it."""
    errs = _published_2026b_errors(report)
    assert sum(errs.values()) / len(errs) <= 10.0, errs


def test_deepseek_v3_as_its_report_trained_it(report):
    """Issue 30: DeepSeek-V3 at the report's layout (DualPipe, EP 64, 2,048 H800) within 10% of
    its 1,543 tokens/s a GPU, a whole-run figure met with the run's goodput. Its router family's
    load is fitted on this run alone (benchmarks/moe_imbalance.py --fit), so it is also held out of
    sample: at the family's prior, aux_loss's load, it stays within 7% (-5.7%)."""
    (case,) = [c for c in report.cases if c.table == "deepseek-v3-report"]
    tokens_per_s = case.plan.training.global_batch_size * 4096 / case.predicted_s / 2048
    assert abs(tokens_per_s / 1543 - 1) <= 0.10
    assert case.estimate.config.schedule == "dualpipe" and case.plan.training.framework == "hai-llm"
    assert case.predicted_s > case.estimate.values["step_time_s"]  # the goodput is in
    cases = {c["name"]: c for c in presets.validation_cases()}
    c = cases[case.name]
    prior = c["plan"].model.model_copy(update={"moe_load_imbalance": ROUTER_LOAD["aux_loss"]})
    held_out = run_case({**c, "plan": c["plan"].model_copy(update={"model": prior})})
    assert abs(held_out.error_pct) <= 7.0, held_out.error_pct


def test_dgx_cloud_moe_runs(report):
    """Issue 30: Grok-1 and Llama 4 Maverick as NVIDIA's DGX Cloud recipes ran them (NeMo 25.04:
    token dropping at capacity 1 with padding), each within 12%: checks, their load is the
    capacity's."""
    errs = {
        c.name: c.error_pct
        for c in report.cases
        if c.table == "dgxc-moe-2505" and c.name not in DGXC_2026C
    }
    assert len(errs) == 3
    for name in ("dgxc-grok1-314b-h100-bf16-512gpu", "dgxc-llama4-maverick-h100-bf16-512gpu"):
        assert abs(errs[name]) <= 12.0, (name, errs[name])


@pytest.mark.xfail(
    strict=True,
    reason=(
        "DeepSeek-V3 on 1,024 H100 (DGX Cloud v25.05.01) drops tokens at capacity 1 with padding"
        " (NeMo 7a8f1cc's pretrain_deepseek_v3.py, USE_TOKEN_DROP) and recomputes mla_up_proj:"
        " read so, it is predicted 18% fast with Megatron-Core's sort by local expert and MLA's"
        " unfused YaRN RoPE and Q/K/V copies priced (15% at the H100's earlier BF16 fraction,"
        " 0.60); what else Megatron-Core 0.12 runs on Hopper is not found (issue 30, docs/moe.md)"
    ),
)
def test_dgx_cloud_deepseek_v3(report):
    (case,) = [c for c in report.cases if c.name == "dgxc-deepseek-v3-h100-bf16-1024gpu"]
    assert abs(case.error_pct) <= 12.0


def test_megatron_bridge_moe_on_blackwell(report):
    """Issue 30: Megatron-Bridge 26.04's DeepSeek-V3 and Qwen3 runs on B200, GB200 and GB300
    (router forced to balance, HybridEP), each within 12% and within 10% on average."""
    errs = {
        c.name: abs(c.error_pct)
        for c in report.cases
        if c.table == "mbridge-moe-blackwell" and "gptoss" not in c.name
    }
    assert len(errs) == 5
    assert max(errs.values()) <= 12.0 and sum(errs.values()) / len(errs) <= 10.0, errs


@pytest.mark.xfail(
    strict=True,
    reason=(
        "gpt-oss-120B on 64 GB200 (BF16, EP 64 in one NVL72 rack) is predicted 40% fast at the"
        " switches its V2 preset runs (router forced to balance, EP overlap on), with its"
        " per-expert fc2 bias and unfused YaRN RoPE priced; the same model on H100 is 13% fast;"
        " Blackwell's BF16 GEMM fraction is assumed, not fitted (issue 30, docs/moe.md)"
    ),
)
def test_megatron_bridge_gpt_oss_on_gb200(report):
    (case,) = [c for c in report.cases if c.name == "mb2604-gptoss-120b-gb200-bf16-64gpu"]
    assert abs(case.error_pct) <= 12.0
