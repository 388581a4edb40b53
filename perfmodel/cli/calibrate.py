"""`perfmodel calibrate`: fit the model to a team's own measured runs (issue 32)."""

from __future__ import annotations

import click

from perfmodel.cli.common import json_option, write_text


@click.command("calibrate")
@click.argument("runs_file")
@click.option("-o", "--output", required=True, help="The calibration file to write (CAL.yaml).")
@json_option
def calibrate_cmd(runs_file: str, output: str, as_json: bool) -> None:
    """Fit factors to measured runs of your own stack: step times, a profiler trace, or the
    cluster's microbenchmarks.

    One step time fits one factor (the stack's compute rate); runs that differ in scale or
    layout fit compute, communication and fixed overhead apart; a PyTorch profiler trace (or an
    `nsys stats` CSV) fits one factor per kernel class. Before any training run, nccl-tests'
    output and a GEMM sweep (MICRO.yaml: plan:, nccl_tests:, gemm_sweep:) fit each link tier's
    bandwidth and latency and the GEMM rate of each format. What the inputs cannot identify is
    refused by name. Use the result with --calibration CAL.yaml, or `calibration: CAL.yaml` in a
    plan.

    \b
    Example:
        perfmodel calibrate runs.yaml -o cal.yaml
        perfmodel estimate my-plan.yaml --calibration cal.yaml
    """
    from perfmodel.inputs import presets
    from perfmodel.output import console
    from perfmodel.review import calibrate_checks as checks
    from perfmodel.review import calibrate_fit, calibrate_micro
    from perfmodel.review.calibrate_runs import load_runs, to_yaml

    checks.output_not_input(output, runs_file)
    if calibrate_micro.is_micro(
        presets.parse_yaml(presets.read_text(runs_file, runs_file), runs_file)
    ):
        cal = calibrate_micro.fit(*calibrate_micro.load(runs_file))
    else:
        runs, asked = load_runs(runs_file)
        cal = checks.annotate(calibrate_fit.fit(runs, asked), runs)
    write_text(output, to_yaml(cal, runs_file), "calibration", runs_file)
    if as_json:
        console.emit_json(cal.model_dump(exclude={"source"}))
        return
    console.line(cal.summary())
    for r in cal.runs:
        console.line(
            f"  {r.name}: measured {r.measured_step_time_s:.3f} s, model"
            f" {r.predicted_step_time_s:.3f} s, calibrated {r.calibrated_step_time_s:.3f} s"
            f" ({100 * (r.calibrated_step_time_s / r.measured_step_time_s - 1):+.1f}%)"
        )
        if r.measured_peak_memory_gb is not None:
            console.line(
                f"    peak memory: measured {r.measured_peak_memory_gb:.1f} GB, model"
                f" {r.predicted_peak_memory_gb:.1f} GB allocated (not calibrated)"
            )
    for name, d in cal.microbenchmarks.items():
        console.line(f"  {calibrate_micro.describe(name, d)}")
    for note in cal.notes:  # what the user must read: far measurements (review/calibrate_bands)
        if note.startswith("warning: ") or "beyond the model's per-run scatter" in note:
            console.line(note if note.startswith("warning: ") else f"warning: {note}")
    for name, why in cal.not_fitted.items():
        console.line(f"not fitted: {name}: {why}")
    for change in sorted(cal.out_of_sample, key=lambda c: (c != "all", c)):
        what = "all runs" if change == "all" else f"a change of {change}"
        console.line(
            f"out of sample, {what}: within {100 * cal.out_of_sample[change]:.1f}% for 68% of"
            f" runs ({cal.band_basis.get(change, 'leave-one-run-out error')})"
        )
