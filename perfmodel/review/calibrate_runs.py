"""RUNS.yaml, the measured runs `perfmodel calibrate` fits on, and CAL.yaml, what it writes.

RUNS.yaml::

    runs:
      - plan: llama-8b-64gpu.yaml       # a plan file (relative to RUNS.yaml) or a bundled plan
        measured: {step_time_s: 2.76}    # or tokens_per_s_per_gpu; peak_memory_gb optional
        trace: step.json                 # optional: Kineto trace (.json/.json.gz) or nsys CSV
        trace_steps: 3                   # steps in the trace where it has no ProfilerStep marks
        name: 64 GPUs                    # optional; default the plan's name
    fit: [compute, comm]                 # optional: the factors to fit (refused if unidentified)

Every knob of a plan should be as the run ran; knobs it leaves free are chosen once by the search
(the fastest that fits) and the notes say which.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from perfmodel import inputs
from perfmodel.engine.answer import estimate_or_search, fixed
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets, trace
from perfmodel.review import calibrate_checks as checks
from perfmodel.review.measured_run import MeasuredRun
from perfmodel.specs.calibration import FACTORS, Calibration

TOP_KEYS = ("runs", "fit", "description")
RUN_KEYS = ("plan", "measured", "trace", "trace_steps", "name")
MEASURED_KEYS = ("step_time_s", "tokens_per_s_per_gpu", "peak_memory_gb")


def _unknown(keys: Any, allowed: tuple[str, ...], where: str) -> None:
    for key in keys:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(allowed)}"
            raise PerfModelError(f"{where}: unknown key {key!r}{hint}")


def _number(value: Any, where: str, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise PerfModelError(f"{where}: expected a positive number, got {value!r}")
    if integer and int(value) != value:
        raise PerfModelError(f"{where}: expected a whole number, got {value!r}")
    if value == float("inf"):
        raise PerfModelError(f"{where}: expected a finite number")
    return float(value)


def _measured(data: Any, plan: Any, where: str) -> tuple[float | None, float | None]:
    if data is None:
        return None, None
    if not isinstance(data, dict):
        raise PerfModelError(f"{where}: a mapping such as {{step_time_s: 2.76}}")
    _unknown(data, MEASURED_KEYS, where)
    mem = data.get("peak_memory_gb")
    mem = None if mem is None else _number(mem, f"{where}.peak_memory_gb")
    if "step_time_s" in data and "tokens_per_s_per_gpu" in data:
        raise PerfModelError(f"{where}: give step_time_s or tokens_per_s_per_gpu, not both")
    if "step_time_s" in data:
        return _number(data["step_time_s"], f"{where}.step_time_s"), mem
    if "tokens_per_s_per_gpu" in data:
        rate = _number(data["tokens_per_s_per_gpu"], f"{where}.tokens_per_s_per_gpu")
        tokens = plan.training.global_batch_size * plan.seq_length
        return tokens / (rate * plan.system.num_gpus), mem
    return None, mem


def _given(measured: Any) -> list[str]:
    """The key a run's measured: gave its step by (step_time_s or tokens_per_s_per_gpu)."""
    keys = ("step_time_s", "tokens_per_s_per_gpu")
    return [k for k in keys if isinstance(measured, dict) and k in measured]


def load_runs(path: str) -> tuple[list[MeasuredRun], list[str] | None]:
    """The runs of RUNS.yaml, knobs frozen, and the factors its ``fit:`` asks for (None: all that
    the runs identify)."""
    where = Path(path)
    data = presets.parse_yaml(presets.read_text(path, path), path)
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list) or not data["runs"]:
        raise PerfModelError(
            f"{path}: runs: a list of measured runs, each with plan: and measured:"
        )
    _unknown(data, TOP_KEYS, path)
    asked = data.get("fit")
    if asked is not None and (
        not isinstance(asked, list) or not asked or not all(a in FACTORS for a in asked)
    ):
        raise PerfModelError(f"{path}: fit: a list of factors among {', '.join(FACTORS)}")
    if asked is not None:
        checks.fit_names(asked, path)
    runs = []
    for i, raw in enumerate(data["runs"]):
        label = f"{path}: runs[{i}]"
        if not isinstance(raw, dict) or "plan" not in raw:
            raise PerfModelError(f"{label}: a mapping with plan: (a plan file or bundled plan)")
        _unknown(raw, RUN_KEYS, label)
        source = str(raw["plan"])
        loaded = inputs.load(checks.resolve(where.parent, source, f"{label}.plan", True))
        plan = loaded.plan
        if plan.calibration is not None:
            raise PerfModelError(
                f"{label}.plan: {source} is already calibrated; give the plain plan"
            )
        _est, chosen = estimate_or_search(plan, presets.error_bands())
        notes = list(loaded.notes)
        if chosen:
            plan = fixed(plan, chosen)
            notes.append(
                f"{source}: free knobs chosen as `perfmodel plan` chooses them: "
                + ", ".join(f"{k}={v}" for k, v in chosen.items())
            )
        measured, mem = _measured(raw.get("measured"), plan, f"{label}.measured")
        checks.peak_fits(mem, plan, f"{label}.measured")
        steps = raw.get("trace_steps")
        steps = None if steps is None else int(_number(steps, f"{label}.trace_steps", True))
        summary = None
        if raw.get("trace") is not None:
            tpath = checks.resolve(where.parent, raw["trace"], f"{label}.trace", False)
            summary = trace.read(tpath, steps)
        elif measured is None:
            raise PerfModelError(
                f"{label}.measured: give step_time_s or tokens_per_s_per_gpu (or a trace:)"
            )
        name = str(raw.get("name") or source)
        runs.append(MeasuredRun(name, plan, measured, mem, summary, notes))
        given = [f"measured.{k}" for k in _given(raw.get("measured"))]
        runs[-1].field = f"runs[{i}]." + (given[0] if given else "trace")
    names = [r.name for r in runs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PerfModelError(f"{path}: runs named twice: {', '.join(twice)}; give each a name:")
    return runs, asked


def to_yaml(cal: Calibration, runs_file: str) -> str:
    """CAL.yaml: the calibration, with a header naming what wrote it and from what."""
    data = cal.model_dump(exclude={"source"})
    head = (
        f"# perfmodel calibrate {runs_file}: factors fitted on the runs below (see"
        " docs/calibration.md)\n"
    )
    return head + yaml.safe_dump(data, sort_keys=False, width=100, allow_unicode=True)
