"""The checks `perfmodel calibrate` makes of its inputs before and after a fit (issue 39 item 2):
each refusal one line naming RUNS.yaml's field, each a function of its own, called from one line.

- fit: a factor named twice, factors that nest (rate holds compute, which holds the kernel
  classes: specs/calibration.py GROUPS), a kernel-class factor asked of step times (it comes from a
  trace: review/calibrate_trace.py);
- plan: and trace: are files beside RUNS.yaml (a plan may be a bundled plan's name), never the
  working directory's;
- -o names none of the run's inputs (RUNS.yaml, each plan:, each trace:);
- a measured peak memory above the GPU's HBM is refused; a plausible one is set beside the model's
  figure per run (not calibrated: the factors are times);
- a trace's step (its span over its steps) agrees with the run's measured step within the model's
  per-run scatter, or the two are named;
- communication the trace shows entirely beside computation (none exposed) is a measurement: the
  comm factor is then not fitted, and the note says what the trace bounds.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfmodel.errors import PerfModelError
from perfmodel.specs.calibration import GROUPS, Calibration

if TYPE_CHECKING:
    from perfmodel.review.measured_run import MeasuredRun

KERNEL_FACTORS = GROUPS["compute"]  # fitted from a trace's kernel classes only


def fit_names(asked: list[str], where: str) -> None:
    """fit: each factor once, none inside another, no kernel-class factor (step times fit
    compute, comm and overhead_s; a trace fits the kernel classes)."""
    twice = sorted({a for a in asked if asked.count(a) > 1})
    if twice:
        raise PerfModelError(f"{where}: fit: {twice[0]} is named twice; name each factor once")
    for outer in asked:
        inner = [a for a in asked if a in GROUPS.get(outer, ()) or a in _nested(outer)]
        if inner:
            raise PerfModelError(
                f"{where}: fit: {outer} already holds {', '.join(inner)} ({outer} moves"
                f" {', '.join(GROUPS[outer])} together); fit one or the other"
            )
    kernel = [a for a in asked if a in KERNEL_FACTORS]
    if kernel:
        raise PerfModelError(
            f"{where}: fit: {', '.join(kernel)} is a kernel-class factor, measured by a profiler"
            " trace (trace:), not by step times; fit compute (every kernel class at once) or"
            " give a trace and drop fit:"
        )


def _nested(group: str) -> tuple[str, ...]:
    """The groups a group holds (rate holds compute)."""
    return tuple(g for g in GROUPS if g != group and set(GROUPS[g]) <= set(GROUPS.get(group, ())))


def resolve(base: Path, value: Any, label: str, bundled: bool) -> str:
    """A run's plan: or trace: (or a MICRO.yaml's plan:) as a path beside the file that names it
    (``base`` its folder), or, for a plan, a bundled plan's name (no folder, no suffix); never the
    working directory's file."""
    text = str(value)
    local = base / text
    if local.exists():
        return str(local)
    name = Path(text)
    if bundled and not name.suffix and len(name.parts) == 1:
        return text
    raise PerfModelError(
        f"{label}: no {local} (a path in the file is taken from the folder the file is in)"
    )


def inputs_of(runs_file: str) -> list[tuple[str, str]]:
    """(field, path) of every file the RUNS.yaml names and finds: itself, each plan:, each
    trace: (what -o must not overwrite); an unreadable RUNS.yaml gives what it can."""
    from perfmodel.inputs import presets

    found = [("the RUNS.yaml", runs_file)]
    try:
        data = presets.parse_yaml(presets.read_text(runs_file, runs_file), runs_file)
    except PerfModelError:
        return found  # load_runs says what is wrong with it
    runs = data.get("runs") if isinstance(data, dict) else None
    base = Path(runs_file).parent
    if isinstance(data, dict):  # MICRO.yaml (review/calibrate_micro.py): its plan and files
        named = [("plan", data.get("plan"))]
        for key in ("nccl_tests", "gemm_sweep"):
            items = data.get(key)
            for j, e in enumerate(items if isinstance(items, list) else [items]):
                named.append((f"{key}[{j}]", e.get("file") if isinstance(e, dict) else e))
        found += [
            (k, str(base / v)) for k, v in named if isinstance(v, str) and (base / v).is_file()
        ]
    for i, raw in enumerate(runs if isinstance(runs, list) else []):
        for key in ("plan", "trace"):
            value = raw.get(key) if isinstance(raw, dict) else None
            if isinstance(value, str) and (base / value).is_file():
                found.append((f"runs[{i}].{key}", str(base / value)))
    return found


def output_not_input(output: str, runs_file: str) -> None:
    """-o must not name a file the run reads (its RUNS.yaml, a plan, a trace)."""
    if not output.strip() or not os.path.exists(output):
        return
    for field, path in inputs_of(runs_file):
        if os.path.exists(path) and os.path.samefile(path, output):
            what = field if field == "the RUNS.yaml" else f"{runs_file}'s {field}"
            raise PerfModelError(
                f"-o {output}: that is {what}, an input of this calibration, which writing would"
                " overwrite; write the calibration elsewhere (e.g. -o cal.yaml)"
            )


def peak_fits(mem: float | None, plan: Any, label: str) -> None:
    """A measured peak memory (GB, 1e9 bytes) is at most the GPU's HBM."""
    if mem is None:
        return
    hbm = plan.system.gpu.hbm_capacity_bytes / 1e9
    if mem > hbm:
        raise PerfModelError(
            f"{label}.peak_memory_gb: {mem:g} GB is more than the {plan.system.gpu.name}'s"
            f" {hbm:.1f} GB of HBM; give the peak of one GPU in GB (1e9 bytes), as"
            " torch.cuda.max_memory_reserved() reports it"
        )


def trace_agrees(run: MeasuredRun, scatter: float) -> None:
    """The trace's step (its span over its steps) and the measured step are of one run: within
    the model's per-run scatter of each other (``scatter``, relative), or both are named."""
    tr = run.trace
    if tr is None or run.measured_s is None or tr.span_s is None:
        return
    step = tr.span_s / tr.steps
    gap = abs(math.log(step / run.measured_s))
    if gap > math.log1p(scatter):
        raise PerfModelError(
            f"run {run.name}: the trace's step is {step:.3g} s ({tr.source}: its span over"
            f" {tr.steps} steps), measured {run.measured_s:.3g} s: {math.expm1(gap):.0%} apart,"
            f" beyond the model's per-run scatter of {scatter:.1%}; a trace of another run? give"
            " the trace and the measurement of one run (or drop measured: to take the trace's)"
        )


def missing_class(
    run: MeasuredRun, name: str, cls: str, measured: dict[str, Any], model_s: float
) -> str:
    """Why the factor ``name`` is not fitted where its trace class ``cls`` has no seconds: the
    trace's communication kernels all run beside computation (none exposed: a measurement that
    bounds the exposed time, not the links' rate); any other class missing is refused by name."""
    total = float(measured.get("comm") or 0.0)
    if name == "comm" and total > 0 and measured.get("exposed_comm") is not None:
        return (
            f"all {total * 1e3:.1f} ms a step of communication kernels run beside computation"
            f" (0 exposed; the model exposes {model_s * 1e3:.1f} ms): the trace bounds the"
            " exposed time, not the links' rate, so comm stays at the presets' rate"
        )
    source = run.trace.source if run.trace is not None else "?"
    raise PerfModelError(
        f"trace {source}: no {cls} kernels, but the plan {run.name} spends"
        f" {model_s * 1e3:.1f} ms a step on them ({name}); profile the GPU kernels of a whole"
        " training step"
    )


def annotate(cal: Calibration, runs: list[MeasuredRun]) -> Calibration:
    """``cal`` with the GPU its runs ran on and, per run, the measured peak memory beside the
    model's (allocated peak; not calibrated)."""
    from perfmodel.engine.estimate import estimate, resolve_config

    by_name = {r.name: r for r in runs}
    rows = []
    for row in cal.runs:
        run = by_name.get(row.name)
        if run is None or run.peak_memory_gb is None:
            rows.append(row)
            continue
        values = estimate(run.plan, resolve_config(run.plan)).values
        model = round(float(values["total_bytes"]) / 1e9, 2)
        rows.append(
            row.model_copy(
                update={
                    "measured_peak_memory_gb": run.peak_memory_gb,
                    "predicted_peak_memory_gb": model,
                }
            )
        )
    gpus = sorted({r.plan.system.gpu.name for r in runs})
    return cal.model_copy(update={"runs": rows, "gpu": " and ".join(gpus)})
