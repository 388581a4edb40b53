"""A calibration on one run of a stack the model gets badly wrong carries to that stack's other
runs (issue 32): torchtitan's Llama 3 8B on 8 power-limited B200, held back from every fit
(examples/calibration/torchtitan-b200, pytorch/ao's published table). The model predicts each run
about 2.3 times faster than it ran; calibrated on any one of them, the other formats come within
10%. And a change of format inside the model's scatter carries too: NVIDIA's 2025 DeepSeek-V3
recipe on GB200 in BF16 and MXFP8 (examples/calibration/mbridge-dsv3-gb200)."""

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
    assert min(before) > 0.55  # predicted at least 2.2 times too fast (2.3 each)
    assert max(after) < 0.10 and np.mean(after) < 0.08


def test_dsv3_gb200_one_factor_carries_bf16_to_mxfp8() -> None:
    """The model finds MXFP8 13% faster than BF16 for this recipe (measured: 28%), with Blackwell's
    one FP8 fraction and Megatron-Core's MoE and MLA kernels priced; it predicted BF16 1.4 times
    fast before them. Both runs are within the model's scatter, and one compute factor fitted on
    either run takes the other within 10%."""
    before, after = transfer("mbridge-dsv3-gb200")
    assert max(before) < 0.12
    assert max(after) < 0.10
    runs, _ = load_runs(str(EXAMPLES / "mbridge-dsv3-gb200" / "runs.yaml"))
    assert runs[0].plan.training.dtype != runs[1].plan.training.dtype
