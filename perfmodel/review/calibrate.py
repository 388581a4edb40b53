"""Fit a calibration to a team's own measured runs (issue 32): what the data identify, no more.

Each factor multiplies the time of one class of work (specs/calibration.py says how a plan takes
it). The model of run i with factors theta is t_i(theta), the step time of the calibrated plan;
the fit minimizes sum_i (log t_i(theta) - log measured_i)^2 by Gauss-Newton, the Jacobian
J_ij = d log t_i / d theta_j by finite differences (theta_j = log factor_j; overhead_s in
seconds). What is fitted:
- one step time: one factor, ``compute`` (GEMMs, attention, memory: what a power limit, a clock
  or a kernel version moves), less the part of the run's deviation that the model's per-run
  error within a stack may explain (one_run_target);
- several step times: ``compute``, ``comm`` and ``overhead_s`` as far as the runs tell them apart,
  by default one factor fewer than runs (a residual to spare): a factor is identified when some
  run's step moves by at least MIN_SENSITIVITY with it, the column-normalized Jacobian has a
  condition number below MAX_CONDITION (runs that differ in scale or layout spend different
  shares of their step in communication), and its standard error (at the runs' scatter about
  the fit, never below the model's smallest published per-run error) is under MAX_SE, or for
  overhead_s moves no run's step by more than MAX_EFFECT; a factor asked for by name (``fit:``)
  that fails is refused by name;
- a trace: one factor per kernel class (GEMMs by format, attention, elementwise, exposed
  communication) as measured kernel seconds a step over the model's seconds in that class (the
  step's sensitivity to the class's factor), and the host idle time left over as overhead_s.
The out-of-sample error is leave-one-run-out (SPEC 13): each run predicted by a fit on the others.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from perfmodel.engine import calibrated, uncertainty
from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.errors import PerfModelError
from perfmodel.review.measured_run import MeasuredRun
from perfmodel.specs import Plan
from perfmodel.specs.by_plan import ByPlan
from perfmodel.specs.calibrated_plan import apply_factors
from perfmodel.specs.calibration import Calibration, CalibrationRun

STEP_FACTORS = ("compute", "comm", "overhead_s")  # what step times can tell apart, in that order
MIN_SENSITIVITY = 0.01  # a factor some run's step moves at least 1% with (d log t / d log f)
MAX_CONDITION = 30.0  # of the column-normalized Jacobian: above it two factors are confounded
MAX_SE = 0.2  # a factor known to no better than x e^0.2 (22%), one standard error, is not fitted
MAX_EFFECT = 0.1  # an overhead whose standard error moves a run's step by more is not fitted
EPS = 0.05  # finite-difference step, in log factor (5%) or, for overhead_s, seconds x step


_CACHE: ByPlan[float] = ByPlan(100_000)


def step_time(plan: Plan, theta: dict[str, float]) -> float:
    """The step time of ``plan`` with the factors ``theta`` (log factors; overhead_s in s),
    remembered: leave-one-run-out refits ask for the same points many times."""
    key = tuple(sorted((k, round(v, 12)) for k, v in theta.items() if v))

    def compute() -> float:
        factors = {k: v if k == "overhead_s" else math.exp(v) for k, v in theta.items()}
        cal = Calibration(factors=factors, fitted_from="step_times", runs=[])
        p = apply_factors(plan, cal.expanded())
        return float(estimate(p, resolve_config(p)).values["step_time_s"])

    return _CACHE.get(plan, key, compute)


def _log_times(runs: list[MeasuredRun], theta: dict[str, float]) -> np.ndarray:
    return np.log([step_time(r.plan, theta) for r in runs])


def jacobian(runs: list[MeasuredRun], theta: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """(log t at theta, d log t / d theta), finite differences, one column per factor."""
    base = _log_times(runs, theta)
    cols = []
    for name in theta:
        step = EPS * float(np.exp(base).min()) if name == "overhead_s" else EPS
        moved = _log_times(runs, {**theta, name: theta[name] + step})
        cols.append((moved - base) / step)
    return base, np.array(cols).T.reshape(len(runs), len(theta))


def identifiable(jac: np.ndarray, names: list[str]) -> str | None:
    """None, or why the factors ``names`` are not told apart by the runs of ``jac``."""
    n, k = jac.shape
    if k > n:
        return (
            f"{k} factors ({', '.join(names)}) from {n} measured run{'s' if n != 1 else ''}:"
            " more factors than measurements"
        )
    for j, name in enumerate(names):
        scale = 1.0 if name != "overhead_s" else 0.0
        if scale and np.abs(jac[:, j]).max() < MIN_SENSITIVITY:
            return f"{name}: no run spends {100 * MIN_SENSITIVITY:.0f}% of its step on it"
    if k > 1:
        norm = jac / np.maximum(np.linalg.norm(jac, axis=0), 1e-30)
        cond = np.linalg.cond(norm)
        if not np.isfinite(cond) or cond > MAX_CONDITION:
            return (
                f"{', '.join(names)}: the runs move with them in nearly the same proportions"
                f" (condition number {cond:.0f}); runs that differ in scale or layout tell them"
                " apart"
            )
    return None


def gauss_newton(
    runs: list[MeasuredRun],
    names: list[str],
    iterations: int = 8,
    target: np.ndarray | None = None,
) -> tuple[dict[str, float], np.ndarray]:
    """Least squares on log step time: (theta, residuals log(t/measured)); ``target`` replaces
    the measured log step times."""
    from perfmodel.review.calibrate_ceilings import floors

    measured = np.log([r.step_s for r in runs])
    target = measured if target is None else target
    theta = dict.fromkeys(names, 0.0)
    # no factor speeds a rate past its ceiling (issue 39): the fit stays within them
    lowest = floors([r.plan for r in runs], names)
    for _ in range(iterations):
        base, jac = jacobian(runs, theta)
        delta = np.linalg.lstsq(jac, target - base, rcond=None)[0]
        # a damped step: at most a factor of e^0.5 (or half the shortest step, for overhead_s)
        limit = np.array(
            [0.5 * float(np.exp(base).min()) if n == "overhead_s" else 0.5 for n in names]
        )
        delta = delta * min(1.0, float(np.min(limit / np.maximum(np.abs(delta), 1e-30))))
        theta = {k: max(theta[k] + float(d), lowest[k]) for k, d in zip(names, delta)}
        if np.abs(delta).max() < 1e-3:
            break
    return theta, _log_times(runs, theta) - measured


def one_run_target(run: MeasuredRun, scatter: float) -> tuple[float, str]:
    """The log step time a one-run fit aims at: the measured one, less the part of the deviation
    that the model's per-run error within a stack (``scatter``, per_run_scatter) may explain. One
    run cannot tell its stack's bias from the model's error on its one configuration, so the gap
    x = log(measured / modelled) is shrunk by the non-negative garrote (Breiman 1995, for one
    coefficient: x (1 - (s/x)^2)+, s the scatter): a run within the model's scatter leaves the
    model as it is, a run twice the scatter off moves it three quarters of the way, and a stack
    far off (torchtitan's Llama 3 8B on power-limited B200, 2.3 times slower than modelled) is
    corrected all but s^2/x, about 2% of its step."""
    t0 = step_time(run.plan, {})
    x = math.log(run.step_s / t0)
    s = math.log1p(scatter)
    kept = x * max(0.0, 1.0 - (s / x) ** 2) if x else 0.0
    why = (
        f"{run.name}: measured {100 * (math.exp(x) - 1):+.1f}% from the model; within a stack the"
        f" model's runs scatter by {100 * scatter:.1f}%, so one run moves the step"
        f" {100 * (math.exp(kept) - 1):+.1f}% (a gap within that scatter, none)"
    )
    return math.log(t0) + kept, why


def per_run_scatter(bands: dict[str, Any] | None = None) -> float:
    """The model's error on one configuration of a stack, apart from the stack's own bias: the
    pooled standard deviation of configs/error_bands.yaml's out-of-sample log errors about their
    source's mean (every source of two runs or more; ``bands`` default that file), as a relative
    error. The runs of one source share its stack (software, cluster, power), so what varies among
    them is the model's error on the configuration."""
    spread = [np.asarray(v) - np.mean(v) for v in _by_source("oos_log_error", bands)]
    dof = sum(len(v) - 1 for v in spread)
    return math.expm1(math.sqrt(sum(float(np.sum(v**2)) for v in spread) / dof))


def noise_floor() -> float:
    """The smallest per-run error the model has on any published table of two runs or more
    (configs/error_bands.yaml, mean |error|): a fit with few runs to spare can match them by
    chance, so the scatter a factor's standard error is taken from is never below it. A source of
    one run is left out, as per_run_scatter leaves it: a figure fitted on that run alone (the
    DeepSeek-V3 report's router load) matches it by construction."""
    return min(float(np.mean(np.abs(np.expm1(errs)))) for errs in _by_source("log_error", None))


def _by_source(key: str, bands: dict[str, Any] | None) -> list[list[float]]:
    """Each source's runs' ``key`` (a log error) in configs/error_bands.yaml (or ``bands``), for
    every source of two runs or more: one run cannot tell the model's error on a configuration
    from its source's own bias, and a figure fitted on it alone matches it by construction."""
    from perfmodel.inputs import presets

    by_table: dict[str, list[float]] = {}
    for r in (bands or presets.error_bands())["runs"].values():
        by_table.setdefault(r["table"], []).append(float(r[key]))
    return [v for v in by_table.values() if len(v) > 1]


def uncertain(jac: np.ndarray, gap: np.ndarray, names: list[str]) -> str | None:
    """None, or why a factor is pinned too loosely: its standard error (linearized least squares,
    sigma^2 (J'J)^-1, sigma the runs' scatter about the fit or the noise floor where larger) is
    above MAX_SE in log factor, or, for overhead_s, moves some run's step by more than
    MAX_EFFECT. ``gap`` is log(measured / modelled) at factors 1."""
    n, k = jac.shape
    theta, *_ = np.linalg.lstsq(jac, gap, rcond=None)
    scatter = float(np.sum((gap - jac @ theta) ** 2)) / (n - k) if n > k else 0.0
    sigma2 = max(scatter, noise_floor() ** 2)
    se = np.sqrt(np.maximum(np.diag(sigma2 * np.linalg.pinv(jac.T @ jac)), 0.0))
    for j, name in enumerate(names):
        if name == "overhead_s":
            effect = float(se[j] * np.abs(jac[:, j]).max())
            if effect > MAX_EFFECT:
                return (
                    f"overhead_s: the runs pin it only to +-{100 * effect:.0f}% of a step (one"
                    f" standard error at {100 * math.sqrt(sigma2):.1f}% scatter)"
                )
        elif se[j] > MAX_SE:
            return (
                f"{name}: the runs pin it only to x{math.exp(se[j]):.2f} (one standard error at"
                f" {100 * math.sqrt(sigma2):.1f}% scatter; runs that spend more of their step on"
                " it pin it closer)"
            )
    return None


def choose(
    runs: list[MeasuredRun], asked: list[str] | None, among: tuple[str, ...] = STEP_FACTORS
) -> tuple[list[str], dict[str, str]]:
    """The factors to fit (those asked, refused by name where the runs do not identify them; by
    default the most of ``among`` that the runs identify) and why the others are not fitted."""
    target = np.log([r.step_s for r in runs])
    if asked is not None:
        base, jac = jacobian(runs, dict.fromkeys(asked, 0.0))
        why = identifiable(jac, asked) or uncertain(jac, target - base, asked)
        if why:
            raise PerfModelError(f"fit: cannot identify {why}; drop a factor or add runs")
        return asked, {}
    if len(runs) == 1:
        return ["compute"], {
            ", ".join(STEP_FACTORS[1:]): (
                "one measured run identifies one factor: compute (GEMMs, attention, memory), the"
                " links as the presets have them"
            )
        }
    # by default one run more than factors: a residual left to check the fit by
    names = list(among[: len(runs) - 1])
    dropped = {
        f: f"{len(runs)} runs fit {len(names)} factors by default, one measurement to spare"
        for f in among[len(names) :]
    }
    base, full = jacobian(runs, dict.fromkeys(among, 0.0))
    while names:
        idx = [among.index(n) for n in names]
        why = identifiable(full[:, idx], names) or uncertain(full[:, idx], target - base, names)
        if why is None:
            break
        # the factor named goes (the last one for a count or a confounding)
        gone = next((n for n in names if why.startswith(f"{n}:")), names[-1])
        dropped[gone] = why.removeprefix(f"{gone}: ")
        names = [n for n in names if n != gone]
    # at least compute: the one factor any run identifies (benchmarks/calibration_transfer.py: it
    # carries to a stack's other runs better than ``rate``, which moves the links with it), shrunk
    # by its standard error (fit_theta) rather than dropped for it
    if not names:
        dropped.pop("compute", None)
    return names or ["compute"], dropped


def _factors(theta: dict[str, float]) -> dict[str, float]:
    return {
        k: round(v, 6) if k == "overhead_s" else round(math.exp(v), 4) for k, v in theta.items()
    }


def loo_errors(
    runs: list[MeasuredRun], asked: list[str] | None, scatter: float | None = None
) -> tuple[dict[str, list[float]], list[str]]:
    """|error| of each run predicted by a fit on the others, grouped by the kinds of change between
    it and them (and under 'all'), with a note for each run (``scatter``: a one-run fit's, default
    per_run_scatter())."""
    errs: dict[str, list[float]] = {}
    notes = []
    for i, held in enumerate(runs):
        rest = runs[:i] + runs[i + 1 :]
        try:
            theta = fit_theta(rest, asked, scatter)[0]
        except PerfModelError:  # what the runs identify without the one left out
            theta = fit_theta(rest, None, scatter)[0]
        names = list(theta)
        err = abs(step_time(held.plan, theta) / held.step_s - 1)
        made = calibrated.changes(run_kind(held), [run_kind(r) for r in rest]) or ["none"]
        notes.append(f"{held.name} from the others ({', '.join(names)}): {100 * err:.1f}%")
        for c in [*made, "all"]:
            errs.setdefault(c, []).append(err)
    return errs, notes


def leave_one_out(
    runs: list[MeasuredRun], asked: list[str] | None, scatter: float | None = None
) -> tuple[dict[str, float], dict[str, float], list[str]]:
    """The typical and worst |error| of the runs predicted by fits on the others (loo_errors), by
    kind of change, drawn as every band here is: split conformal quantiles at 68% and 95%, the
    largest error where the runs are too few for the level (engine/uncertainty.conformal: the
    ceil((n + 1) 0.68)-th smallest of n, so with five runs or fewer the typical is the largest).
    Under the mean, a band would hold on fewer than 68% of the runs it speaks for."""
    if len(runs) < 2:
        return {}, {}, ["one run: no out-of-sample error (the published band stays)"]
    errs, notes = loo_errors(runs, asked, scatter)
    typical = {c: round(quantile_or_max(v, uncertainty.TYPICAL), 4) for c, v in errs.items()}
    worst = {c: round(quantile_or_max(v, uncertainty.WORST), 4) for c, v in errs.items()}
    return typical, worst, notes


def quantile_or_max(errors: list[float], level: float) -> float:
    """The split conformal quantile of |errors| at ``level``, or their largest where too few."""
    q = uncertainty.conformal(errors, level)
    return float(np.max(np.abs(errors))) if q is None else q


def run_kind(run: MeasuredRun) -> dict[str, Any]:
    """What a run is, for the kinds of change between runs (engine/calibrated.kind)."""
    return calibrated.kind(run.plan, resolve_config(run.plan))


def _run_rows(runs: list[MeasuredRun], theta: dict[str, float]) -> list[CalibrationRun]:
    rows = []
    for r in runs:
        before, after = step_time(r.plan, {}), step_time(r.plan, theta)
        rows.append(
            CalibrationRun(
                name=r.name,
                measured_step_time_s=r.step_s,
                predicted_step_time_s=before,
                calibrated_step_time_s=after,
                residual=round(math.log(after / r.step_s), 5),
                kind=run_kind(r),
            )
        )
    return rows


def shrunk(runs: list[MeasuredRun], theta: dict[str, float], scatter: float) -> dict[str, float]:
    """One factor fitted on several runs, shrunk as one_run_target shrinks one run's gap: the
    non-negative garrote at the factor's standard error, the model's per-run scatter over the root
    sum of squares of the runs' sensitivities to it (d log t / d log f at the fit), so a factor
    within one standard error of 1 stays 1."""
    ((name, value),) = theta.items()
    _, jac = jacobian(runs, theta)
    se = math.log1p(scatter) / max(float(np.sqrt(np.sum(jac[:, 0] ** 2))), 1e-9)
    return {name: value * max(0.0, 1.0 - (se / value) ** 2) if value else 0.0}


def fit_theta(
    runs: list[MeasuredRun], asked: list[str] | None, scatter: float | None = None
) -> tuple[dict[str, float], dict[str, str], list[str]]:
    """(fitted log factors, the factors not fitted and why, notes): the factors chosen, one factor
    shrunk (at ``scatter``, default per_run_scatter(); one_run_target, shrunk), and an overhead
    fitted below zero refitted without."""
    names, dropped = choose(runs, asked)
    notes: list[str] = []
    s = per_run_scatter() if scatter is None else scatter
    target = None
    if len(runs) == 1 and len(names) == 1:
        aim, why = one_run_target(runs[0], s)
        target, notes = np.array([aim]), [why]
    theta, _ = gauss_newton(runs, names, target=target)
    if "overhead_s" in theta and theta["overhead_s"] < 0:
        dropped["overhead_s"] = (
            f"fitted below zero ({1e3 * theta['overhead_s']:.2g} ms, not physical): refitted"
            " without it"
        )
        if asked is None:  # what the runs identify without it
            names, more = choose(runs, None, tuple(f for f in STEP_FACTORS if f != "overhead_s"))
            dropped |= {k: v for k, v in more.items() if k not in dropped}
        names = [n for n in names if n != "overhead_s"] or ["compute"]
        theta, _ = gauss_newton(runs, names)
    if len(runs) > 1 and len(theta) == 1 and "overhead_s" not in theta:
        fitted = math.exp(next(iter(theta.values())))
        theta = shrunk(runs, theta, s)
        notes.append(
            f"{', '.join(theta)}: x{fitted:.3f} by least squares, x"
            f"{math.exp(next(iter(theta.values()))):.3f} shrunk by its standard error at the"
            f" model's per-run scatter ({100 * s:.1f}%)"
        )
    return theta, dropped, notes


def fit_step_times(runs: list[MeasuredRun], asked: list[str] | None = None) -> Calibration:
    """A calibration from measured step times (module docstring)."""
    missing = [r.name for r in runs if r.measured_s is None]
    if missing:
        raise PerfModelError(f"runs {', '.join(missing)}: measured: needs step_time_s")
    theta, dropped, notes = fit_theta(runs, asked)
    notes = [n for r in runs for n in r.notes] + notes
    loo, loo_max, loo_notes = leave_one_out(runs, asked)
    notes.append("peak memory is not calibrated: the factors are times only")
    return Calibration(
        factors=_factors(theta),
        fitted_from="step_times",
        runs=_run_rows(runs, theta),
        not_fitted=dropped,
        out_of_sample=loo,
        out_of_sample_max=loo_max,
        notes=notes + loo_notes,
    )
