"""Fit the host time per rank of a ZeRO-3 collective as DeepSpeed ran it in 2021 (the
deepspeed-2021 profile's collective_rank_host_s) on Narayanan et al. 2021 Table 2's six ZeRO-3
runs (configs/validation/n21t2-*.yaml), and print each run's error at the fit, at no host time
and under the deepspeed profile as it was before (issue 31).

DeepSpeed v0.3.16 builds, for every all-gather and reduce-scatter, the list of the group's n
partitions in a Python loop, and PyTorch 1.8's list API copies each of them through a flat
buffer, a copy kernel a rank; every fetch then torch.cuda.synchronize()s. One figure, seconds per
rank per collective, global for that software (cost/sharded.py Sharding.rank_host_s). The six runs
are one source (one paper's table): its out-of-sample error is at no host time
(benchmarks/oos_errors.py), and leave-one-run-out is printed here.

python benchmarks/calibrate_zero3_2021.py   (under a minute)
"""

from __future__ import annotations

import numpy as np

from perfmodel.inputs import presets
from perfmodel.review.validate import run_case

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
    best = fit(table)
    at = table[:, int(np.argmin(np.abs(GRID - best)))]
    print(f"collective_rank_host_s = {best * 1e6:.0f} us (least squares in log over {len(runs)})")
    before = [run_case({**c, "plan": c["plan"].with_training(framework="deepspeed")}) for c in runs]
    print(f"  {'run':<32} {'fit':>7} {'no host':>8} {'deepspeed':>10}")
    for c, e, e0, b in zip(runs, at, table[:, 0], before):
        print(
            f"  {c['name']:<32} {pct(e)} {pct(e0):>8}"
            f" {pct(np.log(b.predicted_s / b.measured_s)):>10}"
        )
    print(f"mean |error| {100 * np.mean(np.abs(np.expm1(at))):.1f}%,", end=" ")
    print(f"max {100 * np.max(np.abs(np.expm1(at))):.1f}%")
    loo = []
    for i, c in enumerate(runs):
        v = fit(np.delete(table, i, axis=0))
        e = table[i, int(np.argmin(np.abs(GRID - v)))]
        loo.append(abs(np.expm1(e)))
        print(f"  left out {c['name']:<32} {pct(e)} (fit {v * 1e6:.0f} us)")
    print(f"leave-one-run-out mean |error| {100 * np.mean(loo):.1f}%, max {100 * np.max(loo):.1f}%")


if __name__ == "__main__":
    main()
