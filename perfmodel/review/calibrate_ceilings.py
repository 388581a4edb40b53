"""What a calibration may not believe (issue 39): measurements and factors past the hardware.

`perfmodel calibrate` fits what it is given; these checks refuse, by name, what no hardware can do
or no fit can follow:

- a measured step faster than the ceilings allow for its plan: the plan's model FLOPs (Korthikanti
  2022 eq. 7, the MFU convention of every output) at the GPU's best measured matmul rate
  (specs/ceilings.py) is a lower bound on the step; a measurement under it implies an MFU above
  the ceiling's share of peak;
- a measured step absurdly slow: an implied MFU below MIN_MFU (0.1%), which no training run shows
  (a step in milliseconds given as seconds, or a figure off by orders of magnitude);
- runs of one configuration (the same plan: scale, layout, model, format, GPU and batch) whose
  measurements disagree beyond the model's per-run scatter (review/calibrate.per_run_scatter):
  the model predicts them alike, so one factor cannot follow both;
- fitted factors that make a calibrated rate pass its ceiling: a GEMM above the best measured
  matmul of its format, HBM above its bandwidth, a link above the most any collective reached
  over it, any efficiency above 1 where no ceiling is known;
- a fit that leaves a run more than MAX_RUN_ERROR (a factor of 2) off its measurement.

Each function raises PerfModelError with one line naming the run, the field and the implied rate;
review/calibrate_fit.fit calls check_runs before fitting and check_fit after.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from perfmodel.engine import calibrated
from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.errors import PerfModelError
from perfmodel.specs.calibrated_plan import apply_factors, past, rates, say_past
from perfmodel.specs.calibration import GROUPS

if TYPE_CHECKING:
    from perfmodel.review.measured_run import MeasuredRun
    from perfmodel.specs import Plan
    from perfmodel.specs.calibration import Calibration

MIN_MFU = 0.001  # an implied MFU below 0.1% is no training step (issue 39)
MAX_RUN_ERROR = math.log(2.0)  # a calibrated run more than 2x off its measurement (log)


def _pct(x: float) -> str:
    """A share as people read it: 124%, 13.5%, 0.00002%, 21,085%, 2.1e+305%."""
    p = 100 * x
    if p >= 1e6:
        return f"{p:.2g}%"
    return f"{p:,.0f}%" if p >= 100 else f"{p:.3g}%" if p >= 0.01 else f"{p:.1g}%"


def _num(x: float) -> str:
    """A rate as people read it: 21,140, 0.0082, 8.2e+06."""
    return f"{x:,.0f}" if 100 <= x < 1e7 else f"{x:.3g}"


def _value(run: MeasuredRun) -> str:
    """The measured figure as RUNS.yaml gave it (none for a trace)."""
    if run.field.endswith("trace"):
        return ""
    if run.field.endswith("tokens_per_s_per_gpu"):
        p = run.plan
        rate = p.training.global_batch_size * p.seq_length / (run.step_s * p.system.num_gpus)
        return f"{rate:g}"
    return f"{run.step_s:g}"


def implied_mfu(run: MeasuredRun) -> tuple[float, float, str]:
    """(MFU the measured step implies, tokens/s per GPU it implies, the MFU format): the model's
    FLOPs of the plan over the measured step, against the peak the plan's MFU is quoted at."""
    e = estimate(run.plan, resolve_config(run.plan))
    v = e.values
    scale = float(v["step_time_s"]) / run.step_s
    return float(v["mfu"]) * scale, float(v["tokens_per_s_per_gpu"]) * scale, e.mfu_peak


def check_measured(i: int, run: MeasuredRun) -> None:
    """Refuse a measured step faster than the GPU's matmul ceiling allows, or absurdly slow."""
    mfu, tokens, dtype = implied_mfu(run)
    gpu = run.plan.system.gpu
    where = f"{run.field} {_value(run)} ({run.name})".replace("  ", " ")
    implied = (
        f"{_num(tokens)} tokens/s per GPU, MFU {_pct(mfu)} of the {gpu.name}'s {dtype.upper()} peak"
    )
    ceiling = gpu.ceilings.gemm_rate(dtype) if gpu.ceilings else None
    share = ceiling.rate / gpu.peak(dtype) if ceiling else 1.0
    if mfu > share:
        basis = f" ({ceiling.source})" if ceiling else " (no ceiling known: the data sheet's peak)"
        raise PerfModelError(
            f"{where}: {implied}; the ceiling is {_pct(share)}, the best matmul measured on"
            f" it{basis}, and no step runs faster. Is it the seconds of one optimizer step of"
            " the plan's global batch and sequence? Check it and the plan"
        )
    if mfu < MIN_MFU:
        raise PerfModelError(
            f"{where}: {implied}, below {_pct(MIN_MFU)}: no training step runs that slowly; a"
            " step time in seconds (not milliseconds), for one optimizer step?"
        )


def _key(run: MeasuredRun) -> str:
    """The configuration of a run: what the model predicts alike."""
    k = calibrated.kind(run.plan, resolve_config(run.plan))
    return json.dumps([k, run.plan.training.global_batch_size], sort_keys=True, default=str)


def check_consistent(runs: list[MeasuredRun], scatter: float) -> None:
    """Refuse two runs of one configuration measured further apart than the model's per-run
    scatter (``scatter``, a relative error): the model predicts them alike."""
    seen: dict[str, tuple[int, MeasuredRun]] = {}
    for i, r in enumerate(runs):
        key = _key(r)
        if key not in seen:
            seen[key] = (i, r)
            continue
        j, first = seen[key]
        ratio = max(r.step_s, first.step_s) / min(r.step_s, first.step_s)
        if math.log(ratio) > math.log1p(scatter):
            raise PerfModelError(
                f"runs[{j}] {first.name} and runs[{i}] {r.name}: one configuration measured"
                f" {first.step_s:g} s and {r.step_s:g} s a step, {ratio:.2f}x apart, beyond the"
                f" model's per-run scatter ({_pct(scatter)}); check {first.field} and"
                f" {r.field}, or drop the one that is wrong"
            )


def check_runs(runs: list[MeasuredRun], scatter: float) -> None:
    """Every check a run's measurement must pass before a fit (module docstring)."""
    for i, r in enumerate(runs):
        if r.measured_s is not None:
            check_measured(i, r)
    check_consistent([r for r in runs if r.measured_s is not None], scatter)


def floors(plans: list[Plan], names: list[str]) -> dict[str, float]:
    """The smallest log factor of each of ``names`` that keeps every rate it moves, on every one of
    ``plans``, at most its ceiling: f >= rate / ceiling keeps rate / f under it (never above 0: a
    preset already past a ceiling is clamped where the rate is formed, not slowed); -inf for
    overhead_s. The fits (review/calibrate.gauss_newton, calibrate_trace.settle) stay within."""
    out = {}
    for name in names:
        moved = GROUPS.get(name, (name,))
        shares = [
            rate / ceiling
            for p in plans
            for fac, _what, rate, ceiling, _source in rates(p, p.system.gpu)
            if fac in moved
        ]
        out[name] = math.log(min(1.0, max(shares))) if shares else -math.inf
    return out


def check_factors(cal: Calibration, runs: list[MeasuredRun]) -> None:
    """Refuse factors that make a calibrated rate of a run's plan pass its ceiling."""
    factors = cal.expanded()
    for r in runs:
        hit = past(apply_factors(r.plan, factors), factors)
        if hit is not None:
            raise PerfModelError(
                f"{say_past(hit, factors, cal)} (fitted on {r.name}); check {r.field}"
                f" {_value(r)}".rstrip()
            )


def check_residuals(cal: Calibration, runs: list[MeasuredRun]) -> None:
    """Refuse a fit that leaves a run more than MAX_RUN_ERROR off its measurement."""
    fields = {r.name: r for r in runs}
    for row in cal.runs:
        if abs(row.residual) > MAX_RUN_ERROR:
            r = fields[row.name]
            off = row.calibrated_step_time_s / row.measured_step_time_s - 1
            shown = ", ".join(f"{k} x{v:.3f}" for k, v in cal.factors.items())
            raise PerfModelError(
                f"{r.field} {_value(r)} ({r.name}): the fitted factors ({shown}) leave it"
                f" {100 * off:+,.0f}% off (calibrated {row.calibrated_step_time_s:.4g} s,"
                f" measured {row.measured_step_time_s:.4g} s): the runs disagree in a way no"
                " factor follows; check that run's measurement and plan, or calibrate on the"
                " others"
            )


def held(cal: Calibration, runs: list[MeasuredRun]) -> list[str]:
    """A note for each fitted factor the fit held at a ceiling (floors)."""
    out = []
    for name, value in cal.factors.items():
        low = floors([r.plan for r in runs], [name])[name]
        if name != "overhead_s" and low < 0 and math.log(value) <= low + 1e-3:
            out.append(
                f"{name} x{value:.3f}: held at a ceiling (the best rate measured on the GPU or"
                " link it moves); the runs ask it faster than the hardware goes, so the model's"
                " time for that work is off in a way one factor does not describe (an overlap,"
                " a kernel it does not model)"
            )
    return out


def check_fit(cal: Calibration, runs: list[MeasuredRun]) -> Calibration:
    """Every check a fitted calibration must pass (module docstring); ``cal`` with a note for
    each factor the fit held at a ceiling."""
    if cal.fitted_from != "trace":
        check_factors(cal, runs)
        check_residuals(cal, runs)
    return cal.model_copy(update={"notes": [*cal.notes, *held(cal, runs)]})
