"""Fit one GPU's compute efficiency on every published run of that GPU (issue 20): global for the
GPU, across frameworks, never per run; then each run's leave-one-out error.

- h100-sxm, BF16 GEMM efficiency: the H200 device measurement (0.76, 2026 software) is not what
  the published H100 runs reach; fitted on the H100 BF16 runs of llm-foundry and of NVIDIA's DGX
  Cloud MoE recipes; the MoE model zoo's tables and IBM's fms-fsdp runs check it (FITS below).
- AMD's CDNA parts: benchmarks/calibrate_cdna.py (one fraction per generation and format, on AMD's
  own runs).
- h100-sxm-96gb (torchtitan's Grand Teton H100 at a 500 W power limit): the part's sustained
  clock (GPU.sustained_clock, a fraction of the data sheet's), which scales every compute rate
  (BF16 and FP8 GEMMs, attention) since a power cap lowers the clock under load whatever the
  kernel; its efficiencies are h100-sxm's (the same chip); fitted on torchtitan's runs.
- blackwell: one FP8 fraction and one NVFP4 speedup for the generation, and each part's sustained
  clock (blackwell() below).

Each fit is np.argmin of the mean |error| over its grid, found by benchmarks/gridfit.py's
branch and bound, each run priced once per value (tests/test_constants.py reruns every fit).

Run: python benchmarks/calibrate_gpu.py [--gpu h100-sxm|h100-sxm-96gb|blackwell]
"""

from __future__ import annotations

import argparse

import gridfit
import numpy as np

from perfmodel.inputs import presets
from perfmodel.review.validate import run_case

# the h100-sxm figures a 500 W H100 shares (the same chip): only its clock is its own
SHARED = (
    "gemm_efficiency",
    "fp8_gemm_efficiency",
    "attention_efficiency",
    "fa2_attention_efficiency",
)
FITS = {
    # fit: (what is fitted, the tables fitted on, tables only checked)
    # Hopper's BF16 GEMM fraction: the runs whose step time pins it, dense (llm-foundry) or with a
    # few experts a rank (DGX Cloud's MoE recipes, whose error does not move with the per-expert
    # host time); the MoE zoo's runs, 16 experts a rank, lie along a ridge of this fraction and
    # megatron-core's per-expert host time (calibrate_overheads.py --moe, fitted on them), so
    # they check it; IBM's fms-fsdp runs (eager FSDP1, an interconnect the source states per
    # node only) check it too
    "h100-sxm": (
        "gemm_efficiency",
        ("llm-foundry", "dgxc-moe-2505"),
        ("moezoo-long-context", "moezoo-qwen3-235b", "fms-fsdp"),
    ),
    # Hopper's FP8 GEMM fraction (issue 28: one fraction per generation and format, shared by every
    # run on that hardware): every published FP8 run on the H100 and H200 (the same chip) of the
    # frameworks that run Transformer Engine or torchao FP8 GEMMs; the 500 W H100's runs check it,
    # since its clock is fitted on them
    "h100-sxm-fp8": (
        "fp8_gemm_efficiency",
        ("nemo2407-fp8", "moe-2026", "llm-foundry", "torchtitan-2506"),
        (),
    ),
    "h100-sxm-96gb": ("clock", ("torchtitan-2412",), ()),
}
# the GPU presets each fit's runs are on, and the formats it takes (None: any)
PARTS: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]] = {
    "h100-sxm": (("h100-sxm",), ("bf16",)),
    "h100-sxm-fp8": (("h100-sxm", "h200"), ("fp8",)),
    "h100-sxm-96gb": (("h100-sxm-96gb",), None),
}
GRID = np.round(np.arange(0.30, 0.801, 0.01), 2)
CLOCK_GRID = np.round(np.arange(0.50, 1.001, 0.01), 2)


def grid(what: str) -> list[float]:
    return [float(v) for v in (CLOCK_GRID if what == "clock" else GRID)]


def on_gpu(case: dict, fit: str) -> bool:
    """Whether ``case`` is a run of ``fit``'s parts and formats."""
    plan = case["plan"]
    parts, dtypes = PARTS[fit]
    ours = any(plan.system.gpu.name == presets.gpu(k).name for k in parts)
    return ours and (dtypes is None or plan.training.dtype in dtypes)


def runs(fit: str, tables: tuple[str, ...] | None = None) -> list[dict]:
    """The published runs of ``fit`` (of its tables, or of ``tables``)."""
    tables = FITS[fit][1] if tables is None else tables
    every = [c for c in presets.validation_cases() if "measured" in c]
    return [c for c in every if c["table"] in tables and on_gpu(c, fit)]


def with_value(case: dict, gpu: str, what: str, value: float) -> dict:
    plan = case["plan"]
    if what == "clock":
        h100 = presets.gpu("h100-sxm")
        update = {"sustained_clock": value, **{k: getattr(h100, k) for k in SHARED}}
    else:
        update = {what: value}
    g = plan.system.gpu.model_copy(update=update)
    return {
        **case,
        "plan": plan.model_copy(update={"system": plan.system.model_copy(update={"gpu": g})}),
    }


def _error(case: dict) -> float:
    r = run_case(case)
    return float(100 * (r.predicted_s - r.measured_s) / r.measured_s)


def errors(cases: list[dict], gpu: str, what: str, value: float) -> np.ndarray:
    return np.array([_error(with_value(c, gpu, what, value)) for c in cases])


def table(cases: list[dict], gpu: str, what: str) -> gridfit.Errors:
    """Each run's error at a value of ``what``, computed once (benchmarks/gridfit.py)."""
    by_name = {c["name"]: c for c in cases}
    return gridfit.Errors(lambda name, v: _error(with_value(by_name[name], gpu, what, float(v))))


def fit(
    cases: list[dict],
    gpu: str,
    what: str,
    errs: gridfit.Errors | None = None,
    seed: float | None = None,
) -> tuple[float, float]:
    """The GRID value of least mean |error| over ``cases`` (np.argmin over the grid, found by
    gridfit's branch and bound, looking first at ``seed``), and that mean |error|, percent."""
    errs = errs or table(cases, gpu, what)
    value, score = gridfit.fit(grid(what), [c["name"] for c in cases], errs, seed=seed)
    return float(value), score


def report(gpu: str, seed: float | None = None) -> dict:
    """What ``--gpu gpu`` prints: the fitted value and its mean |error|, each run's error, the
    checked tables' mean |error|, and each run's leave-one-out error (fitted without it).
    ``seed``: a value to look at first (the test passes the shipped one; the answer is the
    same)."""
    what, _, checks = FITS[gpu]
    cases = runs(gpu)
    errs = table(cases, gpu, what)
    names = [c["name"] for c in cases]
    value, score = fit(cases, gpu, what, errs, seed)
    checked = runs(gpu, checks)
    loo = gridfit.leave_one_out(grid(what), names, errs) if len(cases) > 1 else []
    return {
        "what": what,
        "value": value,
        "score": score,
        "runs": [(n, errs.at(n, value)) for n in names],
        "checks": checks,
        "checked": float(np.mean(np.abs(errors(checked, gpu, what, value)))) if checked else None,
        "loo": loo,
        "loo_mean": float(np.mean([abs(e) for _, _, e in loo])) if loo else None,
        "loo_max": float(np.max([abs(e) for _, _, e in loo])) if loo else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", choices=[*sorted(FITS), "blackwell"], default="h100-sxm")
    args = ap.parse_args()
    if args.gpu == "blackwell":
        blackwell()
        return
    r = report(args.gpu)
    print(
        f"{args.gpu}: {r['what']} = {r['value']:.2f} (mean |error| {r['score']:.2f}% over"
        f" {len(r['runs'])} runs)"
    )
    for name, e in r["runs"]:
        print(f"  {name:<58} {e:+6.1f}%")
    if r["checked"] is not None:
        print(f"checked, not fitted ({', '.join(r['checks'])}): mean |error| {r['checked']:.2f}%")
    if not r["loo"]:
        print("leave-one-out: needs two runs or more; this fit has no out-of-sample error")
        return
    print("leave-one-out (refitted without the run, then predicting it):")
    for name, v, e in r["loo"]:
        print(f"  {name:<58} {e:+6.1f}% (fit {v:.2f})")
    print(f"leave-one-out mean |error| {r['loo_mean']:.2f}%, max {r['loo_max']:.2f}%")


# --- Blackwell (issue 22, 28): Megatron-Bridge runs on B200, GB200 and GB300 --------------------
# One FP8 GEMM fraction (MXFP8 at the same tensor-core rate) and one NVFP4 speedup over the FP8
# GEMMs' achieved FLOP/s for the generation: the same tensor cores and kernels on every part. What
# differs between the parts is the clock each sustains under its power limit (GPU.sustained_clock):
# it scales every compute rate, FP8, NVFP4, BF16 GEMMs and attention alike, so the fit separates
# it from the fraction by the runs' non-FP8 work, and runs of other tables (the MoE runs on
# Blackwell, MLPerf) check it out of sample. GB300 is the reference (its clock 1.0: Blackwell
# Ultra at 1,400 W): the fraction is fitted on its FP8 runs, then each other part's clock on its
# own FP8 and MXFP8 runs, then the speedup on the NVFP4 runs.
BLACKWELL = ("b200", "gb200", "gb300")
REFERENCE = "gb300"
FP8_GRID = np.round(np.arange(0.30, 0.901, 0.01), 2)
RATIO_GRID = np.round(np.arange(1.00, 2.501, 0.02), 2)
FP8_VALUES = [float(v) for v in FP8_GRID]
CLOCK_VALUES = [float(v) for v in CLOCK_GRID]
RATIO_VALUES = [float(v) for v in RATIO_GRID]


def _gpu_key(case: dict) -> str:
    return next(k for k in BLACKWELL if case["plan"].system.gpu.name == presets.gpu(k).name)


def fp4_fraction(gpu: str, fp8: float, speedup: float) -> float:
    """The NVFP4 GEMM fraction that runs ``speedup`` x the FP8 GEMMs' achieved FLOP/s."""
    g = presets.gpu(gpu)
    return min(1.0, speedup * fp8 * g.peak("fp8") / g.peak("nvfp4"))


def _blackwell_case(case: dict, fp8: float, clock: float, ratio: float) -> dict:
    """A case with the generation's FP8 (and MXFP8) GEMM fraction, NVFP4 GEMMs at ``ratio`` x the
    FP8 ones' achieved FLOP/s, and its part at ``clock``."""
    plan = case["plan"]
    key = _gpu_key(case)
    g = plan.system.gpu.model_copy(
        update={
            "fp8_gemm_efficiency": fp8,
            "fp4_gemm_efficiency": fp4_fraction(key, fp8, ratio),
            "sustained_clock": clock,
        }
    )
    return {
        **case,
        "plan": plan.model_copy(update={"system": plan.system.model_copy(update={"gpu": g})}),
    }


class _BlackwellErrors:
    """Each Blackwell run's error at the generation's FP8 fraction, its part's clock and the NVFP4
    speedup, computed once (an FP8 or MXFP8 run's does not depend on the speedup)."""

    def __init__(self, cases: list[dict]) -> None:
        self.cases = {c["name"]: c for c in cases}
        self.memo: dict[tuple[str, float, float, float], float] = {}

    def at(self, name: str, fp8: float, clock: float, ratio: float) -> float:
        c = self.cases[name]
        ratio = ratio if c["plan"].training.dtype == "nvfp4" else 1.0
        key = (name, fp8, clock, ratio)
        if key not in self.memo:
            self.memo[key] = _error(_blackwell_case(c, fp8, clock, ratio))
        return self.memo[key]

    def along(self, what: str, fixed: dict[str, float], clocks: dict[str, float]) -> gridfit.Errors:
        """Errors along one parameter (fp8, clock or ratio), the others as ``fixed``."""

        def one(name: str, v: float) -> float:
            p = {**fixed, what: float(v)}
            clock = p["clock"] if what == "clock" else clocks[_gpu_key(self.cases[name])]
            return self.at(name, p["fp8"], clock, p["ratio"])

        return gridfit.Errors(one)


def fit_blackwell(
    cases: list[dict], errs: _BlackwellErrors | None = None, seeds: dict | None = None
) -> tuple[float, dict[str, float], float]:
    """(the generation's FP8 fraction, each part's sustained clock, the NVFP4 speedup), each the
    least mean |error| on its grid (benchmarks/gridfit.py) in the order above, looking first at
    ``seeds`` (fp8, clocks, ratio) where given. A part without a run keeps clock 1.0; without a
    reference run the fraction is fitted on every FP8 run at clock 1.0."""
    errs = errs or _BlackwellErrors(cases)
    seeds = seeds or {}
    clocks = dict.fromkeys(BLACKWELL, 1.0)
    fp8_runs = [c for c in cases if c["plan"].training.dtype != "nvfp4"]
    ref = [c["name"] for c in fp8_runs if _gpu_key(c) == REFERENCE] or [c["name"] for c in fp8_runs]
    fixed = {"fp8": 0.8, "clock": 1.0, "ratio": 1.0}
    fp8, _ = gridfit.fit(FP8_VALUES, ref, errs.along("fp8", fixed, clocks), seed=seeds.get("fp8"))
    fixed["fp8"] = float(fp8)
    for k in BLACKWELL:
        own = [c["name"] for c in fp8_runs if _gpu_key(c) == k]
        if k != REFERENCE and own:
            seed = seeds.get("clocks", {}).get(k)
            v, _ = gridfit.fit(CLOCK_VALUES, own, errs.along("clock", fixed, clocks), seed=seed)
            clocks[k] = float(v)
    fp4 = [c["name"] for c in cases if c["plan"].training.dtype == "nvfp4"]
    ratio = 1.0
    if fp4:
        seed = seeds.get("ratio")
        r, _ = gridfit.fit(RATIO_VALUES, fp4, errs.along("ratio", fixed, clocks), seed=seed)
        ratio = float(r)
    return fixed["fp8"], clocks, ratio


def blackwell_report(loo: bool = True, seeds: dict | None = None) -> dict:
    """What ``--gpu blackwell`` prints: the fraction, clocks and speedup, each run's error, and
    (``loo``) each run's leave-one-out error; ``seeds``: values to look at first."""
    cases = [c for c in presets.validation_cases() if c["table"] == "mbridge-blackwell"]
    errs = _BlackwellErrors(cases)
    fp8, clocks, ratio = fit_blackwell(cases, errs, seeds)
    runs = [(c["name"], errs.at(c["name"], fp8, clocks[_gpu_key(c)], ratio)) for c in cases]
    out: dict = {"fp8": fp8, "clocks": clocks, "ratio": ratio, "runs": runs}
    if not loo:
        return out
    out_seeds = {"fp8": fp8, "clocks": clocks, "ratio": ratio}
    loo_runs = []
    for i, c in enumerate(cases):
        f, cl, r = fit_blackwell(cases[:i] + cases[i + 1 :], errs, out_seeds)
        k = _gpu_key(c)
        loo_runs.append((c["name"], f, cl[k], r, errs.at(c["name"], f, cl[k], r)))
    return out | {
        "loo": loo_runs,
        "loo_mean": float(np.mean([abs(x[-1]) for x in loo_runs])),
        "loo_max": float(np.max([abs(x[-1]) for x in loo_runs])),
    }


def blackwell() -> None:
    r = blackwell_report()
    fp8, clocks, ratio = r["fp8"], r["clocks"], r["ratio"]
    errs = np.array([e for _, e in r["runs"]])
    print(
        f"FP8 GEMM fraction {fp8:.2f}; NVFP4 GEMMs {ratio:.2f} x FP8's FLOP/s ("
        + ", ".join(f"{k} {fp4_fraction(k, fp8, ratio):.3f}" for k in BLACKWELL)
        + "); sustained clock "
        + ", ".join(f"{k} {v:.2f}" for k, v in clocks.items())
        + f" (mean |error| {np.mean(np.abs(errs)):.2f}%, max {np.max(np.abs(errs)):.2f}%)"
    )
    for name, e in r["runs"]:
        print(f"  {name:<50} {e:+6.1f}%")
    print("leave-one-out (refitted without the run, then predicting it):")
    for name, f, clock, ratio, e in r["loo"]:
        print(f"  {name:<50} {e:+6.1f}% (fp8 {f:.2f}, clock {clock:.2f}, speedup {ratio:.2f})")
    print(f"leave-one-out mean |error| {r['loo_mean']:.2f}%, max {r['loo_max']:.2f}%")


if __name__ == "__main__":
    main()
