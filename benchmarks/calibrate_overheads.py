"""Fit a framework profile's per-step, per-micro-batch and per-chunk-pass overheads on that
profile's published runs (issue 13, "Calibration, decided"). One set of parameters per profile,
none per run (the H100's FP8 GEMM fraction, fitted here jointly until issue 28, is the GPU's:
benchmarks/calibrate_gpu.py --gpu h100-sxm-fp8):

- megatron-core: NeMo 24.07 FP8 on DGX-H100 (8 runs) and the MoE model zoo's long-context runs (4);
  the zoo's EP/PP layouts are checked, not fitted (their residual is not an overhead, README);
- megatron-2022: Korthikanti et al. 2022 Table 5 (8 runs);
- megatron-2021: Narayanan et al. 2021 Table 1 (10 runs).

The fit minimizes the mean absolute step-time error over every point of a coarse grid (the
overheads add to a step linearly, so the whole grid costs one estimate per run: Steps); the
script then prints each run's leave-one-out error (refitted without the run, the run
predicted with them).

Run: python benchmarks/calibrate_overheads.py [--profile megatron-core]   (seconds)
"""

from __future__ import annotations

import argparse

import gridfit
import numpy as np

from perfmodel.cost.step import fixed_overheads
from perfmodel.inputs import presets
from perfmodel.review.validate import run_case

GRID = {
    "step_overhead_s": [0.0, 0.05, 0.1, 0.2, 0.4],
    "microbatch_overhead_s": [0.0, 0.5e-3, 1e-3, 2e-3, 4e-3, 8e-3],
    "hop_overhead_s": [0.0, 50e-6, 100e-6, 200e-6, 400e-6, 800e-6, 1.6e-3],
}
OVERHEADS = ("step_overhead_s", "microbatch_overhead_s", "hop_overhead_s")
FITS = {
    "megatron-core": (("nemo2407-fp8", "moezoo-long-context"), ("moezoo-qwen3-235b",)),
    "megatron-2022": (("korthikanti2022-table5",), ()),
    "megatron-2021": (("narayanan2021-table1",), ()),
}


def with_params(case: dict, params: dict) -> dict:
    plan = case["plan"].with_training(**{k: params[k] for k in OVERHEADS})
    return {**case, "plan": plan}


def errors(cases: list[dict], params: dict) -> np.ndarray:
    out = []
    for c in cases:
        r = run_case(with_params(c, params))
        out.append(100 * (r.predicted_s - r.measured_s) / r.measured_s)
    return np.array(out)


TOLERANCE = 0.2  # points of mean |error| within which fits are indistinguishable on these few runs


class Steps:
    """Each run's step time over the whole GRID, as arrays. The overheads are added outside the
    kernels, on the critical path (cost/step.py fixed_overheads: per step, per micro-batch, per
    chunk pass), so a run's step time is its time without them, priced once, plus their sum over
    its micro-batches and chunk passes: the grid's 210 points cost one estimate per run
    (tests/test_constants.py checks the sum against full estimates)."""

    def __init__(self, cases: list[dict]) -> None:
        self.cases = cases
        base, measured, counts = [], [], []
        for c in cases:
            r = run_case(with_params(c, dict.fromkeys(OVERHEADS, 0.0)))
            cfg = r.estimate.config
            base.append(r.predicted_s)
            measured.append(r.measured_s)
            # the model's own sum, one overhead at a time: (step, micro-batch, chunk pass)
            m, pp, vp = cfg.num_micro_batches, cfg.pp, cfg.vp
            counts.append([float(fixed_overheads(*unit, m, pp, vp)) for unit in np.eye(3)])
        self.base = np.array(base)
        self.measured = np.array(measured)
        self.counts = np.array(counts)  # (runs, 3): steps, micro-batches, chunk passes
        axes = [np.asarray(GRID[k]) for k in OVERHEADS]
        self.points = np.array(np.meshgrid(*axes, indexing="ij")).reshape(3, -1).T  # (P, 3)

    def errors(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Percent error of each run (selected by ``rows``) at every grid point: (runs, points)."""
        rows = np.arange(len(self.cases)) if rows is None else rows
        step = self.base[rows, None] + self.counts[rows] @ self.points.T
        return 100 * (step - self.measured[rows, None]) / self.measured[rows, None]

    def index(self, params: dict) -> int:
        point = np.array([params[k] for k in OVERHEADS])
        return int(np.flatnonzero((self.points == point).all(axis=1))[0])

    def fit(self, rows: np.ndarray | None = None) -> tuple[dict, float]:
        """The grid point of least mean |error| over the runs; among every point within TOLERANCE
        of it, the one with the least fixed overhead (the parameters are poorly identified by a
        handful of runs, so the simplest explanation wins), then the least error."""
        score = np.abs(self.errors(rows)).mean(axis=0)
        scale = np.array([max(GRID[k]) for k in OVERHEADS])
        simple = (self.points / scale).sum(axis=1)
        near = np.flatnonzero(score <= score.min() + TOLERANCE)
        i = near[np.lexsort((score[near], simple[near]))[0]]
        return {k: float(v) for k, v in zip(OVERHEADS, self.points[i])}, float(score[i])


def fit(cases: list[dict]) -> tuple[dict, float]:
    """The profile's overheads over the whole GRID."""
    return Steps(cases).fit()


def report(profile: str) -> dict:
    """What the script prints for ``profile``: the fit, each run's error, each table's, the
    checked runs' error and each run's leave-one-out error (the fit redone without it)."""
    tables, checks = FITS[profile]
    cases = [c for c in presets.validation_cases() if c.get("table") in tables and "measured" in c]
    steps = Steps(cases)
    best, score = steps.fit()
    errs = steps.errors()[:, steps.index(best)]
    loo = []
    for i in range(len(cases)):
        params, _ = steps.fit(np.delete(np.arange(len(cases)), i))
        loo.append(float(steps.errors(np.array([i]))[0, steps.index(params)]))
    checked = [
        c for c in presets.validation_cases() if c.get("table") in checks and "measured" in c
    ]
    return {
        "params": best,
        "score": score,
        "cases": cases,
        "errors": errs,
        "loo": np.array(loo),
        "tables": tables,
        "checks": checks,
        "checked": errors(checked, best) if checked else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=sorted(FITS), default="megatron-core")
    ap.add_argument(
        "--moe", action="store_true", help="fit megatron-core's per-expert host time (issue 21)"
    )
    args = ap.parse_args()
    if args.moe:
        moe()
        return
    r = report(args.profile)
    print(
        "fitted:",
        ", ".join(f"{k} = {v:g}" for k, v in r["params"].items()),
        f"(mean |error| {r['score']:.2f}%)",
    )
    tables = np.array([c["table"] for c in r["cases"]])
    for c, e in zip(r["cases"], r["errors"]):
        print(f"  {c['name']:<30} {e:+6.1f}%")
    for table in r["tables"]:
        e = np.abs(r["errors"][tables == table])
        print(f"{table}: mean |error| {e.mean():.2f}%, max {e.max():.2f}%")
    if r["checked"] is not None:
        e = np.abs(r["checked"])
        print(
            f"check, not fitted: {', '.join(r['checks'])}: mean |error| {e.mean():.2f}%, max"
            f" {e.max():.2f}%"
        )
    print("\nleave-one-out (refitted without the run, then predicting it):")
    for c, e in zip(r["cases"], r["loo"]):
        print(f"  {c['name']:<30} {e:+6.1f}%")
    for table in r["tables"]:
        e = np.abs(r["loo"][tables == table])
        print(f"{table}: leave-one-out mean |error| {e.mean():.2f}%, max {e.max():.2f}%")


# --- issue 21: the host time a grouped expert GEMM spends per local expert ---------------------
# Megatron-Core's TEGroupedMLP issues each local expert's GEMM (and, in FP8, its casts) from a host
# loop over the token counts it synchronized for: with many local experts the GPU waits on the host.
# Fitted after the profile's other overheads (held as shipped), on every megatron-core MoE run.
MOE_TABLES = ("moezoo-qwen3-235b", "moezoo-long-context", "moe-2026")
EXPERT_GRID = np.round(np.arange(0.0, 60.1e-6, 5e-6), 8)


EXPERT_VALUES = [float(v) for v in EXPERT_GRID]


def _moe_errors(cases: list[dict], value: float) -> np.ndarray:
    out = []
    for c in cases:
        r = run_case({**c, "plan": c["plan"].with_training(expert_call_overhead_s=value)})
        out.append(100 * (r.predicted_s - r.measured_s) / r.measured_s)
    return np.array(out)


def _expert_table(cases: list[dict]) -> gridfit.Errors:
    by_name = {c["name"]: c for c in cases}
    return gridfit.Errors(lambda n, v: float(_moe_errors([by_name[n]], float(v))[0]))


def _fit_expert(
    cases: list[dict], errs: gridfit.Errors | None = None, seed: float | None = None
) -> float:
    """The host time per local expert of least mean |error| on EXPERT_GRID (a longer host time
    never makes a step faster: gridfit's bound with rising errors)."""
    errs = errs or _expert_table(cases)
    names = [c["name"] for c in cases]
    v, _ = gridfit.fit(EXPERT_VALUES, names, errs, rising=True, seed=seed)
    return float(v)


def moe_report(seed: float | None = None) -> dict:
    """What ``--moe`` prints: the fit, each run's error, their mean without the host time (the
    grid's first value) and each run's leave-one-out error; ``seed``: a value to look at first."""
    cases = [c for c in presets.validation_cases() if c.get("table") in MOE_TABLES]
    errs = _expert_table(cases)
    names = [c["name"] for c in cases]
    value = _fit_expert(cases, errs, seed)
    loo = gridfit.leave_one_out(EXPERT_VALUES, names, errs, rising=True)
    return {
        "value": value,
        "runs": [(n, errs.at(n, value)) for n in names],
        "without": float(np.mean([abs(errs.at(n, EXPERT_VALUES[0])) for n in names])),
        "loo": loo,
        "loo_mean": float(np.mean([abs(e) for _, _, e in loo])),
        "loo_max": float(np.max([abs(e) for _, _, e in loo])),
    }


def moe() -> None:
    r = moe_report()
    e = np.abs([x for _, x in r["runs"]])
    print(
        f"expert_call_overhead_s = {r['value'] * 1e6:.0f} us (mean |error| {e.mean():.2f}%,"
        f" max {e.max():.2f}% over {e.size} MoE runs; {r['without']:.2f}% without it)"
    )
    for name, x in r["runs"]:
        print(f"  {name:<40} {x:+6.1f}%")
    print("leave-one-out (refitted without the run, then predicting it):")
    for name, v, x in r["loo"]:
        print(f"  {name:<40} {x:+6.1f}% (fit {v * 1e6:.0f} us)")
    print(f"leave-one-out mean |error| {r['loo_mean']:.2f}%, max {r['loo_max']:.2f}%")


if __name__ == "__main__":
    main()
