"""vTrain's 1,440 single-node runs (issue 38): the step error by GPU count, tensor parallelism and
micro-batch, and the pairwise ordering of each family's layouts (perfmodel validate vtrain prints
the summary; this breaks the error down by the knobs that set a step's fixed costs).

Run: python benchmarks/vtrain_errors.py   (about 10 s)
"""

from __future__ import annotations

import numpy as np

from perfmodel.review.validate_vtrain import validate_vtrain


def main() -> None:
    report = validate_vtrain()
    s = report.summary()
    err = report.error
    print(
        f"{s['runs']} runs: mean |error| {s['mean_abs_error_pct']:.1f}%, signed"
        f" {s['mean_error_pct']:+.1f}%, max {s['max_abs_error_pct']:.1f}%"
    )
    for key in ("gpus", "tp", "pp", "dp", "micro_batch", "hidden", "layers"):
        vals = np.array([getattr(r, key) for r in report.runs])
        cells = [
            f"{v}: {100 * err[vals == v].mean():+.0f}% ({100 * np.abs(err[vals == v]).mean():.0f})"
            for v in sorted(set(vals.tolist()))
        ]
        print(f"  by {key:<12} " + ", ".join(cells))
    for o in (s["ordering"], s["ordering_gap_10pct"]):
        print(
            f"pairs with a measured gap of {100 * o['tie_below_gap']:.0f}% or more:"
            f" {100 * o['pair_accuracy']:.1f}% of {o['pairs']} ordered right;"
            f" top-1 {100 * o['top1_agreement']:.0f}% of {o['families']} families"
        )


if __name__ == "__main__":
    main()
