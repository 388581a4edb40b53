"""A calibration on one run of a stack the model gets badly wrong carries to that stack's other
runs (issue 32): torchtitan's Llama 3 8B on 8 power-limited B200, held back from every fit
(examples/calibration/torchtitan-b200, pytorch/ao's published table). The model predicts each run
2.5 to 2.7 times faster than it ran; calibrated on any one of them, the other formats come within
10%. And where one factor cannot carry a change, it is not hidden: NVIDIA's 2025 DeepSeek-V3 recipe
on GB200 in BF16 and MXFP8 (examples/calibration/mbridge-dsv3-gb200)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from perfmodel.review import calibrate as cal
from perfmodel.review.calibrate_runs import load_runs

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "calibration"


def transfer(stack: str) -> tuple[list[float], list[float]]:
    """(each run's |error| uncalibrated, the mean |error| of the others calibrated on each run)."""
    runs, _ = load_runs(str(EXAMPLES / stack / "runs.yaml"))
    before = [abs(cal.step_time(r.plan, {}) / r.step_s - 1) for r in runs]
    after = []
    for i, one in enumerate(runs):
        theta = cal.fit_theta([one], None)[0]
        others = runs[:i] + runs[i + 1 :]
        after.append(
            float(np.mean([abs(cal.step_time(o.plan, theta) / o.step_s - 1) for o in others]))
        )
    return before, after


def test_torchtitan_b200_one_run_carries_to_the_other_formats() -> None:
    before, after = transfer("torchtitan-b200")
    assert min(before) > 0.55  # predicted at least 2.2 times too fast (2.5 to 2.7)
    assert max(after) < 0.10 and np.mean(after) < 0.08


def test_dsv3_gb200_one_factor_does_not_carry_bf16_to_mxfp8() -> None:
    """The model finds MXFP8 no faster than BF16 for this recipe; measured, it is 28% faster. One
    compute factor fitted on either run misses the other by over 15%: the calibrated band says
    that a change of format has no out-of-sample error behind it."""
    before, after = transfer("mbridge-dsv3-gb200")
    assert before[0] > 0.25 and before[1] < 0.1
    assert min(after) > 0.15
    runs, _ = load_runs(str(EXAMPLES / "mbridge-dsv3-gb200" / "runs.yaml"))
    assert runs[0].plan.training.dtype != runs[1].plan.training.dtype
