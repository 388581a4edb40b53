"""vTrain's 1,440 single-node runs against the model (issue 38): the step error and how well the
model orders the layouts of each family (one model, batch and GPU count), the figures a planner
relies on where big GEMMs do not dominate (models of 0.2-1.3 billion parameters on 2-8 A100).

The runs and what each plan assumes: perfmodel/inputs/vtrain.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.engine.estimate import estimates, resolve_config, validate_config
from perfmodel.inputs import vtrain
from perfmodel.review.ordering import Ordering, ordering
from perfmodel.specs.calibrated_plan import with_calibration
from perfmodel.specs.calibration import Calibration


@dataclass
class VTrainReport:
    runs: list[vtrain.VTrainRun]
    predicted_s: np.ndarray
    order: Ordering
    order_10: Ordering  # pairs whose measured gap is 10% or more

    @property
    def error(self) -> np.ndarray:
        """Signed error of each run, a fraction (negative: predicted too fast)."""
        measured = np.array([r.measured_s for r in self.runs])
        return np.asarray(self.predicted_s / measured - 1.0)

    def by_gpus(self) -> list[dict]:
        err = self.error
        gpus = np.array([r.gpus for r in self.runs])
        return [
            {
                "gpus": int(g),
                "runs": int((gpus == g).sum()),
                "mean_abs_error_pct": float(100 * np.abs(err[gpus == g]).mean()),
                "mean_error_pct": float(100 * err[gpus == g].mean()),
            }
            for g in sorted(set(gpus.tolist()))
        ]

    def summary(self) -> dict:
        err = self.error
        return {
            "title": "vTrain single-node runs (MICRO 2024): GPT on 2-8 A100, Megatron-DeepSpeed",
            "source": vtrain.SOURCE,
            "assumed": list(vtrain.ASSUMED),
            "runs": len(self.runs),
            "mean_abs_error_pct": float(100 * np.abs(err).mean()),
            "median_abs_error_pct": float(100 * np.median(np.abs(err))),
            "max_abs_error_pct": float(100 * np.abs(err).max()),
            "mean_error_pct": float(100 * err.mean()),
            "runs_predicted_fast": int((err < 0).sum()),
            "ordering": self.order.to_json(),
            "ordering_gap_10pct": self.order_10.to_json(),
        }

    def to_json(self) -> dict:
        return {
            "vtrain": self.summary(),
            "by_gpus": self.by_gpus(),
            "runs": [
                {
                    "case": r.name,
                    "measured_step_time_s": r.measured_s,
                    "predicted_step_time_s": float(p),
                    "error_pct": float(100 * e),
                }
                for r, p, e in zip(self.runs, self.predicted_s, self.error)
            ],
        }


def predict(
    runs: list[vtrain.VTrainRun],
    calibration: Calibration | None = None,
    training: dict | None = None,
) -> np.ndarray:
    """Predicted step times, seconds: each family's layouts evaluated together (one vectorized
    evaluation per family, as the search evaluates candidates; rows do not interact).
    ``training``: flags set on every plan (a calibration script's trial values)."""
    out = np.empty(len(runs))
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, r in enumerate(runs):
        groups.setdefault(r.family, []).append(i)
    for rows in groups.values():
        plans = [runs[i].plan() for i in rows]
        if training:
            plans = [p.with_training(**training) for p in plans]
        if calibration is not None:
            plans = [with_calibration(p, calibration) for p in plans]
        cfgs = [resolve_config(p) for p in plans]
        for p, c in zip(plans, cfgs):
            validate_config(p, c)
        for i, est in zip(rows, estimates(plans[0], cfgs)):
            out[i] = est.values["step_time_s"]
    return out


def validate_vtrain(every: int = 1, calibration: Calibration | None = None) -> VTrainReport:
    """Every ``every``-th bundled run (1: all 1,440) against the model."""
    runs = vtrain.runs(every)
    predicted = predict(runs, calibration)
    measured = [r.measured_s for r in runs]
    families = [r.family for r in runs]
    return VTrainReport(
        runs,
        predicted,
        ordering(families, measured, predicted),
        ordering(families, measured, predicted, tie=0.10),
    )
