"""Fitted constants are shipped as their calibration scripts compute them (issue 28): a shipped
value or a quoted leave-one-out figure that drifts from its script fails here. Only the fits that
run in seconds are rerun (the 500 W H100's clock factor, megatron-core's per-expert host time, the
AMD CDNA fractions);
the others take minutes (benchmarks/calibrate_overheads.py, calibrate_gpu.py --gpu h100-sxm and
--gpu blackwell) and are checked by rerunning them by hand."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from perfmodel.inputs import presets
from perfmodel.specs.framework import PROFILES

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import calibrate_cdna as cc  # noqa: E402
import calibrate_gpu as cg  # noqa: E402
import calibrate_overheads as co  # noqa: E402
import moe_imbalance as mi  # noqa: E402
import primus_vmin as pv  # noqa: E402

from perfmodel.specs.router import ROUTER_LOAD  # noqa: E402


@pytest.fixture(scope="module")
def titan():
    every = [c for c in presets.validation_cases() if "measured" in c]
    tables = cg.FITS["h100-sxm-96gb"][1]
    return [c for c in every if c["table"] in tables and cg.on_gpu(c, "h100-sxm-96gb", False)]


def test_the_500w_clock_is_what_its_script_fits(titan):
    value, _ = cg.fit(titan, "h100-sxm-96gb", "clock")
    part, base = presets.gpu("h100-sxm-96gb"), presets.gpu("h100-sxm")
    for k in cg.SCALED:
        assert getattr(part, k) == pytest.approx(value * getattr(base, k), abs=1e-4), k


def test_the_clocks_quoted_leave_one_out_is_what_its_script_prints(titan):
    text = (ROOT / "configs" / "hardware" / "gpus.yaml").read_text()
    block = text[text.index("h100-sxm-96gb:") :]
    quoted = float(re.search(r"leave-one-out mean ([\d.]+)%", block).group(1))
    loo = []
    for i, c in enumerate(titan):
        v, _ = cg.fit(titan[:i] + titan[i + 1 :], "h100-sxm-96gb", "clock")
        loo.append(abs(cg.errors([c], "h100-sxm-96gb", "clock", v)[0]))
    assert round(float(np.mean(loo)), 1) == quoted


def test_the_per_expert_host_time_is_what_its_script_fits():
    cases = [c for c in presets.validation_cases() if c.get("table") in co.MOE_TABLES]
    assert PROFILES["megatron-core"]["expert_call_overhead_s"] == pytest.approx(
        co._fit_expert(cases)
    )


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
