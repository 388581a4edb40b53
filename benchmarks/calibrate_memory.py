"""Fit the caching allocator's reserved-over-allocated ratio (engine/memory.py
RESERVED_OVER_ALLOCATED) on the published runs whose source printed the reserved peak, and print
each run's leave-one-out error (the ratio refitted without the run, the run predicted with it).

One figure for the allocator, none per run: the median of measured reserved / predicted allocated
over the runs of the fitted sources. Only torchtitan's 2024-12 benchmark notes publish reserved
peaks for runs the model expresses (Trainy's 2025-06 run is left out of the fit: its torchtitan
compiles the loss, which the 2024-12 profile does not describe; docs/memory.md).

Run: python benchmarks/calibrate_memory.py
"""

from __future__ import annotations

import numpy as np

from perfmodel.engine import memory as engine_memory
from perfmodel.review.validate import validate
from perfmodel.review.validate_memory import memory_rows

FITTED_ON = ("TORCHTITAN-2412-",)


def main() -> None:
    rows = [r for r in memory_rows(validate(["titan", "trainy"]).cases) if r.quantity == "reserved"]
    fit = [r for r in rows if r.record.startswith(FITTED_ON)]
    ratio = np.array(
        [(r.measured_bytes - engine_memory.CUBLAS_WORKSPACE_BYTES) / r.allocated_bytes for r in fit]
    )
    print(f"RESERVED_OVER_ALLOCATED = {np.median(ratio):.2f} (median of {ratio.size} runs)")
    errs = []
    for i, r in enumerate(fit):
        rest = np.median(np.delete(ratio, i))
        pred = r.allocated_bytes * rest + engine_memory.CUBLAS_WORKSPACE_BYTES
        errs.append(100 * (pred - r.measured_bytes) / r.measured_bytes)
        print(f"  {r.case:40s} ratio {ratio[i]:.3f}  leave-one-out error {errs[-1]:+.1f}%")
    e = np.abs(errs)
    print(f"leave-one-out |error|: mean {e.mean():.1f}%, max {e.max():.1f}%")
    print(f"MEMORY_BAND = {e.mean() / 100:.2f} (the mean leave-one-out |error|)")
    for r in rows:
        if r not in fit:
            print(f"  not fitted: {r.case} ratio {r.measured_bytes / r.allocated_bytes:.3f}")


if __name__ == "__main__":
    main()
