"""Check the host time per rank of a ZeRO-3 collective as DeepSpeed ran it in 2021 (the
deepspeed-2021 profile's collective_rank_host_s) on Narayanan et al. 2021 Table 2's six ZeRO-3
runs (configs/validation/zero3-2021-*.yaml): each run's error at the counted value the profile
carries, at no host time, and at the value a least-squares fit on the table would pick.

The profile's value is not fitted (issue 38 item 2): DeepSpeed v0.3.16 makes one view a rank in
a Python loop for every all-gather and reduce-scatter, and PyTorch 1.8's list API copies each
rank's slice through a flat buffer with one cudaMemcpyAsync a rank (specs/framework_extra.py
PY_VIEW_OP_S + MEMCPY_ASYNC_S, each a published per-call cost); the staging copies, the zeroed
gather buffer and the debug line's norm are HBM passes (cost/sharded.py ZERO3_HBM_PASSES). The
table is therefore out of sample as shipped; the fit column shows what is left unexplained.

python benchmarks/calibrate_zero3_2021.py   (under a minute)
"""

from __future__ import annotations

import numpy as np

from perfmodel.inputs import presets
from perfmodel.review.validate import run_case
from perfmodel.specs.framework import PROFILES

TABLE = "narayanan2021-table2"
GRID = np.round(np.arange(0.0, 60.5e-6, 1e-6), 7)


def cases() -> list[dict]:
    return [c for c in presets.validation_cases() if c["table"] == TABLE]


def with_host(case: dict, value: float) -> dict:
    """The case with the host time per rank of a collective at ``value`` seconds."""
    return {**case, "plan": case["plan"].with_training(collective_rank_host_s=value)}


def log_errors(runs: list[dict], value: float) -> np.ndarray:
    """log(predicted / measured) of each run with the host time at ``value`` seconds."""
    out = [run_case(with_host(c, value)) for c in runs]
    return np.array([np.log(r.predicted_s / r.measured_s) for r in out])


def fit(table: np.ndarray) -> float:
    """The grid value of least mean squared log error over the rows of ``table``."""
    return float(GRID[int(np.argmin((table**2).mean(axis=0)))])


def pct(log: float) -> str:
    return f"{100 * np.expm1(log):+6.1f}%"


def main() -> None:
    runs = cases()
    table = np.array([log_errors(runs, v) for v in GRID]).T  # runs x grid
    counted = float(PROFILES["deepspeed-2021"]["collective_rank_host_s"])
    at = log_errors(runs, counted)
    best = fit(table)
    print(f"collective_rank_host_s {counted * 1e6:.1f} us counted (a fit would take", end=" ")
    print(f"{best * 1e6:.0f} us)")
    fitted = table[:, int(np.argmin(np.abs(GRID - best)))]
    print(f"  {'run':<32} {'counted':>8} {'no host':>8} {'fit':>7}")
    for c, e, e0, f in zip(runs, at, table[:, 0], fitted):
        print(f"  {c['name']:<32} {pct(e):>8} {pct(e0):>8} {pct(f)}")
    for name, col in (("counted", at), ("no host", table[:, 0]), ("fit", fitted)):
        print(f"{name:<8} mean |error| {100 * np.mean(np.abs(np.expm1(col))):5.1f}%,", end=" ")
        print(f"max {100 * np.max(np.abs(np.expm1(col))):5.1f}%")


if __name__ == "__main__":
    main()
