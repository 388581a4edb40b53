"""One measured run of RUNS.yaml as every calibration module reads it (review/calibrate.py fits
step times, review/calibrate_trace.py a trace; the checks, ceilings and bands judge them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from perfmodel.errors import PerfModelError
from perfmodel.inputs.trace import TraceSummary
from perfmodel.specs import Plan


@dataclass
class MeasuredRun:
    """One run of RUNS.yaml: its plan (knobs frozen as the run ran), what was measured."""

    name: str
    plan: Plan
    measured_s: float | None
    peak_memory_gb: float | None = None
    trace: TraceSummary | None = None
    notes: list[str] = field(default_factory=list)
    # where RUNS.yaml gave the measurement: runs[i].measured.step_time_s (or tokens_per_s_per_gpu)
    field: str = "measured.step_time_s"

    @property
    def step_s(self) -> float:
        """The measured step time; a run without one cannot be fitted on."""
        if self.measured_s is None:
            raise PerfModelError(f"run {self.name}: measured: needs step_time_s")
        return self.measured_s
