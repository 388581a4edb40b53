"""Physical ceilings as data, enforced (issue 39): every GPU preset's best measured rates with their
sources (configs/hardware/ceilings.yaml), no kernel or collective of any prediction above them,
calibrated or not, and fits that stay within them."""

import math
from pathlib import Path

import numpy as np
import pytest

from perfmodel.cost.roofline import kernel_time
from perfmodel.cost.transformer import decoder_layer
from perfmodel.engine.answer import estimate_or_search
from perfmodel.engine.blocks import Setting, block_ops
from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.engine.mesh import link_rate
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets
from perfmodel.inputs.usual_links import _usual_links
from perfmodel.review import calibrate_ceilings as cc
from perfmodel.review.measured_run import MeasuredRun
from perfmodel.specs.calibrated_plan import apply_factors, with_calibration
from perfmodel.specs.calibration import Calibration

GPUS = presets.preset_names("gpus")
PLANS = presets.preset_names("plans")
# formats no training step of the model runs its GEMMs in (fp32 and tf32 master math, MX6/MX4)
NO_CEILING = {"fp32", "tf32", "mxfp6", "mxfp4"}


def _plan(name: str):
    return presets.plan_from_mapping(presets.bundled_plan(name), name)


@pytest.mark.parametrize("name", GPUS)
def test_every_preset_has_sourced_ceilings_below_its_data_sheet(name):
    gpu = presets.gpu(name)
    c = gpu.ceilings
    assert c is not None, name
    for dtype in set(gpu.peak_flops_per_s) - NO_CEILING:
        ceiling = c.gemm_rate(dtype)
        assert ceiling is not None, (name, dtype)
        # a measured best is below the data sheet's peak, and says where it comes from
        assert 0.3 * gpu.peak(dtype) < ceiling.rate < gpu.peak(dtype), (name, dtype)
        assert ceiling.source.startswith(("MAMF", "derived")), ceiling.source
    assert c.hbm.rate <= gpu.hbm_bandwidth_bytes_per_s and c.hbm.source
    for tier in ("intra", "inter"):
        share = c.link_fraction(tier)
        assert share is None or 0.5 < share < 1.1, (name, tier, share)


def test_ceilings_are_the_published_figures():
    """SPEC 14's starting points, read into the presets."""
    h100, b200 = presets.gpu("h100-sxm").ceilings, presets.gpu("b200").ceilings
    assert h100.gemm_rate("bf16").rate == pytest.approx(794.5e12)
    assert h100.gemm_rate("fp16").rate == pytest.approx(794.5e12)  # the same tensor cores
    assert h100.gemm_rate("fp8").rate == pytest.approx(1402.6e12)
    assert b200.gemm_rate("mxfp8").rate == pytest.approx(3432.5e12)  # MXFP8 on FP8's
    assert b200.all_reduce_intra.rate == pytest.approx(846e9)
    assert h100.all_reduce_intra.fraction == pytest.approx(480 / 450)  # NVLS passes the link
    assert presets.gpu("h800").ceilings.all_to_all_intra.rate == pytest.approx(158e9)
    assert "derived" in presets.gpu("gb300").ceilings.gemm_rate("bf16").source


def test_presets_past_a_ceiling_are_the_known_ones():
    """The uncalibrated presets' best rates (efficiency x peak x sustained clock) against the
    ceilings: only the Blackwell Ultra BF16 GEMMs (0.80 of 2.25 and 2.5 PFLOP/s against 1,769 and
    1,965 measured) pass one, and are clamped where the rate is formed."""
    past = set()
    for name in GPUS:
        gpu = presets.gpu(name)
        for dtype in ("bf16", "fp8", "nvfp4"):
            ceiling = gpu.ceilings.gemm_rate(dtype)
            if ceiling is None or dtype not in gpu.peak_flops_per_s:
                continue
            eff = gpu.gemm_efficiency if dtype == "bf16" else gpu.low_precision_efficiency(dtype)
            if gpu.peak(dtype) * gpu.sustained_clock * eff > ceiling.rate:
                past.add((name, dtype))
    amd = {"intra_node_link": "infinity-fabric", "inter_node_link": "roce-400g"}
    for name in GPUS:
        gpu = presets.gpu(name)
        usual = _usual_links(gpu.name) or amd
        if name in ("mi350x", "mi355x"):
            usual = {**amd, "intra_node_link": "infinity-fabric-4"}
        for tier, key in (("intra", "intra_node_link"), ("inter", "inter_node_link")):
            share = gpu.ceilings.link_fraction(tier)
            if share and presets.link(usual[key]).efficiency > share:
                past.add((name, usual[key]))
    assert {p for p in past if not p[1].startswith("infinity")} == {
        ("b300", "bf16"),
        ("gb300", "bf16"),
    }
    # AMD's xGMI preset (0.75) sits at RCCL's best measured share of one link (48 of 64 GB/s)
    assert not {p for p in past if p[1].startswith("infinity")}


def test_kernel_time_clamps_at_the_ceiling_array_safe():
    flops = np.array([1e12, 1e12, 1e12])
    eff = np.array([0.5, 1.0, 4.0])  # the last, a calibrated efficiency past the data sheet
    t = kernel_time(flops, 1.0, 1e15, 1e12, eff, 1.0, 0.0, flops_ceiling=0.8e15)
    np.testing.assert_allclose(t, [1e12 / 0.5e15, 1e12 / 0.8e15, 1e12 / 0.8e15])
    # HBM likewise, and without ceilings nothing changes
    t = kernel_time(0.0, np.array([1e9, 1e9]), 1e15, 1e12, 1.0, np.array([0.5, 3.0]), 0.0)
    np.testing.assert_allclose(t, [2e-3, 1e9 / 3e12])
    t = kernel_time(0.0, 1e9, 1e15, 1e12, 1.0, 3.0, 0.0, bytes_ceiling=1e12)
    assert float(t) == pytest.approx(1e-3)


def test_link_rate_holds_a_calibrated_link_at_its_ceiling():
    plan = _plan("llama3-8b-h100")
    s = plan.system
    assert link_rate(s.intra_node_link, s.gpu, "intra") == pytest.approx(450e9 * 0.85)
    fast = apply_factors(plan, {"comm": 0.01}).system
    assert link_rate(fast.intra_node_link, fast.gpu, "intra") == pytest.approx(480e9)
    assert link_rate(fast.inter_node_link, fast.gpu, "inter") == pytest.approx(0.955 * 50e9)


@pytest.mark.parametrize("name", PLANS)
def test_every_bundled_plan_runs_its_kernels_under_the_ceilings(name):
    """Each GEMM (and attention core) of a decoder layer at the plan's answer: FLOPs over its
    forward seconds at most the format's best measured matmul; and the MFU under that share."""
    plan = _plan(name)
    e, chosen = estimate_or_search(plan, presets.error_bands())
    plan, cfg = plan.with_parallel(**chosen), e.config
    gpu = plan.system.gpu
    ceiling = max(gpu.flops_ceiling(plan.training.dtype), gpu.flops_ceiling("bf16"))
    ops, _ = block_ops(
        Setting.of(plan),
        decoder_layer,
        np.array([float(cfg.tp)]),
        np.array([float(cfg.micro_batch_size)]),
        np.array([cfg.sequence_parallel]),
        np.array([float(cfg.cp)]),
        np.array([float(cfg.ep)]),
    )
    # (flash attention's FLOPs count the masked half its kernel skips; its rate is the GEMM
    # clamp's too, test_kernel_time_clamps_at_the_ceiling_array_safe)
    timed = [op for op in ops if op.kind == "gemm"]
    assert timed
    for op in timed:
        rate = np.asarray(op.flops, dtype=float) / np.asarray(op.fwd_s, dtype=float)
        assert np.all(rate <= ceiling * (1 + 1e-9)), (name, op.name, rate / 1e12)
    share = gpu.flops_ceiling(e.mfu_peak) / gpu.peak(e.mfu_peak)
    assert 0 < e.values["mfu"] <= share


def test_a_calibration_past_a_ceiling_is_refused_by_name():
    """A hand-edited CAL.yaml (compute x0.3 on B200 BF16 printed MFU 110.9%; x0.018, 256%) is
    refused, naming the factor, the rate and the ceiling; at the fastest factor a fit may reach,
    the MFU stays under the ceiling's share of peak."""
    plan = _plan("llama3-8b-h100")
    for factor in (0.3, 0.018):
        cal = Calibration(factors={"compute": factor}, fitted_from="step_times", runs=[])
        with pytest.raises(PerfModelError) as e:
            with_calibration(plan, cal)
        assert str(e.value).startswith(f"calibration: compute x{factor:.3f}: BF16 GEMMs would")
        assert "past the ceiling of 794.5 TFLOP/s (MAMF" in str(e.value)
    lo = math.exp(cc.floors([plan], ["compute"])["compute"])
    cal = Calibration(factors={"compute": round(lo, 4) + 1e-4}, fitted_from="x", runs=[])
    e = estimate(with_calibration(plan, cal), resolve_config(plan))
    assert 0 < e.values["mfu"] <= 794.5 / 989.4


def test_fits_stay_within_the_ceilings():
    """The lowest factor a fit may reach keeps every rate it moves at most its ceiling; a preset
    already past one is not slowed (its floor is 1)."""
    plan = _plan("llama3-8b-h100")
    lo = cc.floors([plan], ["compute", "comm", "overhead_s", "gemm_bf16"])
    assert lo["overhead_s"] == -math.inf
    gpu = plan.system.gpu
    # the H100's BF16 GEMMs: 0.64 of peak against 0.803 measured at best
    assert math.exp(lo["gemm_bf16"]) == pytest.approx(0.64 * 989.4 / 794.5)
    assert math.exp(lo["compute"]) >= math.exp(lo["gemm_bf16"])
    assert math.exp(lo["comm"]) == pytest.approx(max(0.85 * 450 / 480, 0.85 * 50 / 47.75))
    b300 = plan.model_copy(
        update={"system": plan.system.model_copy(update={"gpu": presets.gpu("b300")})}
    )
    assert cc.floors([b300], ["gemm_bf16"])["gemm_bf16"] == 0.0
    assert gpu.flops_ceiling("fp32") == math.inf


def test_check_factors_names_the_factor_and_the_rate():
    plan = _plan("llama3-8b-h100")
    run = MeasuredRun("ours", plan, 1.0, field="runs[0].measured.step_time_s")
    cal = Calibration(factors={"comm": 0.018}, fitted_from="step_times", runs=[])
    with pytest.raises(PerfModelError) as e:
        cc.check_factors(cal, [run])
    msg = str(e.value)
    assert msg.startswith("comm x0.018: the NVLink 4 + NVSwitch (H100) would run at 21,250 GB/s")
    assert "past the ceiling of 480 GB/s" in msg and "fitted on ours" in msg
    assert msg.endswith("check runs[0].measured.step_time_s 1")


# ---------------------------------------------------------------- calibrated bands (item 3)


def _one_run(tmp_path, seconds: float):
    """The impossible-step reproducer's plan measured at ``seconds``, calibrated."""
    from click.testing import CliRunner

    from perfmodel.cli import main

    folder = Path(__file__).parent / "data" / "repro" / "calibrate_accepts_impossible_step"
    (tmp_path / "plan.yaml").write_text((folder / "plan.yaml").read_text())
    runs = (folder / "runs.yaml").read_text().replace("3.1", str(seconds))
    (tmp_path / "runs.yaml").write_text(runs)
    out = tmp_path / "cal.yaml"
    r = CliRunner().invoke(main, ["calibrate", str(tmp_path / "runs.yaml"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    return r.output, out


def test_one_run_band_is_the_one_run_transfer_error(tmp_path):
    """After a one-run calibration the band of another layout is the one-run transfer error on
    published stacks for a change of layout (it stayed the uncalibrated +-9%), CAL.yaml records
    every kind of change with its basis, and every output names it."""
    import json

    import yaml
    from click.testing import CliRunner

    from perfmodel.cli import main
    from perfmodel.review import calibrate_bands as cb

    said, out = _one_run(tmp_path, 9.5)
    data = yaml.safe_load(out.read_text())
    assert set(data["out_of_sample"]) == {
        "scale",
        "layout",
        "model",
        "format",
        "gpu",
        "none",
        "all",
    }
    assert data["band_basis"]["layout"] == cb.TRANSFER and data["band_basis"]["none"] == cb.OWN
    assert "(one-run transfer error on published stacks)" in " ".join(said.split())
    plan = str(tmp_path / "plan.yaml")
    args = ["estimate", plan, "--calibration", str(out), "--json"]
    j = json.loads(CliRunner().invoke(main, [*args, "--tp", "2", "--dp", "32"]).output)
    moved = presets.calibration_bands()["typical"]["layout"]
    assert j["expected_error"]["typical_half_width"] == pytest.approx(math.log1p(moved), rel=1e-3)
    assert "calibrated on 1 run: the one-run transfer error" in j["expected_error"]["basis"]
    plain = json.loads(CliRunner().invoke(main, ["estimate", plan, "--json"]).output)
    assert (
        j["expected_error"]["typical_half_width"] != plain["expected_error"]["typical_half_width"]
    )


def test_the_measured_step_is_inside_its_own_band(tmp_path):
    """The calibration run's own configuration: the band holds the measured step (the runs' own
    error, at least the one-run transfer's), whether the fit moved the model or not."""
    import json

    from click.testing import CliRunner

    from perfmodel.cli import main

    for seconds in (5.5, 9.5):  # within the model's scatter (the factor stays 1), and beyond
        _said, out = _one_run(tmp_path, seconds)
        args = ["estimate", str(tmp_path / "plan.yaml"), "--calibration", str(out), "--json"]
        j = json.loads(CliRunner().invoke(main, args).output)
        low, high = j["expected_error"]["step_time_range_s"]
        assert low <= seconds <= high, (seconds, low, high)
        assert "runs' own error" in j["expected_error"]["basis"]


def test_a_run_left_beyond_the_scatter_is_said():
    from perfmodel.review import calibrate_bands as cb
    from perfmodel.specs.calibration import CalibrationRun

    row = CalibrationRun(
        name="far",
        measured_step_time_s=1.0,
        predicted_step_time_s=1.5,
        calibrated_step_time_s=1.3,
        residual=math.log(1.3),
    )
    cal = Calibration(factors={"compute": 1.1}, fitted_from="step_times", runs=[row])
    out = cb.with_bands(cal, 0.135)
    said = [n for n in out.notes if n.startswith("far: calibrated 1.3 s, +30.0%")]
    assert said and "beyond the model's per-run scatter (13.5%)" in said[0]
    assert out.out_of_sample["none"] == pytest.approx(0.3)
