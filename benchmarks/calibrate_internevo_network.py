"""Fit the achieved bandwidth fraction of the InternEvo cluster's network (links.yaml
roce-100g-x4: 4 x 100 Gb/s RoCE per 8-GPU node) on InternEvo's 1,024-A100 runs that shard the
optimizer inside a node (zero1 = 8, 4): their exposed gradient all-reduce is bandwidth-bound.
The run that shards over all 1,024 ranks (zero1 = -1) is left out of the fit: its extra time is
the broadcasts' ring latency (cost/sharded.py zero1_traffic), a check of that physics, not of
this figure. One figure for the one preset only these runs use (a property of that cluster).

python benchmarks/calibrate_internevo_network.py   (prints the fit, leave-one-out; seconds)
"""

from __future__ import annotations

import gridfit
import numpy as np

from perfmodel.inputs import presets
from perfmodel.review.validate import run_case

GRID = np.round(np.arange(0.30, 0.86, 0.01), 2)
VALUES = [float(v) for v in GRID]


def cases() -> list[dict]:
    return [c for c in presets.validation_cases() if c["table"] == "internevo-1024-a100"]


def errors(case: dict, eff: float) -> float:
    """Signed error of one run's predicted step time at network efficiency ``eff``, percent."""
    s = case["plan"].system
    link = s.inter_node_link.model_copy(update={"efficiency": float(eff)})
    plan = case["plan"].with_system(inter_node_link=link)
    return run_case({**case, "plan": plan}).error_pct


def report(seed: float | None = None) -> dict:
    """What the script prints: the least-squares fit on GRID (benchmarks/gridfit.py, each run
    priced once per value), each fitted run's error, each one's leave-one-out error and the
    held-out runs' errors."""
    runs = cases()
    fit_runs = [c for c in runs if c["plan"].parallel.dp_shard]
    held = [c for c in runs if not c["plan"].parallel.dp_shard]
    by_name = {c["name"]: c for c in fit_runs}
    errs = gridfit.Errors(lambda n, e: errors(by_name[n], float(e)))
    names = list(by_name)
    best, _ = gridfit.fit(VALUES, names, errs, score="squares", seed=seed)
    loo = gridfit.leave_one_out(VALUES, names, errs, score="squares")
    return {
        "value": float(best),
        "runs": [(n, errs.at(n, best)) for n in names],
        "loo_mean": float(np.mean([abs(e) for _, _, e in loo])),
        "loo_max": float(np.max([abs(e) for _, _, e in loo])),
        "held": [(c["name"], errors(c, float(best))) for c in held],
    }


def main() -> None:
    r = report()
    print(f"fit on {len(r['runs'])} runs: efficiency {r['value']:.2f}")
    for name, e in r["runs"]:
        print(f"  {name}: {e:+.1f}%")
    print(f"leave-one-out mean |error| {r['loo_mean']:.1f}%, max {r['loo_max']:.1f}%")
    for name, e in r["held"]:
        print(f"held out {name}: {e:+.1f}%")


if __name__ == "__main__":
    main()
