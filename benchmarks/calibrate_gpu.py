"""Fit one GPU's compute efficiency on every published run of that GPU (issue 20): global for the
GPU, across frameworks, never per run; then each run's leave-one-out error.

- h100-sxm, BF16 GEMM efficiency: the H200 device measurement (0.76, 2026 software) is not what
  the published H100 runs reach; fitted on the H100 BF16 runs of llm-foundry and of the MoE model
  zoo's long-context table (the zoo's EP/PP layouts are checked, not fitted: the MoE issue).
- AMD's CDNA parts: benchmarks/calibrate_cdna.py (one fraction per generation and format).
- h100-sxm-96gb (torchtitan's Grand Teton H100 at a 500 W power limit): one clock factor scales
  every compute efficiency of the h100-sxm preset (BF16 and FP8 GEMMs, attention), since a power
  cap lowers the clock under load whatever the kernel; fitted on torchtitan's runs.

Run: python benchmarks/calibrate_gpu.py [--gpu h100-sxm|h100-sxm-96gb|blackwell] (under a minute)
"""

from __future__ import annotations

import argparse

import numpy as np

from perfmodel.inputs import presets
from perfmodel.review.validate import run_case

SCALED = (
    "gemm_efficiency",
    "fp8_gemm_efficiency",
    "attention_efficiency",
    "fa2_attention_efficiency",
)
FITS = {
    # GPU preset: (what is fitted, the tables fitted on, tables only checked)
    "h100-sxm": ("gemm_efficiency", ("llm-foundry", "moezoo-long-context"), ("moezoo-qwen3-235b",)),
    "h100-sxm-96gb": ("clock", ("torchtitan-2412",), ()),
}
GRID = np.round(np.arange(0.30, 0.801, 0.01), 2)


def on_gpu(case: dict, gpu: str, bf16_only: bool) -> bool:
    plan = case["plan"]
    ours = plan.system.gpu.name == presets.gpu(gpu).name
    return ours and (not bf16_only or plan.training.dtype == "bf16")


def with_value(case: dict, gpu: str, what: str, value: float) -> dict:
    plan = case["plan"]
    base = presets.gpu("h100-sxm") if what == "clock" else plan.system.gpu
    if what == "clock":
        update = {k: getattr(base, k) * value for k in SCALED if getattr(base, k) is not None}
    else:
        update = {what: value}
    g = plan.system.gpu.model_copy(update=update)
    return {
        **case,
        "plan": plan.model_copy(update={"system": plan.system.model_copy(update={"gpu": g})}),
    }


def errors(cases: list[dict], gpu: str, what: str, value: float) -> np.ndarray:
    out = []
    for c in cases:
        r = run_case(with_value(c, gpu, what, value))
        out.append(100 * (r.predicted_s - r.measured_s) / r.measured_s)
    return np.array(out)


def fit(cases: list[dict], gpu: str, what: str) -> tuple[float, float]:
    scores = [float(np.mean(np.abs(errors(cases, gpu, what, v)))) for v in GRID]
    i = int(np.argmin(scores))
    return float(GRID[i]), scores[i]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", choices=[*sorted(FITS), "blackwell"], default="h100-sxm")
    args = ap.parse_args()
    if args.gpu == "blackwell":
        blackwell()
        return
    what, tables, checks = FITS[args.gpu]
    bf16 = what == "gemm_efficiency" and args.gpu.startswith("h100")
    every = [c for c in presets.validation_cases() if "measured" in c]
    cases = [c for c in every if c["table"] in tables and on_gpu(c, args.gpu, bf16)]
    value, score = fit(cases, args.gpu, what)
    print(f"{args.gpu}: {what} = {value:.2f} (mean |error| {score:.2f}% over {len(cases)} runs)")
    errs = errors(cases, args.gpu, what, value)
    for c, e in zip(cases, errs):
        print(f"  {c['name']:<58} {e:+6.1f}%")
    checked = [c for c in every if c["table"] in checks and on_gpu(c, args.gpu, bf16)]
    if checked:
        ce = np.abs(errors(checked, args.gpu, what, value))
        print(f"checked, not fitted ({', '.join(checks)}): mean |error| {ce.mean():.2f}%")
    if len(cases) < 2:
        print("leave-one-out: needs two runs or more; this fit has no out-of-sample error")
        return
    print("leave-one-out (refitted without the run, then predicting it):")
    loo = []
    for i, c in enumerate(cases):
        v, _ = fit(cases[:i] + cases[i + 1 :], args.gpu, what)
        e = float(errors([c], args.gpu, what, v)[0])
        loo.append(abs(e))
        print(f"  {c['name']:<58} {e:+6.1f}% (fit {v:.2f})")
    print(f"leave-one-out mean |error| {np.mean(loo):.2f}%, max {np.max(loo):.2f}%")


# --- Blackwell (issue 22): Megatron-Bridge runs on B200, GB200 and GB300 -----------------------
BLACKWELL = ("b200", "gb200", "gb300")
FP8_GRID = np.round(np.arange(0.30, 0.901, 0.01), 2)
RATIO_GRID = np.round(np.arange(1.00, 2.501, 0.02), 2)


def _gpu_key(case: dict) -> str:
    return next(k for k in BLACKWELL if case["plan"].system.gpu.name == presets.gpu(k).name)


def fp4_fraction(gpu: str, fp8: float, speedup: float) -> float:
    """The NVFP4 GEMM fraction that runs ``speedup`` x the FP8 GEMMs' achieved FLOP/s."""
    g = presets.gpu(gpu)
    return min(1.0, speedup * fp8 * g.peak("fp8") / g.peak("nvfp4"))


def _blackwell_case(case: dict, fp8: dict[str, float], ratio: float) -> dict:
    """A case with its GPU's FP8 (and MXFP8) GEMM fraction, and NVFP4 GEMMs at ``ratio`` x the
    FP8 ones' achieved FLOP/s."""
    plan = case["plan"]
    key = _gpu_key(case)
    g = plan.system.gpu.model_copy(
        update={
            "fp8_gemm_efficiency": fp8[key],
            "fp4_gemm_efficiency": fp4_fraction(key, fp8[key], ratio),
        }
    )
    return {
        **case,
        "plan": plan.model_copy(update={"system": plan.system.model_copy(update={"gpu": g})}),
    }


def _errs(cases: list[dict], fp8: dict[str, float], ratio: float) -> np.ndarray:
    out = []
    for c in cases:
        r = run_case(_blackwell_case(c, fp8, ratio))
        out.append(100 * (r.predicted_s - r.measured_s) / r.measured_s)
    return np.array(out)


def fit_blackwell(cases: list[dict]) -> tuple[dict[str, float], float]:
    """Per GPU, the FP8 GEMM fraction on its FP8 and MXFP8 runs (the same tensor-core rate; the
    part's power limit sets its clock under load); then one speedup of NVFP4 GEMMs over the FP8
    ones for all three, on the NVFP4 runs (the same kernels on the same tensor-core generation:
    the data sheets' 2x and 3x FP4 rates are peaks, the speedup is what the GEMMs reach). Each
    minimizes the mean |error| on a grid."""
    fp8: dict[str, float] = dict.fromkeys(BLACKWELL, 0.8)
    for k in BLACKWELL:
        own = [c for c in cases if _gpu_key(c) == k and c["plan"].training.dtype != "nvfp4"]
        if not own:
            continue
        scores = [np.mean(np.abs(_errs(own, {**fp8, k: v}, 1.0))) for v in FP8_GRID]
        fp8[k] = float(FP8_GRID[int(np.argmin(scores))])
    fp4 = [c for c in cases if c["plan"].training.dtype == "nvfp4"]
    scores = [np.mean(np.abs(_errs(fp4, fp8, r))) for r in RATIO_GRID] if fp4 else [0.0]
    ratio = float(RATIO_GRID[int(np.argmin(scores))]) if fp4 else 1.0
    return fp8, ratio


def blackwell() -> None:
    cases = [c for c in presets.validation_cases() if c["table"] == "mbridge-blackwell"]
    fp8, ratio = fit_blackwell(cases)
    errs = _errs(cases, fp8, ratio)
    print(
        "FP8 GEMM fraction: "
        + ", ".join(f"{k} {v:.2f}" for k, v in fp8.items())
        + f"; NVFP4 GEMMs {ratio:.2f} x FP8's FLOP/s ("
        + ", ".join(f"{k} {fp4_fraction(k, v, ratio):.3f}" for k, v in fp8.items())
        + ")"
        + f" (mean |error| {np.mean(np.abs(errs)):.2f}%, max {np.max(np.abs(errs)):.2f}%)"
    )
    for c, e in zip(cases, errs):
        print(f"  {c['name']:<50} {e:+6.1f}%")
    if len(cases) < 2:
        print("leave-one-out: needs two runs or more; this fit has no out-of-sample error")
        return
    print("leave-one-out (refitted without the run, then predicting it):")
    loo = []
    for i, c in enumerate(cases):
        f, r = fit_blackwell(cases[:i] + cases[i + 1 :])
        e = float(_errs([c], f, r)[0])
        loo.append(abs(e))
        print(f"  {c['name']:<50} {e:+6.1f}% (fp8 {f[_gpu_key(c)]:.2f}, speedup {r:.2f})")
    print(f"leave-one-out mean |error| {np.mean(loo):.2f}%, max {np.max(loo):.2f}%")


if __name__ == "__main__":
    main()
