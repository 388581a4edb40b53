"""Reading a calibration file (CAL.yaml, written by `perfmodel calibrate`), every failure one line
naming the file and the field."""

from __future__ import annotations

import os
from pathlib import Path

from perfmodel.errors import PerfModelError
from perfmodel.inputs import calibration_checks
from perfmodel.inputs.preset_files import _build, _load_yaml
from perfmodel.specs.calibration import Calibration


def read(path: str | Path, label: str | None = None) -> Calibration:
    """The Calibration in ``path``; ``label`` names where it was asked for (a plan key, a flag)."""

    where = f"{label} {path}" if label else str(path)
    data = _load_yaml(Path(path), where)
    if not isinstance(data, dict) or "factors" not in data:
        raise PerfModelError(
            f"{where}: not a calibration (no 'factors'); write one with"
            " `perfmodel calibrate RUNS.yaml -o CAL.yaml`"
        )
    calibration_checks.check(data, where)
    return _build(Calibration, {**data, "source": str(path)}, where)


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


def rebase(value: str, holder: Path | None, base_dir: Path | None) -> str:
    """A base plan's ``calibration:`` path (relative to ``holder``, the folder of the file that
    holds it) as a path relative to ``base_dir`` (the extending plan's folder, what of_plan takes
    it from; None: the working directory)."""
    path = Path(value)
    if path.is_absolute() or holder is None:
        return value
    return os.path.relpath(holder / path, base_dir if base_dir is not None else ".")
