"""The clock a board power limit leaves: a prior for GPU.sustained_clock before any run.

A chip's switching power is alpha C V^2 f (CMOS dynamic power; Rabaey, Chandrakasan and
Nikolic, "Digital Integrated Circuits", 2nd ed., 2003, Sec. 5.5), and in its DVFS range the
supply voltage follows the clock, so the power goes as f^3. A part whose data-sheet peaks are
quoted at P0 watts and that runs under a limit of P < P0 sustains at most (P / P0)^(1/3) of that
clock through a power-bound step (dense GEMMs); leakage, which does not fall with the clock,
leaves less. So the figure is an upper bound on the clock, for a part none of whose runs has
fitted it. Units: a fraction of the data sheet's clock.

Example: Meta's Grand Teton H100 (96 GB HBM2e) under a 500 W limit, with the H100 SXM's peaks
(700 W): (500 / 700)^(1/3) = 0.894; torchtitan's nine runs on it fit 0.80
(configs/hardware/gpus.yaml)."""

from __future__ import annotations

import math


def power_limited_clock(limit_w: float | None, peak_power_w: float | None) -> float:
    """(limit / peak power)^(1/3), at most 1; 1.0 where either is unknown."""
    if not limit_w or not peak_power_w:
        return 1.0
    ratio: float = limit_w / peak_power_w
    return min(1.0, math.pow(ratio, 1.0 / 3.0))
