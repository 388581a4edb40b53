"""Fit the achieved bandwidth fraction of the InternEvo cluster's network (links.yaml
roce-100g-x4: 4 x 100 Gb/s RoCE per 8-GPU node) on InternEvo's 1,024-A100 runs that shard the
optimizer inside a node (zero1 = 8, 4): their exposed gradient all-reduce is bandwidth-bound.
The run that shards over all 1,024 ranks (zero1 = -1) is left out of the fit: its extra time is
the broadcasts' ring latency (cost/sharded.py zero1_traffic), a check of that physics, not of
this figure. One figure for the one preset only these runs use (a property of that cluster).

python benchmarks/calibrate_internevo_network.py   (prints the scan, the fit, leave-one-out)
"""

from __future__ import annotations

import numpy as np

from perfmodel.inputs import presets
from perfmodel.review.validate import run_case

GRID = np.round(np.arange(0.30, 0.86, 0.01), 2)


def cases() -> list[dict]:
    return [c for c in presets.validation_cases() if c["table"] == "internevo-1024-a100"]


def errors(case: dict, eff: float) -> float:
    """Signed error of one run's predicted step time at network efficiency ``eff``, percent."""
    s = case["plan"].system
    link = s.inter_node_link.model_copy(update={"efficiency": float(eff)})
    plan = case["plan"].with_system(inter_node_link=link)
    return run_case({**case, "plan": plan}).error_pct


def main() -> None:
    runs = cases()
    fit_runs = [c for c in runs if c["plan"].parallel.dp_shard]
    held = [c for c in runs if not c["plan"].parallel.dp_shard]
    table = np.array([[errors(c, e) for e in GRID] for c in fit_runs])
    best = GRID[np.argmin((table**2).mean(axis=0))]  # least squares
    print(f"fit on {len(fit_runs)} runs: efficiency {best:.2f}")
    for c, row in zip(fit_runs, table):
        print(f"  {c['name']}: {row[best == GRID][0]:+.1f}%")
    loo = []
    for i in range(len(fit_runs)):
        rest = np.delete(table, i, axis=0)
        e = GRID[np.argmin((rest**2).mean(axis=0))]
        loo.append(abs(table[i][e == GRID][0]))
    print(f"leave-one-out mean |error| {np.mean(loo):.1f}%, max {np.max(loo):.1f}%")
    for c in held:
        print(f"held out {c['name']}: {errors(c, best):+.1f}%")


if __name__ == "__main__":
    main()
