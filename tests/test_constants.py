"""Fitted constants are shipped as their calibration scripts compute them (issue 28): a shipped
value, or a leave-one-out figure quoted beside it, that drifts from what its script prints fails
here. Every fit of benchmarks/calibrate_gpu.py, calibrate_overheads.py and
calibrate_internevo_network.py is rerun: each prices a run once per grid value and searches the
grid by branch and bound (benchmarks/gridfit.py), and the overhead fits price each run once
(calibrate_overheads.Steps), so the whole file takes seconds, not the minutes the scripts took.
So are calibrate_cdna.py's CDNA fractions, calibrate_host.py's host time per kernel (at the shipped
value and its grid neighbours), moe_imbalance.py's router load and primus_vmin.py's
rebuilt tables.

Not rerun here: the A100's Table 4 fit (benchmarks/calibrate_a100.py, a 1,232-point grid of
per-layer times), and the allocator's reserved-over-allocated ratio (calibrate_memory.py)."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from perfmodel.inputs import presets
from perfmodel.review.validate import run_case
from perfmodel.specs.framework import PROFILES

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import calibrate_cdna as cc  # noqa: E402
import calibrate_gpu as cg  # noqa: E402
import calibrate_host as ch  # noqa: E402
import calibrate_internevo_network as cin  # noqa: E402
import calibrate_overheads as co  # noqa: E402
import gridfit  # noqa: E402
import moe_imbalance as mi  # noqa: E402
import primus_vmin as pv  # noqa: E402

from perfmodel.specs.router import ROUTER_LOAD  # noqa: E402


def _block(path: Path, key: str) -> str:
    """The text of one top-level entry of a YAML file (its comments included)."""
    text = path.read_text()
    start = text.index(f"\n{key}:") + 1
    rest = re.search(r"\n[a-z0-9][\w-]*:", text[start + 1 :])
    return text[start : start + 1 + rest.start()] if rest else text[start:]


GPUS = ROOT / "configs" / "hardware" / "gpus.yaml"


def _quoted(text: str, pattern: str) -> tuple[float, ...]:
    m = re.search(pattern, " ".join(text.replace("#", " ").split()))
    assert m, f"no quote matching {pattern!r}"
    return tuple(float(x) for x in m.groups())


# --- gridfit: the search finds np.argmin of the whole grid --------------------------------------
def test_branch_and_bound_finds_the_grids_argmin():
    """On errors that fall along the grid (each run's a decreasing function of the value), the
    bound's search returns np.argmin of the mean |error| over every grid value, first index among
    ties, while pricing fewer values; an error that rises breaks the premise and the whole grid is
    searched."""
    rng = np.random.default_rng(0)
    grid = [round(0.3 + 0.01 * i, 2) for i in range(51)]

    def falling(a: np.ndarray, b: np.ndarray) -> gridfit.Errors:
        return gridfit.Errors(lambda n, v: a[int(n[1:])] + b[int(n[1:])] * (0.55 - v) / v)

    names = [f"r{i}" for i in range(6)]
    for _ in range(40):
        err = falling(rng.uniform(-40, 40, 6), rng.uniform(5, 60, 6))
        i, _score = gridfit.argmin(grid, names, err)
        full = np.array([[err.at(n, v) for v in grid] for n in names])
        assert i == int(np.argmin(np.abs(full).mean(axis=0)))
    counted = gridfit.Errors(lambda n, v: 10 * (0.5 - v))
    gridfit.argmin(grid, ["x"], counted)
    assert len(counted.table) < len(grid) // 2
    # an error that rises between searched values (0.30 -> 0.55): the whole grid is searched
    bumpy = gridfit.Errors(lambda n, v: {0.3: 10.0, 0.8: -10.0, 0.55: 20.0, 0.37: 0.0}.get(v, 15))
    assert gridfit.argmin(grid, ["x"], bumpy) == (7, 0.0)


# --- calibrate_gpu ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def h100():
    return cg.report("h100-sxm", seed=presets.gpu("h100-sxm").gemm_efficiency)


@pytest.fixture(scope="module")
def hopper_fp8():
    return cg.report("h100-sxm-fp8", seed=presets.gpu("h100-sxm").fp8_gemm_efficiency)


@pytest.fixture(scope="module")
def clock():
    return cg.report("h100-sxm-96gb", seed=presets.gpu("h100-sxm-96gb").sustained_clock)


@pytest.fixture(scope="module")
def blackwell():
    # the fit alone: its leave-one-out refits would price the 405B runs' 384-micro-batch pipelines
    # again at each new fraction (a minute); the presets quote the in-sample figures, the script
    # prints each run's leave-one-out error
    gb200 = presets.gpu("gb200")
    seeds = {
        "fp8": presets.gpu("gb300").fp8_gemm_efficiency,
        "clocks": {k: presets.gpu(k).sustained_clock for k in cg.BLACKWELL},
        # the NVFP4 speedup the presets' fractions carry: NVFP4 over FP8 achieved FLOP/s
        "ratio": round(
            gb200.fp4_gemm_efficiency
            * gb200.peak("nvfp4")
            / (gb200.fp8_gemm_efficiency * gb200.peak("fp8")),
            2,
        ),
    }
    return cg.blackwell_report(loo=False, seeds=seeds)


def test_hopper_bf16_and_fp8_fractions_are_what_their_script_fits(h100, hopper_fp8):
    """One BF16 and one FP8 GEMM fraction for the Hopper chip: the H100's, shared by the H200, the
    H800 and the 500 W H100 (whose clock is its own)."""
    for part in ("h100-sxm", "h200", "h800", "h100-sxm-96gb"):
        g = presets.gpu(part)
        assert g.gemm_efficiency == pytest.approx(h100["value"]), part
        assert g.fp8_gemm_efficiency == pytest.approx(hopper_fp8["value"]), part
    block = _block(GPUS, "h100-sxm")
    assert _quoted(block, r"BF16 leave-one-out mean ([\d.]+)%") == (round(h100["loo_mean"], 1),)
    assert _quoted(block, r"FP8 leave-one-out mean ([\d.]+)%") == (
        round(hopper_fp8["loo_mean"], 1),
    )


def test_the_500w_clock_is_what_its_script_fits(clock):
    part, base = presets.gpu("h100-sxm-96gb"), presets.gpu("h100-sxm")
    assert part.sustained_clock == pytest.approx(clock["value"])
    for k in cg.SHARED:
        assert getattr(part, k) == getattr(base, k), k
    quoted = _quoted(_block(GPUS, "h100-sxm-96gb"), r"clock leave-one-out mean ([\d.]+)%")
    assert quoted == (round(clock["loo_mean"], 1),)


def test_blackwell_fraction_clocks_and_speedup_are_what_their_script_fits(blackwell):
    """One FP8 fraction and one NVFP4 speedup for the Blackwell generation (B300 as GB300, the
    same chip); each part's sustained clock its own."""
    for part in (*cg.BLACKWELL, "b300"):
        g = presets.gpu(part)
        assert g.fp8_gemm_efficiency == pytest.approx(blackwell["fp8"]), part
        clock = blackwell["clocks"].get(part, 1.0)
        assert g.sustained_clock == pytest.approx(clock), part
        speedup = cg.fp4_fraction(part, blackwell["fp8"], blackwell["ratio"])
        assert g.fp4_gemm_efficiency == pytest.approx(speedup, abs=5e-4), part
        errs = np.abs([e for _, e in blackwell["runs"]])
        quoted = _quoted(_block(GPUS, part), r"Blackwell in-sample mean ([\d.]+)%, max ([\d.]+)%")
        assert quoted == (round(errs.mean(), 1), round(errs.max(), 1))


# --- calibrate_overheads ---------------------------------------------------------------------
@pytest.mark.parametrize("profile", sorted(co.FITS))
def test_framework_overheads_are_what_their_script_fits(profile):
    r = co.report(profile)
    for k, v in r["params"].items():
        assert PROFILES[profile][k] == pytest.approx(v), (profile, k)
    if profile == "megatron-core":
        tables = np.array([c["table"] for c in r["cases"]])
        nemo = np.abs(r["loo"][tables == "nemo2407-fp8"]).mean()
        source = (ROOT / "perfmodel" / "specs" / "framework.py").read_text()
        assert _quoted(source, r"NeMo runs' leave-one-out mean ([\d.]+)%") == (round(nemo, 1),)


def test_the_overhead_fit_adds_overheads_as_the_model_does():
    """calibrate_overheads prices each run once and adds the overheads as arrays; at the shipped
    values that sum is the full estimate's step time."""
    tables, _ = co.FITS["megatron-core"]
    cases = [c for c in presets.validation_cases() if c.get("table") in tables]
    steps = co.Steps(cases)
    shipped = {k: PROFILES["megatron-core"][k] for k in co.OVERHEADS}
    at = steps.errors()[:, steps.index(shipped)]
    for c, e in zip(cases, at):
        r = run_case(co.with_params(c, shipped))
        assert e == pytest.approx(r.error_pct, abs=1e-9), c["name"]


def test_the_per_expert_host_time_is_what_its_script_fits():
    r = co.moe_report(seed=PROFILES["megatron-core"]["expert_call_overhead_s"])
    assert PROFILES["megatron-core"]["expert_call_overhead_s"] == pytest.approx(r["value"])
    source = (ROOT / "perfmodel" / "specs" / "framework.py").read_text()
    before, after, loo = _quoted(
        source, r"mean \|error\| ([\d.]+)% -> ([\d.]+)%, leave-one-out ([\d.]+)%"
    )
    fitted = np.mean([abs(e) for _, e in r["runs"]])
    assert (before, after, loo) == (
        round(r["without"], 1),
        round(fitted, 1),
        round(r["loo_mean"], 1),
    )


# --- calibrate_internevo_network -------------------------------------------------------------
def test_internevos_network_efficiency_is_what_its_script_fits():
    r = cin.report(seed=presets.link("roce-100g-x4").efficiency)
    assert presets.link("roce-100g-x4").efficiency == pytest.approx(r["value"])
    figures = (round(r["loo_mean"], 1), round(r["loo_max"], 1))
    links = _block(ROOT / "configs" / "hardware" / "links.yaml", "roce-100g-x4")
    assert _quoted(links, r"leave-one-out mean ([\d.]+)%, max ([\d.]+)%") == figures
    doc = (ROOT / "docs" / "amd-and-scale.md").read_text()
    assert _quoted(doc, r"leave-one-out mean ([\d.]+)%, max ([\d.]+)%") == figures


def test_the_cdna_fractions_are_what_their_script_fits():
    """benchmarks/calibrate_cdna.py on AMD's own runs: CDNA 3's BF16 and FP8 fractions (the
    MI325X's), CDNA 4's (the MI355X's) and the MI350X's clock; each part's preset fields are
    calibrate_cdna.gpu_fields of them (4 decimals)."""
    f = cc.fit(cc.fitted_cases())
    for key in cc.CDNA3 + cc.CDNA4:
        g = presets.gpu(key)
        for k, v in cc.gpu_fields(key, f).items():
            assert getattr(g, k) == pytest.approx(v, abs=1e-4), (key, k)


def test_the_aux_free_bias_load_is_what_its_script_fits():
    """benchmarks/moe_imbalance.py --fit: the family's one dropless run as it trained (the
    DeepSeek-V3 report's), on the script's grid."""
    cases = {c["name"]: c for c in presets.validation_cases()}
    runs = [cases[n] for n in mi.FAMILY_RUNS["aux_free_bias"]]
    grid = [round(1.2 + 0.01 * i, 2) for i in range(81)]
    assert ROUTER_LOAD["aux_free_bias"] == mi.fit_family(runs, grid)


def test_primus_tables_rebuilt_give_primus_own_simulator_figures():
    """benchmarks/primus_vmin.py rebuilds Primus-pipeline's zbv-formatted, V-Half and V-Min tables:
    at F = B = W and no transfer time they take what Primus's simulator prints for p 8, m 32 (the
    blog's simulator_shell.png): 1F1B 117, ZBV 99.5, V-Half 104.5, V-Min 109 (thousand units)."""
    got = pv.ratios(8, 32, 1.0, 1.0, 1.0, (0.0, 0.0, 0.0), 0.0)
    assert got == pytest.approx({"zbv": 99.5 / 117, "v-half": 104.5 / 117, "v-min": 109 / 117})


# --- calibrate_host ----------------------------------------------------------------------------
def test_the_host_time_per_kernel_is_what_its_script_fits():
    """The deepspeed profile's kernel_host_s is the least mean |error| on vTrain's runs against its
    grid neighbours (2 us apart) and no host time; the quoted figures are those the script prints
    at it (the out-of-sample refits need the whole grid: the script's run)."""
    shipped = PROFILES["deepspeed"]["kernel_host_s"]
    step = ch.GRID[1] - ch.GRID[0]
    assert shipped in ch.GRID
    r = ch.report([0.0, shipped - step, shipped, shipped + step])
    assert r["value"] == shipped
    source = (ROOT / "perfmodel" / "specs" / "framework_zero.py").read_text()
    before, after = _quoted(source, r"mean \|error\| ([\d.]+)% -> ([\d.]+)%")
    assert (before, after) == (round(r["curve"][0][1], 1), round(r["mean_abs_error_pct"], 1))
    pairs = _quoted(source, r"ordered right [\d.]+% -> ([\d.]+)%")
    assert pairs == (round(100 * r["pair_accuracy"], 1),)
