"""A band on a step time, and the GPU family a run is classed by: what the published bands
(engine/uncertainty.py) and a calibration's own (engine/calibrated.py) both are and both read."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Band:
    """Half-widths of log(step time): ``typical`` holds about 68% of unseen runs, ``worst`` 95%."""

    typical: float
    worst: float
    basis: str  # the class and its runs, and what widened it
    runs: int = 0
    unvalidated: tuple[str, ...] = ()

    def range(self, step_s: float, worst: bool = False) -> tuple[float, float]:
        w = self.worst if worst else self.typical
        return step_s * math.exp(-w), step_s * math.exp(w)

    def to_json(self) -> dict[str, Any]:
        return {
            "typical_half_width": self.typical,
            "worst_half_width": self.worst,
            # the keys before issue 28 (then in-sample mean and max |error|), kept for scripts
            "mean_abs_error": self.typical,
            "max_abs_error": self.worst,
            "basis": self.basis,
            "runs": self.runs,
            "unvalidated": list(self.unvalidated),
            "out_of_sample": True,
        }


def gpu_family(name: str) -> str:
    low = name.lower()
    families = (
        "a100",
        "h100",
        "h200",
        "h800",
        "gb200",
        "gb300",
        "b200",
        "b300",
        "v100",
        "mi300",
        "mi325",
        "mi350",
        "mi355",
    )
    return next((f for f in families if f in low), low)
