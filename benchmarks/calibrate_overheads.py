"""Fit a framework profile's per-step, per-micro-batch and per-chunk-pass overheads (and, for
megatron-core, the H100's FP8 GEMM efficiency) jointly on that profile's published runs (issue 13,
"Calibration, decided"). One set of parameters per profile, none per run:

- megatron-core: NeMo 24.07 FP8 on DGX-H100 (8 runs) and the MoE model zoo's long-context runs (4);
  the zoo's EP/PP layouts are checked, not fitted (their residual is not an overhead, README);
- megatron-2022: Korthikanti et al. 2022 Table 5 (8 runs);
- megatron-2021: Narayanan et al. 2021 Table 1 (10 runs).

The fit minimizes the mean absolute step-time error by coordinate descent over a coarse grid; the
script then prints each run's leave-one-out error (refitted without the run, the run predicted with
them).

Run: python benchmarks/calibrate_overheads.py [--profile megatron-core] [--quick]   (a few minutes)
"""

from __future__ import annotations

import argparse

import numpy as np

from perfmodel.inputs import presets
from perfmodel.review.validate import run_case

GRID = {
    "fp8_gemm_efficiency": [0.50, 0.55, 0.60, 0.65, 0.70, 0.76],
    "step_overhead_s": [0.0, 0.05, 0.1, 0.2, 0.4],
    "microbatch_overhead_s": [0.0, 0.5e-3, 1e-3, 2e-3, 4e-3, 8e-3],
    "hop_overhead_s": [0.0, 50e-6, 100e-6, 200e-6, 400e-6, 800e-6, 1.6e-3],
}
FITS = {
    "megatron-core": (("nemo2407-fp8", "moezoo-long-context"), ("moezoo-qwen3-235b",)),
    "megatron-2022": (("korthikanti2022-table5",), ()),
    "megatron-2021": (("narayanan2021-table1",), ()),
}


def with_params(case: dict, params: dict) -> dict:
    plan = case["plan"]
    if plan.training.dtype == "fp8":
        gpu = plan.system.gpu.model_copy(
            update={"fp8_gemm_efficiency": params["fp8_gemm_efficiency"]}
        )
        plan = plan.model_copy(update={"system": plan.system.model_copy(update={"gpu": gpu})})
    plan = plan.with_training(
        **{k: params[k] for k in ("step_overhead_s", "microbatch_overhead_s", "hop_overhead_s")}
    )
    return {**case, "plan": plan}


def errors(cases: list[dict], params: dict) -> np.ndarray:
    out = []
    for c in cases:
        r = run_case(with_params(c, params))
        out.append(100 * (r.predicted_s - r.measured_s) / r.measured_s)
    return np.array(out)


TOLERANCE = 0.2  # points of mean |error| within which fits are indistinguishable on these few runs


def fit(cases: list[dict], start: dict, rounds: int = 2) -> tuple[dict, float]:
    """Coordinate descent over GRID; then, among every point it tried within TOLERANCE of the best
    mean |error|, the one with the least fixed overhead (the parameters are poorly identified by a
    handful of runs, so the simplest explanation wins rather than the grid's last step)."""
    best = dict(start)
    score = float(np.mean(np.abs(errors(cases, best))))
    tried = [(dict(best), score)]
    for _ in range(rounds):
        for name, values in GRID.items():
            if name == "fp8_gemm_efficiency" and not any(
                c["plan"].training.dtype == "fp8" for c in cases
            ):
                continue
            for v in values:
                trial = {**best, name: v}
                s = float(np.mean(np.abs(errors(cases, trial))))
                tried.append((trial, s))
                if s < score - 1e-9:
                    best, score = trial, s
    scale = {k: max(v) for k, v in GRID.items() if k.endswith("overhead_s")}
    near = [(p, s) for p, s in tried if s <= score + TOLERANCE]
    simplest = min(near, key=lambda ps: (sum(ps[0][k] / scale[k] for k in scale), ps[1]))
    return simplest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one round, no leave-one-out")
    ap.add_argument("--profile", choices=sorted(FITS), default="megatron-core")
    ap.add_argument(
        "--moe", action="store_true", help="fit megatron-core's per-expert host time (issue 21)"
    )
    args = ap.parse_args()
    if args.moe:
        moe()
        return
    TABLES, CHECKS = FITS[args.profile]
    cases = [c for c in presets.validation_cases() if c.get("table") in TABLES and "measured" in c]
    # start from zero overheads: the profile's shipped values are the output of this fit
    cases = [
        {
            **c,
            "plan": (
                c["plan"].with_training(
                    step_overhead_s=0.0, microbatch_overhead_s=0.0, hop_overhead_s=0.0
                )
            ),
        }
        for c in cases
    ]
    start = {
        "fp8_gemm_efficiency": cases[0]["plan"].system.gpu.fp8_gemm_efficiency or 0.76,
        "step_overhead_s": 0.0,
        "microbatch_overhead_s": 0.0,
        "hop_overhead_s": 0.0,
    }
    best, score = fit(cases, start, 1 if args.quick else 2)
    print(
        "fitted:",
        ", ".join(f"{k} = {v:g}" for k, v in best.items()),
        f"(mean |error| {score:.2f}%)",
    )
    errs = errors(cases, best)
    for c, e in zip(cases, errs):
        print(f"  {c['name']:<30} {e:+6.1f}%")
    for table in TABLES:
        sel = np.array([c["table"] == table for c in cases])
        print(
            f"{table}: mean |error| {np.mean(np.abs(errs[sel])):.2f}%, max"
            f" {np.max(np.abs(errs[sel])):.2f}%"
        )
    checks = [c for c in presets.validation_cases() if c.get("table") in CHECKS and "measured" in c]
    if checks:
        check_errs = errors(checks, best)
        print(
            f"check, not fitted: {', '.join(CHECKS)}: mean |error|"
            f" {np.mean(np.abs(check_errs)):.2f}%, max {np.max(np.abs(check_errs)):.2f}%"
        )
    if args.quick:
        return
    print("\nleave-one-out (refitted without the run, then predicting it):")
    loo = []
    for i, c in enumerate(cases):
        params, _ = fit(cases[:i] + cases[i + 1 :], best, 1)
        e = float(errors([c], params)[0])
        loo.append(e)
        print(f"  {c['name']:<30} {e:+6.1f}%")
    loo = np.array(loo)
    for table in TABLES:
        sel = np.array([c["table"] == table for c in cases])
        print(
            f"{table}: leave-one-out mean |error| {np.mean(np.abs(loo[sel])):.2f}%, max"
            f" {np.max(np.abs(loo[sel])):.2f}%"
        )


# --- issue 21: the host time a grouped expert GEMM spends per local expert ---------------------
# Megatron-Core's TEGroupedMLP issues each local expert's GEMM (and, in FP8, its casts) from a host
# loop over the token counts it synchronized for: with many local experts the GPU waits on the host.
# Fitted after the profile's other overheads (held as shipped), on every megatron-core MoE run.
MOE_TABLES = ("moezoo-qwen3-235b", "moezoo-long-context", "moe-2026")
EXPERT_GRID = np.round(np.arange(0.0, 60.1e-6, 5e-6), 8)


def _moe_errors(cases: list[dict], value: float) -> np.ndarray:
    out = []
    for c in cases:
        r = run_case({**c, "plan": c["plan"].with_training(expert_call_overhead_s=value)})
        out.append(100 * (r.predicted_s - r.measured_s) / r.measured_s)
    return np.array(out)


def _fit_expert(cases: list[dict]) -> float:
    scores = [float(np.mean(np.abs(_moe_errors(cases, v)))) for v in EXPERT_GRID]
    return float(EXPERT_GRID[int(np.argmin(scores))])


def moe() -> None:
    cases = [c for c in presets.validation_cases() if c.get("table") in MOE_TABLES]
    value = _fit_expert(cases)
    errs = _moe_errors(cases, value)
    print(
        f"expert_call_overhead_s = {value * 1e6:.0f} us (mean |error| {np.mean(np.abs(errs)):.2f}%,"
        f" max {np.max(np.abs(errs)):.2f}% over {len(cases)} MoE runs)"
    )
    for c, e in zip(cases, errs):
        print(f"  {c['name']:<40} {e:+6.1f}%")
    print("leave-one-out (refitted without the run, then predicting it):")
    loo = []
    for i, c in enumerate(cases):
        v = _fit_expert(cases[:i] + cases[i + 1 :])
        e = float(_moe_errors([c], v)[0])
        loo.append(abs(e))
        print(f"  {c['name']:<40} {e:+6.1f}% (fit {v * 1e6:.0f} us)")
    print(f"leave-one-out mean |error| {np.mean(loo):.2f}%, max {np.max(loo):.2f}%")


if __name__ == "__main__":
    main()
