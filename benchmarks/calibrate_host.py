"""Fit the host's time per kernel launch (Training.kernel_host_s, cost/host.py) of the deepspeed
profile on vTrain's 1,440 single-node runs (issue 38; perfmodel/inputs/vtrain.py): Megatron-
DeepSpeed in eager PyTorch on 2-8 A100, models of 0.2-1.3 billion parameters whose kernels are
short enough that the host issuing them sets the pace.

The fit minimizes the mean |error| of the step time over a grid of host times (2 us apart); each
grid value is one vectorized evaluation of every family. It then prints the fit judged out of
sample within the source: refitted without each GPU count (2, 4, 8) and without each hidden size
(1,024, 2,048), the left-out runs predicted at the refitted value; and the layout pairs ordered as
measured (review/ordering.py).

No other source runs the deepspeed profile, so no other source's error moves with this value.

Run: python benchmarks/calibrate_host.py   (a few minutes: 8 s a grid value)
"""

from __future__ import annotations

import numpy as np

from perfmodel.inputs import vtrain
from perfmodel.review.ordering import ordering
from perfmodel.review.validate_vtrain import predict

GRID = [round(x * 1e-6, 9) for x in range(40, 78, 2)]
FOLDS = ("gpus", "hidden")


def errors(runs: list[vtrain.VTrainRun], grid: list[float]) -> np.ndarray:
    """Signed errors (fractions), grid values x runs."""
    measured = np.array([r.measured_s for r in runs])
    return np.array([predict(runs, training={"kernel_host_s": v}) / measured - 1 for v in grid])


def fit(err: np.ndarray, keep: np.ndarray) -> int:
    """The grid index of least mean |error| over the runs ``keep`` selects (first among ties)."""
    return int(np.argmin(np.abs(err[:, keep]).mean(axis=1)))


def report(grid: list[float] | None = None) -> dict:
    grid = GRID if grid is None else grid
    runs = vtrain.runs()
    err = errors(runs, grid)
    every = np.ones(len(runs), dtype=bool)
    best = fit(err, every)
    out_of_sample = {}
    for key in FOLDS:
        vals = np.array([getattr(r, key) for r in runs])
        oos = np.empty(len(runs))
        for v in sorted(set(vals.tolist())):
            left = vals == v
            oos[left] = err[fit(err, ~left), left]
        out_of_sample[key] = float(100 * np.abs(oos).mean())
    measured = [r.measured_s for r in runs]
    pred = np.array(measured) * (1 + err[best])
    order = ordering([r.family for r in runs], measured, pred)
    return {
        "value": grid[best],
        "mean_abs_error_pct": float(100 * np.abs(err[best]).mean()),
        "mean_error_pct": float(100 * err[best].mean()),
        "curve": [(v, float(100 * np.abs(e).mean())) for v, e in zip(grid, err)],
        "out_of_sample": out_of_sample,
        "pair_accuracy": order.accuracy,
        "top1": order.top1_share,
    }


def main() -> None:
    r = report()
    for v, e in r["curve"]:
        print(f"  kernel_host_s {v * 1e6:4.0f} us: mean |error| {e:5.1f}%")
    print(
        f"fitted {r['value'] * 1e6:.0f} us: mean |error| {r['mean_abs_error_pct']:.1f}%, signed"
        f" {r['mean_error_pct']:+.1f}%; pairs ordered right {100 * r['pair_accuracy']:.1f}%,"
        f" top-1 {100 * r['top1']:.0f}%"
    )
    for key, e in r["out_of_sample"].items():
        print(f"refitted without each {key}, the left-out runs: mean |error| {e:.1f}%")


if __name__ == "__main__":
    main()
