"""`perfmodel calibrate`'s fit: the factors of a trace where one run has one, else of step times
(review/calibrate.py, review/calibrate_trace.py), with the measurements and factors past the
hardware's ceilings refused (review/calibrate_ceilings.py) and the bands a calibration can promise
(review/calibrate_bands.py). The top of the calibration modules: none of them imports it."""

from __future__ import annotations

from perfmodel.errors import PerfModelError
from perfmodel.review import calibrate_bands as bands
from perfmodel.review import calibrate_ceilings as ceilings
from perfmodel.review.calibrate import fit_step_times, per_run_scatter
from perfmodel.review.calibrate_trace import fit_trace
from perfmodel.review.measured_run import MeasuredRun
from perfmodel.specs.calibration import Calibration


def fit(runs: list[MeasuredRun], asked: list[str] | None = None) -> Calibration:
    """Trace factors where one run has a trace, else step-time factors; measurements and factors
    past the hardware's ceilings refused by name (review/calibrate_ceilings.py)."""
    scatter = per_run_scatter()
    ceilings.check_runs(runs, scatter)
    return bands.with_bands(ceilings.check_fit(_fit(runs, asked), runs), scatter, runs)


def _fit(runs: list[MeasuredRun], asked: list[str] | None = None) -> Calibration:
    """Trace factors where one run has a trace, else step-time factors."""
    traced = [r for r in runs if r.trace is not None]
    if len(traced) > 1:
        raise PerfModelError(
            f"runs {', '.join(r.name for r in traced)}: give a trace for one run (the trace's"
            " factors are of one stack and one run)"
        )
    if traced:
        if len(runs) > 1:
            raise PerfModelError(
                f"run {traced[0].name} has a trace: a trace calibrates from its own run; put the"
                " other runs in a RUNS file of their own"
            )
        if asked is not None:
            raise PerfModelError("fit: a trace fits its kernel classes; drop fit: or the trace")
        return fit_trace(traced[0])
    return fit_step_times(runs, asked)
