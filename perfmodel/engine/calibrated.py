"""The error band of a calibrated prediction: the calibration's own out-of-sample error for the kind
of change between the configuration predicted and the runs it was fitted on (issue 32).

`perfmodel calibrate` leaves each measured run out in turn, refits on the others and predicts it
(review/calibrate.py); the error of those predictions, grouped by what differed between the run
left out and the runs kept (another scale, layout, model size, number format, GPU), is stored in
the calibration. A prediction takes the largest of those errors over the kinds of change it makes
from its nearest calibration run: an honest band in the sense of SPEC 13 (the error on runs left
out of the fit). With one run, or for a change the calibration runs never made, the calibration
holds the one-run transfer error on published stacks for it instead (review/calibrate_bands.py,
issue 39), never the uncalibrated band; only a calibration written without those figures keeps
the published band, and says why.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from perfmodel.engine.band import Band, gpu_family
from perfmodel.specs import Config, Plan

if TYPE_CHECKING:
    from perfmodel.specs.calibration import Calibration

CHANGES = ("scale", "layout", "model", "format", "gpu")


def kind(plan: Plan, cfg: Config) -> dict[str, Any]:
    """What a run is, in the terms a change is told by."""
    m = plan.model
    return {
        "scale": int(plan.system.num_gpus),
        "layout": (
            f"tp{cfg.tp} pp{cfg.pp} cp{cfg.cp} ep{cfg.ep} vp{cfg.vp} mbs{cfg.micro_batch_size}"
            f" {cfg.recompute} zero{cfg.zero_stage}"
        ),
        "model": f"L{m.num_layers} h{m.hidden_size} s{plan.seq_length}",
        "format": plan.training.dtype,
        "gpu": gpu_family(plan.system.gpu.name),
    }


def changes(k: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    """The kinds of change from the nearest of ``runs`` (fewest differences) to ``k``."""
    if not runs:
        return list(CHANGES)
    diffs = [[c for c in CHANGES if r.get(c) != k.get(c)] for r in runs]
    return min(diffs, key=len)


def band(plan: Plan, cfg: Config, published: Band) -> Band:
    """The calibrated band of ``cfg`` (or ``published``, saying why, where the calibration holds no
    out-of-sample error for the change it makes)."""
    cal: Calibration | None = plan.calibration
    if cal is None:
        return published
    if cal.fitted_from == "microbenchmarks":
        # microbenchmarks (review/calibrate_micro.py) set kernel and link rates, not the step's
        # composition: nothing measured a step, so no step error is known but the model's own
        return Band(
            published.typical,
            published.worst,
            "calibrated on microbenchmarks (kernel and link rates; no training step measured):"
            f" the published band, {published.basis}",
            published.runs,
            published.unvalidated,
        )
    made = changes(kind(plan, cfg), [r.kind for r in cal.runs])
    # the configuration of a calibration run: how far the calibrated model reproduces such a run
    wanted = made or (["none"] if "none" in cal.out_of_sample else ["all"])
    known = [c for c in wanted if c in cal.out_of_sample]
    missing = [c for c in wanted if c not in cal.out_of_sample]
    what = ", ".join(made) if made else "none (a calibration run's own configuration)"
    if missing:
        n = len(cal.runs)
        return Band(
            published.typical,
            published.worst,
            f"calibrated on {n} run{'s' if n != 1 else ''}, which give no out-of-sample error for"
            f" a change of {', '.join(missing)}: the published band, {published.basis}",
            published.runs,
            published.unvalidated,
        )
    worst = max(known, key=lambda c: cal.out_of_sample[c])
    # where each error comes from: the runs' own leave-one-run-out, or (one run, or a change the
    # runs never make) a one-run calibration's transfer on published stacks (review/
    # calibrate_bands.py)
    sources = {c: cal.band_basis.get(c, "leave-one-run-out error") for c in known}
    n = len(cal.runs)
    runs = f"calibrated on {n} run{'s' if n != 1 else ''}"
    if len(set(sources.values())) == 1:
        basis = f"{runs}: the {sources[worst]} for a change of {what}"
    else:  # the largest of errors of two origins: each named
        each = "; ".join(
            f"{c} {100 * cal.out_of_sample[c]:.1f}%, the {s}" for c, s in sources.items()
        )
        basis = f"{runs}: for a change of {what}, the largest of ({each})"
    # the calibration's errors are relative (|predicted / measured - 1|); a band is a half-width
    # of log(step time)
    return Band(
        math.log1p(cal.out_of_sample[worst]),
        math.log1p(max(cal.out_of_sample_max.get(c, cal.out_of_sample[c]) for c in known)),
        basis,
        n,
    )
