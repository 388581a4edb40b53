"""Fit a calibration to one run's profiler trace (issue 32): one factor per kernel class.

The factor of a class (GEMMs by format, attention, elementwise, exposed communication) is the
trace's kernel seconds a step in that class over the model's seconds in it; the model's seconds in
a class are the step's sensitivity to the class's factor (d t / d log f, by finite differences), so
a factor acts where it was measured. The trace's idle time beyond the model's bubble and fixed
overheads becomes overhead_s. A class the plan spends time on and the trace has no kernels of, or
kernels of a class the plan does not run, is refused by name. The classes are inputs/trace.py's
(Holistic Trace Analysis's, split further by kernel name).
"""

from __future__ import annotations

import math
from typing import Any

from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.errors import PerfModelError
from perfmodel.review import calibrate_checks as checks
from perfmodel.review.calibrate import EPS, _factors, _run_rows, per_run_scatter, step_time
from perfmodel.review.measured_run import MeasuredRun
from perfmodel.specs.calibrated_plan import apply_factors
from perfmodel.specs.calibration import Calibration

TRACE_FACTORS = ("gemm_bf16", "gemm_fp8", "gemm_fp4", "attention", "memory", "comm")
TRACE_CLASS = {  # the trace's kernel class each trace factor is measured by (inputs/trace.py)
    "gemm_bf16": "gemm_bf16",
    "gemm_fp8": "gemm_fp8",
    "gemm_fp4": "gemm_fp4",
    "attention": "attention",
    "memory": "elementwise",
    "comm": "exposed_comm",
}
MIN_CLASS_SHARE = 0.01  # a kernel class under 1% of the modelled step is not fitted
ROUNDS = 8  # rounds of the fixed point that lets the classes settle together (settle)
MISS = 0.1  # a class whose calibrated seconds miss the trace's by more is named in the notes


def class_seconds(plan: Any, theta: dict[str, float], names: list[str]) -> dict[str, float]:
    """The model's seconds a step in each class of ``names`` at the log factors ``theta``: the
    step's sensitivity to the class's factor, d t / d log f."""
    base = step_time(plan, theta)
    return {n: (step_time(plan, {**theta, n: theta.get(n, 0.0) + EPS}) - base) / EPS for n in names}


def settle(
    plan: Any, theta: dict[str, float], target: dict[str, float]
) -> tuple[dict[str, float], dict[str, float]]:
    """(log factors, the calibrated model's seconds a step by class): the one-shot factors moved
    until every class takes the trace's seconds at once. The classes meet in the model's roofline
    (a GEMM's bytes move at the HBM rate the memory factor sets), so each round moves each factor
    half the log of its class's miss, and the round that misses least is kept."""
    from perfmodel.review.calibrate_ceilings import floors

    names = list(target)
    lowest = floors([plan], names)  # no class faster than its ceiling (issue 39)
    theta = {**theta, **{n: max(theta[n], lowest[n]) for n in names}}
    best, best_miss, best_s = dict(theta), math.inf, class_seconds(plan, theta, names)
    for _ in range(ROUNDS):
        got = class_seconds(plan, theta, names)
        miss = max(abs(math.log(max(got[n], 1e-12) / target[n])) for n in names)
        if miss < best_miss:
            best, best_miss, best_s = dict(theta), miss, got
        if miss < 0.01:
            break
        theta = {
            **theta,
            **{
                n: max(theta[n] + 0.5 * math.log(target[n] / got[n]), lowest[n])
                for n in names
                if got[n] > 0
            },
        }
    return best, best_s


def fit_trace(run: MeasuredRun) -> Calibration:
    """A calibration from one run's trace: one factor per kernel class (module docstring)."""
    tr = run.trace
    assert tr is not None  # the caller passes a run with a trace
    checks.trace_agrees(run, per_run_scatter())
    measured = tr.per_step()
    base = step_time(run.plan, {})
    factors: dict[str, float] = {}
    not_fitted: dict[str, str] = {}
    table: dict[str, Any] = {}
    timeline = measured["idle"] is not None
    for name in TRACE_FACTORS:
        cls = TRACE_CLASS[name]
        if cls == "exposed_comm" and not timeline:
            not_fitted[name] = "the nsys summary has no timeline: exposed communication unknown"
            continue
        model_s = (step_time(run.plan, {name: EPS}) - base) / EPS
        got = float(measured[cls] or 0.0)
        table[name] = {"trace_s_per_step": round(got, 6), "model_s_per_step": round(model_s, 6)}
        if model_s < MIN_CLASS_SHARE * base:
            if got > MIN_CLASS_SHARE * base:
                raise PerfModelError(
                    f"trace {tr.source}: {got * 1e3:.1f} ms a step of {cls} kernels, which the"
                    f" plan {run.name} does not run ({name}): the plan is not the run traced"
                )
            not_fitted[name] = f"under {100 * MIN_CLASS_SHARE:.0f}% of the modelled step"
            continue
        if got <= 0:  # hidden communication is not fitted; another class missing is refused
            not_fitted[name] = checks.missing_class(run, name, cls, measured, model_s)
            continue
        factors[name] = got / model_s
    target = {k: float(measured[TRACE_CLASS[k]] or 0.0) for k in factors}
    theta, settled = settle(run.plan, {k: math.log(v) for k, v in factors.items()}, target)
    missed = []
    for k, got in settled.items():
        table[k]["calibrated_s_per_step"] = round(got, 6)
        if abs(got / target[k] - 1) > MISS:
            missed.append(f"{k} {got * 1e3:.1f} ms against {target[k] * 1e3:.1f}")
    if timeline:
        # host gaps: the trace's idle time a step beyond what the model leaves idle (its bubble
        # and fixed overheads), as seconds a step
        p = apply_factors(run.plan, {k: math.exp(v) for k, v in theta.items()})
        v = estimate(p, resolve_config(p)).values
        model_idle = v["bubble"] + v["overhead"]
        extra = float(measured["idle"] or 0.0) - model_idle
        table["idle"] = {
            "trace_s_per_step": round(float(measured["idle"] or 0.0), 6),
            "model_s_per_step": round(model_idle, 6),
        }
        theta["overhead_s"] = max(extra, -run.plan.training.step_overhead_s)
    else:
        not_fitted["overhead_s"] = "the nsys summary has no timeline: idle time unknown"
    if run.measured_s is None and measured["step"] is not None:
        run.measured_s = float(measured["step"])
        run.notes.append(f"{run.name}: step time from the trace's span ({run.measured_s:.3f} s)")
    notes = [
        *run.notes,
        f"trace {tr.source}: {tr.steps} step(s), {sum(tr.kernels.values()):,} kernels",
        "the model's time in a class is the step's sensitivity to that class's factor",
    ]
    if missed:
        notes.append(
            "no factors give every class the trace's seconds (the classes share the model's HBM"
            " rate: a GEMM at the fitted memory factor is bound by its bytes); calibrated, a"
            " step: "
            + "; ".join(missed)
        )
    return Calibration(
        factors=_factors(theta),
        fitted_from="trace",
        runs=_run_rows([run], theta) if run.measured_s else [],
        not_fitted=not_fitted,
        trace=table | {
            "collectives_s_per_step": {k: v / tr.steps for k, v in tr.collectives_s.items()}
        },
        notes=notes,
    )
