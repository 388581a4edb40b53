"""What a calibration file (CAL.yaml) must hold to be applied, checked when it is read: every
problem one line naming the file and the key (issue 39 item 2).

- factors: known names only (specs/calibration.py FACTORS; a misspelt one says which it may be),
  each time multiplier a finite number above 0, overhead_s (seconds added to a step) finite and 0
  or more (`perfmodel calibrate` itself drops an overhead fitted below zero: docs/calibration.md);
- out_of_sample, out_of_sample_max: relative errors, each finite and 0 or more (a band is their
  log1p: engine/calibrated.py);
- version: the format's version, at most the one this perfmodel writes (CAL_VERSION).
"""

from __future__ import annotations

import difflib
import math
from typing import Any

from perfmodel.errors import PerfModelError
from perfmodel.specs.calibration import CAL_VERSION, FACTORS


def _finite(value: Any) -> float | None:
    """``value`` as a float where it is a finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def check_factors(factors: Any, where: str) -> None:
    """CAL.yaml's factors: a mapping of known names to finite numbers in range."""
    if not isinstance(factors, dict):
        raise PerfModelError(f"{where}: factors must be a mapping such as {{compute: 1.1}}")
    for name, value in factors.items():
        if name not in FACTORS:
            close = difflib.get_close_matches(str(name), FACTORS, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(FACTORS)}"
            raise PerfModelError(f"{where}: factors: unknown factor {name!r}{hint}")
        v = _finite(value)
        if name == "overhead_s":
            if v is None or v < 0:
                raise PerfModelError(
                    f"{where}: factors.overhead_s must be a finite number of seconds, 0 or more"
                    f" (got {value!r}): it is added to every step"
                )
        elif v is None or v <= 0:
            raise PerfModelError(
                f"{where}: factors.{name} must be a finite number above 0 (a time multiplier),"
                f" got {value!r}"
            )


def check_errors(data: dict[str, Any], where: str) -> None:
    """out_of_sample and out_of_sample_max: finite relative errors, 0 or more."""
    for key in ("out_of_sample", "out_of_sample_max"):
        table = data.get(key)
        if table is None:
            continue
        if not isinstance(table, dict):
            raise PerfModelError(f"{where}: {key} must be a mapping such as {{all: 0.05}}")
        for change, value in table.items():
            v = _finite(value)
            if v is None or v < 0:
                raise PerfModelError(
                    f"{where}: {key}.{change} must be a finite number, 0 or more (a relative"
                    f" error: 0.05 is 5%), got {value!r}"
                )


def check_version(data: dict[str, Any], where: str) -> None:
    """The format's version: a whole number no newer than CAL_VERSION (absent: 1, the files
    written before it was recorded)."""
    version = data.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise PerfModelError(f"{where}: version must be a whole number from 1, got {version!r}")
    if version > CAL_VERSION:
        raise PerfModelError(
            f"{where}: version {version} is newer than this perfmodel reads ({CAL_VERSION});"
            " upgrade perfmodel or calibrate again with this one"
        )


def check(data: dict[str, Any], where: str) -> None:
    """Every check of a CAL.yaml mapping before it is built (module docstring)."""
    check_version(data, where)
    check_factors(data.get("factors"), where)
    check_errors(data, where)
    gpu = data.get("gpu")
    if gpu is not None and not isinstance(gpu, str):
        raise PerfModelError(f"{where}: gpu must name the GPU the runs ran on, got {gpu!r}")
