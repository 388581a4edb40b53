"""The clock a board power limit leaves (cost/clock.py): the prior for a power-limited part's
sustained clock before any run (issue 38: torchtitan's 500 W H100, left out of its own fit)."""

import pytest

from perfmodel.cost.clock import power_limited_clock
from perfmodel.inputs import presets


def test_worked_number_500_of_700_watts():
    """(500 / 700)^(1/3) = 0.894: the Grand Teton H100's limit against the H100 SXM's 700 W."""
    assert power_limited_clock(500, 700) == pytest.approx(0.8939, abs=1e-4)
    gpu = presets.gpu("h100-sxm-96gb")
    assert (gpu.tdp_w, gpu.peak_power_w) == (500, 700)
    # the fitted clock sits below the bound, as leakage leaves less than the cube law
    assert gpu.sustained_clock < power_limited_clock(gpu.tdp_w, gpu.peak_power_w)


def test_no_limit_below_the_peaks_power_leaves_the_clock():
    assert power_limited_clock(700, 700) == 1.0
    assert power_limited_clock(1000, 700) == 1.0  # a higher limit does not raise the clock
    assert power_limited_clock(None, 700) == 1.0
    assert power_limited_clock(500, None) == 1.0
