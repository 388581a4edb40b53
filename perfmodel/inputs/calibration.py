"""Reading a calibration file (CAL.yaml, written by `perfmodel calibrate`), every failure one line
naming the file and the field."""

from __future__ import annotations

import math
from pathlib import Path

from perfmodel.errors import PerfModelError
from perfmodel.specs.calibration import Calibration


def read(path: str | Path, label: str | None = None) -> Calibration:
    """The Calibration in ``path``; ``label`` names where it was asked for (a plan key, a flag)."""
    from perfmodel.inputs.presets import _build, _load_yaml

    where = f"{label} {path}" if label else str(path)
    data = _load_yaml(Path(path), where)
    if not isinstance(data, dict) or "factors" not in data:
        raise PerfModelError(
            f"{where}: not a calibration (no 'factors'); write one with"
            " `perfmodel calibrate RUNS.yaml -o CAL.yaml`"
        )
    cal = _build(Calibration, {**data, "source": str(path)}, where)
    bad = sorted(
        k for k, v in cal.factors.items() if not math.isfinite(v) or (k != "overhead_s" and v <= 0)
    )
    if bad:
        what = "of seconds" if bad[0] == "overhead_s" else "above 0 (a time multiplier)"
        raise PerfModelError(f"{where}: factors.{bad[0]} must be a finite number {what}")
    return cal


def of_plan(value: object, label: str, base_dir: Path | None) -> Calibration:
    """A plan's `calibration:` key: a CAL.yaml path, relative to the plan's folder."""
    if not isinstance(value, str) or not value.strip():
        raise PerfModelError(
            f"{label}: calibration must name a CAL.yaml file (perfmodel calibrate)"
        )
    path = Path(value)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    return read(path, f"{label}: calibration")
