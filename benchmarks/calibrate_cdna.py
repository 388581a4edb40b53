"""Fit AMD Instinct's achieved GEMM fractions (issue 31): one per CDNA generation and format, on
AMD's own published training runs, global across them; then each run's leave-one-out error.

Parameters (fractions of the data-sheet peaks, end to end, as the H100 and Blackwell fits):
- CDNA 3, at the MI325X's clock (1,000 W): the BF16 GEMM fraction and the FP8 one.
- CDNA 3, MI300X (the same die at 750 W): the MI325X's fractions times AMD's measured ratio of the
  two parts' Max-Achievable FLOP/s, per format. ROCm blog "Measuring Max-Achievable FLOPs - Part
  2" (ROCm/rocm-blogs blogs/software-tools-optimization/measuring-max-achievable-flops-part2,
  2025-02-28), Table 1, hipBLASLt at its best shape under sustained load: MI300X 708 BF16 and
  1,273 FP8 TFLOP/s (median clocks 1,207 and 1,230 MHz), MI325X 843 and 1,519 TFLOP/s (1,447 and
  1,464 MHz); both peaks are at 2,100 MHz. So the MI300X runs its GEMMs at 708 / 843 = 0.840
  (BF16) and 1,273 / 1,519 = 0.838 (FP8) of the MI325X's rate: the power limit's clock, measured,
  not fitted. The same factor scales the MI300X's attention fraction (a clock slows every kernel).
- CDNA 4, at the MI355X's clock (1,400 W): one fraction for FP8 and BF16 GEMMs (no CDNA 4 BF16
  run with a step time is published: BF16 takes FP8's fraction, as CDNA 3's fits found them equal).
- CDNA 4, MI350X (the same chip at 1,000 W, air cooled): a clock factor on every compute fraction
  of the MI355X's. Its data-sheet peaks already carry its lower peak clock (2.2 against 2.4 GHz);
  the factor is what the power limit takes off under load. No published MAF measures it, so it is
  fitted on the MI350X's one run; with that run left out it is 1.0.

Fitted on the tables of AMD's own measurements (amd-instinct: the MLPerf Training v5.1 AMD
submission; amd-perf-results: AMD's ROCm performance results page). The Primus-pipeline blog's
runs (primus-pipeline) are only checked: their step times are the subject of the schedules issue,
and their source is one short test configuration (docs/amd-and-scale.md).

A generation with no run of a format takes the generation's other format; a generation with no
run at all takes the other generation's fractions (at its own MAF ratio); with no AMD run at all,
every part has the H100's BF16 fraction (benchmarks/oos_errors.py's prior).

Run: python benchmarks/calibrate_cdna.py   (under a minute)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from perfmodel.inputs import presets
from perfmodel.review.validate import run_case

TABLES = ("amd-instinct", "amd-perf-results")
CHECKS = ("primus-pipeline",)
CDNA3, CDNA4 = ("mi300x", "mi325x"), ("mi350x", "mi355x")
# AMD's measured Max-Achievable FLOP/s, MI300X over MI325X (ROCm blog, MAF part 2, Table 1)
MI300X_MAF = {"bf16": 708 / 843, "fp8": 1273 / 1519}
GRID = np.round(np.arange(0.30, 0.801, 0.01), 2)
CLOCK_GRID = np.round(np.arange(0.70, 1.101, 0.01), 2)
ATTENTION = ("attention_efficiency", "fa2_attention_efficiency")


@dataclass(frozen=True)
class Fractions:
    """The fitted figures; None where no run informs them (then carried, see the module doc)."""

    cdna3_bf16: float | None = None
    cdna3_fp8: float | None = None
    cdna4: float | None = None
    mi350x_clock: float = 1.0

    def resolved(self) -> Fractions:
        """The carried values filled in: a format from the generation's other format, a
        generation from the other generation, nothing from the H100's BF16 fraction."""
        c3b, c3f, c4 = self.cdna3_bf16, self.cdna3_fp8, self.cdna4
        c3b = c3b if c3b is not None else c3f
        c3f = c3f if c3f is not None else c3b
        if c3b is None:
            c3b = c3f = c4
        if c4 is None:
            c4 = c3f
        if c4 is None:
            c3b = c3f = c4 = float(presets.gpu("h100-sxm").gemm_efficiency)
        return replace(self, cdna3_bf16=c3b, cdna3_fp8=c3f, cdna4=c4)


def part(case: dict) -> str | None:
    name = case["plan"].system.gpu.name
    return next((k for k in CDNA3 + CDNA4 if presets.gpu(k).name == name), None)


def gpu_fields(key: str, f: Fractions) -> dict[str, float]:
    """The efficiency fields of part ``key`` under the fractions ``f`` (resolved), to 4 decimals
    as the presets ship them (the greedy V-Half and ZB-V schedules of the Primus runs change order
    at some 1e-6 steps of a fraction, by up to 2% of their step)."""
    f = f.resolved()
    assert f.cdna3_bf16 is not None and f.cdna3_fp8 is not None and f.cdna4 is not None
    base = presets.gpu(key)
    if key in CDNA3:
        bf16, fp8, clock = f.cdna3_bf16, f.cdna3_fp8, 1.0
        if key == "mi300x":
            bf16, fp8 = bf16 * MI300X_MAF["bf16"], fp8 * MI300X_MAF["fp8"]
            clock = MI300X_MAF["bf16"]
    else:
        clock = f.mi350x_clock if key == "mi350x" else 1.0
        bf16 = fp8 = f.cdna4 * clock
    out = {"gemm_efficiency": bf16, "fp8_gemm_efficiency": fp8}
    mi325x, mi355x = presets.gpu("mi325x"), presets.gpu("mi355x")
    ref = mi325x if key in CDNA3 else mi355x
    for k in ATTENTION:
        v = getattr(ref, k)
        if v is not None and getattr(base, k) is not None:
            out[k] = v * clock
    return {k: round(v, 4) for k, v in out.items()}


def with_fractions(case: dict, f: Fractions) -> dict:
    key = part(case)
    if key is None:
        return case
    plan = case["plan"]
    g = plan.system.gpu.model_copy(update=gpu_fields(key, f))
    return {
        **case,
        "plan": plan.model_copy(update={"system": plan.system.model_copy(update={"gpu": g})}),
    }


def errors(cases: list[dict], f: Fractions) -> np.ndarray:
    out = []
    for c in cases:
        r = run_case(with_fractions(c, f))
        out.append(100 * (r.predicted_s - r.measured_s) / r.measured_s)
    return np.array(out)


def _best(cases: list[dict], f: Fractions, field: str, grid: np.ndarray) -> float | None:
    if not cases:
        return None
    scores = [np.mean(np.abs(errors(cases, replace(f, **{field: float(v)})))) for v in grid]
    return float(grid[int(np.argmin(scores))])


def fit(cases: list[dict]) -> Fractions:
    """Each figure on the runs it governs, minimizing the mean |error| on a grid: CDNA 3's FP8 and
    BF16 fractions in turn (twice, as each run has some GEMMs of the other format: the logits),
    then CDNA 4's fraction on the MI355X's runs and the MI350X's clock on its own."""
    ours = [c for c in cases if part(c) is not None]
    dtype = {id(c): c["plan"].training.dtype for c in ours}
    c3 = [c for c in ours if part(c) in CDNA3]
    c3_fp8 = [c for c in c3 if dtype[id(c)] != "bf16"]
    c3_bf16 = [c for c in c3 if dtype[id(c)] == "bf16"]
    f = Fractions()
    for _ in range(2):
        f = replace(f, cdna3_fp8=_best(c3_fp8, f, "cdna3_fp8", GRID))
        f = replace(f, cdna3_bf16=_best(c3_bf16, f, "cdna3_bf16", GRID))
    f = replace(f, cdna4=_best([c for c in ours if part(c) == "mi355x"], f, "cdna4", GRID))
    clock = _best([c for c in ours if part(c) == "mi350x"], f, "mi350x_clock", CLOCK_GRID)
    return replace(f, mi350x_clock=1.0 if clock is None else clock)


def fitted_cases() -> list[dict]:
    every = [c for c in presets.validation_cases() if "measured" in c]
    return [c for c in every if c["table"] in TABLES and part(c) is not None]


def _say(f: Fractions) -> str:
    r = f.resolved()
    return (
        f"CDNA 3 (MI325X) BF16 {r.cdna3_bf16:.2f}, FP8 {r.cdna3_fp8:.2f}; CDNA 4 (MI355X)"
        f" {r.cdna4:.2f}; MI350X clock {r.mi350x_clock:.2f}"
    )


def main() -> None:
    cases = fitted_cases()
    f = fit(cases)
    errs = errors(cases, f)
    print(f"{_say(f)} (mean |error| {np.mean(np.abs(errs)):.2f}% over {len(cases)} runs)")
    for key in CDNA3 + CDNA4:
        fields = gpu_fields(key, f)
        print(f"  {key}: " + ", ".join(f"{k} {v:.3f}" for k, v in fields.items()))
    for c, e in zip(cases, errs):
        print(f"  {c['name']:<50} {e:+6.1f}%")
    checked = [c for c in presets.validation_cases() if c["table"] in CHECKS and "measured" in c]
    ce = errors(checked, f)
    print(f"checked, not fitted ({', '.join(CHECKS)}):")
    for c, e in zip(checked, ce):
        print(f"  {c['name']:<50} {e:+6.1f}%")
    print("leave-one-out (refitted without the run, then predicting it):")
    loo = []
    for i, c in enumerate(cases):
        g = fit(cases[:i] + cases[i + 1 :])
        e = float(errors([c], g)[0])
        loo.append(abs(e))
        print(f"  {c['name']:<50} {e:+6.1f}% ({_say(g)})")
    print(f"leave-one-out mean |error| {np.mean(loo):.2f}%, max {np.max(loo):.2f}%")


if __name__ == "__main__":
    main()
