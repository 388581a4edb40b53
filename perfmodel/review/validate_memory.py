"""Predicted vs measured memory peaks of the published runs (issue 29; SPEC 13 "Memory as it is
measured").

A source's peak is one of three counters: what live tensors held (allocated:
torch.cuda.max_memory_allocated), what PyTorch's caching allocator held (reserved:
max_memory_reserved, torchtitan's "memory: X GiB" log line), or what the device shows (nvidia-smi:
reserved plus the CUDA context and NCCL's buffers). Each measured peak is set beside the model's
prediction of that same counter (engine/reserve.py reserved_peak_bytes). A source that does not
say which counter it printed is compared with reserved, and the row says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.engine import reserve as engine_reserve
from perfmodel.inputs import presets
from perfmodel.specs.precision import MOMENT_BYTES, optimizer_state_bytes

QUANTITIES = ("allocated", "reserved", "device", "unstated")


@dataclass
class MemoryRow:
    case: str
    record: str
    quantity: str
    measured_bytes: float
    predicted_bytes: float
    allocated_bytes: float
    usable_bytes: float
    capacity_bytes: float
    fits: bool
    how: str
    source: str

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted_bytes - self.measured_bytes) / self.measured_bytes

    def to_json(self) -> dict:
        return {
            "case": self.case,
            "record": self.record,
            "quantity": self.quantity,
            "measured_bytes": self.measured_bytes,
            "predicted_bytes": self.predicted_bytes,
            "allocated_bytes": self.allocated_bytes,
            "error_pct": self.error_pct,
            "usable_bytes": self.usable_bytes,
            "capacity_bytes": self.capacity_bytes,
            "fits": self.fits,
            "how": self.how,
            "source": self.source,
        }


def predicted_for(quantity: str, allocated: float) -> float:
    """The model's figure for the counter a source measured, bytes."""
    if quantity not in QUANTITIES:
        raise ValueError(f"unknown memory quantity {quantity!r}; use one of {QUANTITIES}")
    if quantity == "allocated":
        return float(allocated)
    reserved = float(engine_reserve.reserved_peak_bytes(allocated))
    if quantity == "device":
        # nvidia-smi adds what the caching allocator does not hold: the CUDA context and NCCL
        return reserved + engine_reserve.CUDA_CONTEXT_BYTES
    return reserved


# When a source's reading was taken: at the step's peak (its maximum counter), or after the first
# step only (READINGS). After the first step the allocator holds the first forward-backward peak,
# when Adam's moments did not exist yet (PyTorch-style optimizers create exp_avg and exp_avg_sq in
# their first step(): apex FusedAdam, Transformer Engine's FusedAdam), or the states the step
# leaves, moments included, whichever is larger.
READINGS = ("peak", "first-step")


def reading_allocated(values: dict, plan, reading: str = "peak") -> float:
    """The model's allocated bytes at the moment a source read its counter."""
    if reading not in READINGS:
        raise ValueError(f"unknown memory reading {reading!r}; use one of {READINGS}")
    total = float(values["total_bytes"])
    if reading == "peak":
        return total
    tr = plan.training
    states = sum(float(values[k]) for k in ("weights_bytes", "gradients_bytes", "optimizer_bytes"))
    if tr.optimizer != "adam":
        return total
    moments = MOMENT_BYTES[tr.exp_avg_dtype] + MOMENT_BYTES[tr.exp_avg_sq_dtype]
    share = moments / optimizer_state_bytes(
        "adam", tr.exp_avg_dtype, tr.exp_avg_sq_dtype, tr.main_params_dtype
    )
    return max(total - share * float(values["optimizer_bytes"]), states)


@dataclass
class MemoryRun:
    """A run held for its memory only (configs/memory_runs), estimated at its stated knobs, as
    memory_rows reads a validation case."""

    name: str
    description: str
    plan: Any
    estimate: Any


def memory_runs(names: list[str] | None = None) -> list[MemoryRun]:
    """The memory-only runs (all, or those whose name contains one of ``names``), estimated."""
    from perfmodel.engine.estimate import estimate, resolve_config
    from perfmodel.inputs.memory_runs import memory_runs as held

    return [
        MemoryRun(
            r["name"], r["description"], r["plan"], estimate(r["plan"], resolve_config(r["plan"]))
        )
        for r in held(names)
    ]


def memory_validation(names: list[str] | None = None, calibration=None) -> tuple[list, dict]:
    """(rows, summary) of `validate --memory`: the validation cases and the memory-only runs whose
    name contains one of ``names`` or whose table is one (all without); a name that matches
    neither is an error."""
    from perfmodel.errors import PerfModelError
    from perfmodel.review.validate import validate

    runs = memory_runs(names)
    cases = [(c["name"], c.get("table")) for c in presets.validation_cases()]
    # a case by (part of) its name, or a whole table by its name
    timed = [n for n in names or () if any(n.lower() in c or n.lower() == t for c, t in cases)]
    unknown = [
        n for n in names or () if n not in timed and not any(n.lower() in r.name for r in runs)
    ]
    if unknown:
        raise PerfModelError(
            f"no validation case or memory run matches {', '.join(unknown)}; see"
            " `perfmodel validate --memory` for their names"
        )
    results = validate(timed or None, calibration).cases if timed or not names else []
    everything = list(results) + list(runs)
    rows = memory_rows(everything)
    return rows, summary(rows, everything)


def memory_rows(results: list, peaks: dict | None = None) -> list[MemoryRow]:
    """One row per validation case whose record (its description) has a measured peak."""
    peaks = presets.memory_peaks() if peaks is None else peaks
    rows = []
    for r in results:
        record = r.description
        peak = peaks.get(record)
        if peak is None:
            continue
        v = r.estimate.values
        allocated = reading_allocated(v, r.plan, peak.get("reading", "peak"))
        rows.append(
            MemoryRow(
                r.name,
                record,
                peak["quantity"],
                float(peak["peak_bytes"]),
                predicted_for(peak["quantity"], allocated),
                allocated,
                float(v["usable_bytes"]),
                float(v["capacity_bytes"]),
                bool(v["fits"]),
                peak.get("how", ""),
                peak.get("source", ""),
            )
        )
    return rows


def summary(rows: list[MemoryRow], results: list) -> dict:
    """Mean and max |error| over the measured peaks; the runs (all cases) predicted not to fit
    (beyond the memory band: engine/memory_verdict.py) and those tight (within the band of the
    usable line)."""
    errs = np.abs([row.error_pct for row in rows])
    misfits = [r.name for r in results if not bool(r.estimate.values["fits"])]
    tight = [r.name for r in results if bool(r.estimate.values.get("tight", False))]
    return {
        "peaks": int(errs.size),
        "mean_abs_error_pct": float(errs.mean()) if errs.size else 0.0,
        "max_abs_error_pct": float(errs.max()) if errs.size else 0.0,
        "mean_error_pct": float(np.mean([row.error_pct for row in rows])) if rows else 0.0,
        "runs": len(results),
        "runs_not_fitting": len(misfits),
        "not_fitting": misfits,
        "tight": tight,
        "reserved_over_allocated": engine_reserve.RESERVED_OVER_ALLOCATED,
    }
