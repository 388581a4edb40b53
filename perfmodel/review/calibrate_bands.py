"""The band a calibration can promise (issue 39 item 3): its out-of-sample error for each kind of
change, its own where its runs can leave one out, else the one-run transfer on published stacks.

A calibration's band is an error on runs left out of its fit (SPEC 13), drawn as the uncalibrated
bands are: the 68% and 95% split conformal quantiles of |error| (the largest where the errors are
too few for the level). Several runs give their own leave-one-run-out errors
(review/calibrate.leave_one_out) for the kinds of change among them. For a kind of change they
never make, and for every kind when there is one run, the errors are those of transfer on published
stacks: calibrated on one run of a stack as `perfmodel calibrate` fits it, on that stack's other
runs that differ from it by that change (benchmarks/calibration_transfer.py --bands writes
configs/calibration_bands.yaml). The uncalibrated band is never carried over: a calibration moves
the answer, and how far it carries is measured.

The measured step itself: a run the calibrated model leaves further from its measurement than the
model's per-run scatter gets a note saying so and why (the factors fitted cannot follow it).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from perfmodel.engine import uncertainty
from perfmodel.engine.calibrated import CHANGES
from perfmodel.inputs import presets
from perfmodel.review.calibrate import quantile_or_max

if TYPE_CHECKING:
    from perfmodel.review.measured_run import MeasuredRun
    from perfmodel.specs.calibration import Calibration

# a measured peak memory further from the model's than this ratio is said (the memory model's
# error on published peaks: 6.2% mean, 14.4% max over 25 runs, docs/memory.md)
FAR_MEMORY = 1.5

LOO = "leave-one-run-out error"
TRANSFER = "one-run transfer error on published stacks"
OWN = "runs' own error, no less than the one-run transfer's"


def with_bands(
    cal: Calibration, scatter: float, runs: list[MeasuredRun] | None = None
) -> Calibration:
    """``cal`` with an out-of-sample error for every kind of change (and 'none', a calibration
    run's own configuration, and 'all'), the basis of each, and a note for each run the calibrated
    model leaves beyond ``scatter`` (the model's per-run scatter) of its measurement."""
    data = presets.calibration_bands()
    band, worst = dict(cal.out_of_sample), dict(cal.out_of_sample_max)
    basis = dict.fromkeys(band, LOO)
    for c in (*CHANGES, "all"):
        if c not in band and c in data["typical"]:
            band[c], worst[c], basis[c] = data["typical"][c], data["worst"][c], TRANSFER
    # a calibration run's own configuration: how far the calibrated model is from those very
    # runs (drawn as the other bands: review/calibrate.quantile_or_max), never closer than a
    # one-run fit reproduces its run on published stacks
    own = [abs(math.expm1(r.residual)) for r in cal.runs]
    if own:
        typical = quantile_or_max(own, uncertainty.TYPICAL)
        band["none"] = round(max(typical, data["typical"]["none"]), 4)
        worst["none"] = round(max(max(own), data["worst"]["none"]), 4)
        basis["none"] = OWN
    notes = [n for n in cal.notes if not n.startswith("one run: no out-of-sample error")]
    notes += memory_warnings(runs or [])
    if TRANSFER in basis.values():
        taken = ", ".join(c for c, b in basis.items() if b == TRANSFER)
        notes.append(
            f"bands of a change of {taken}: the {TRANSFER} (configs/calibration_bands.yaml),"
            " where the runs cannot leave one out"
        )
    for r in cal.runs:
        off = r.calibrated_step_time_s / r.measured_step_time_s - 1
        if abs(math.log1p(off)) > math.log1p(scatter):
            notes.append(
                f"{r.name}: calibrated {r.calibrated_step_time_s:.4g} s, {100 * off:+.1f}% from"
                f" its measured {r.measured_step_time_s:.4g} s, beyond the model's per-run"
                f" scatter ({100 * scatter:.1f}%): the factors fitted ({', '.join(cal.factors)})"
                " cannot follow every run; its band says how far that carries"
            )
    return cal.model_copy(
        update={
            "out_of_sample": band,
            "out_of_sample_max": worst,
            "band_basis": basis,
            "notes": notes,
        }
    )


def memory_warnings(runs: list[MeasuredRun]) -> list[str]:
    """A warning for each run whose measured peak memory is more than FAR_MEMORY times from the
    model's (either way): the plan is probably not the job that ran (another batch, recompute or
    sharding), and its step time is fitted as if it were."""
    from perfmodel.engine.estimate import estimate, resolve_config

    out = []
    for r in runs:
        if r.peak_memory_gb is None:
            continue
        model = float(estimate(r.plan, resolve_config(r.plan)).values["total_bytes"]) / 1e9
        ratio = r.peak_memory_gb / model
        if max(ratio, 1 / ratio) > FAR_MEMORY:
            out.append(
                f"warning: {r.name}: measured peak {r.peak_memory_gb:.4g} GB, the model's"
                f" {model:.4g} GB for the plan ({ratio:.2f}x): is the plan the job that ran (its"
                " batch, recompute, sharding)? The step time is fitted as if it were"
            )
    return out
