"""A GEMM sweep: one measured matmul a line, as a max-achievable-matmul finder prints it (issue 39).

A CSV with a header naming, in any order and case, ``M``, ``N``, ``K`` (the product of an M x K and
a K x N matrix), optionally ``dtype`` (bf16, fp16, fp8, mxfp8, nvfp4; default the file's), and the
measured figure: ``tflops`` (1e12 FLOP/s, at 2 M N K FLOPs a GEMM) or the time of one GEMM in
``time_s``, ``time_ms`` or ``time_us``. stas00/ml-engineering's mamf-finder.py searches shapes
this way for the "maximum achievable matmul FLOPS"; benchmarks/probe/probe.py writes this CSV.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from perfmodel.errors import PerfModelError

DTYPES = {
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "fp8": "fp8",
    "float8": "fp8",
    "e4m3": "fp8",
    "mxfp8": "mxfp8",
    "nvfp4": "nvfp4",
    "fp4": "nvfp4",
}
TIME_COLUMNS = {"time_s": 1.0, "time_ms": 1e-3, "time_us": 1e-6}


@dataclass(frozen=True)
class GemmPoint:
    """One measured GEMM: shape, format and seconds per GEMM."""

    M: int
    N: int
    K: int
    dtype: str
    time_s: float

    @property
    def flops(self) -> float:
        return 2.0 * self.M * self.N * self.K


def _dtype(value: str, where: str) -> str:
    key = value.strip().lower().replace("torch.", "")
    if key not in DTYPES:
        raise PerfModelError(f"{where}: dtype {value!r}: use one of bf16, fp16, fp8, mxfp8, nvfp4")
    return DTYPES[key]


def _whole(value: str, where: str) -> int:
    try:
        x = float(value)
    except ValueError:
        raise PerfModelError(f"{where}: {value!r} is not a whole number") from None
    if not math.isfinite(x) or x < 1 or x != int(x):
        raise PerfModelError(f"{where}: {value!r} is not a whole number of 1 or more")
    return int(x)


def _positive(value: str, where: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise PerfModelError(f"{where}: {value!r} is not a number") from None
    if not math.isfinite(x) or x <= 0:
        raise PerfModelError(f"{where}: {value!r} must be a finite number above 0")
    return x


def read(path: str | Path, dtype: str | None = None, label: str = "") -> list[GemmPoint]:
    """The GEMMs of a sweep CSV; ``dtype`` for a file without a dtype column."""
    where = label or str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise PerfModelError(f"{where}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PerfModelError(f"{where}: cannot read ({e.__class__.__name__})") from None
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    reader = csv.DictReader(lines)
    fields = {(f or "").strip().lower(): f for f in reader.fieldnames or []}
    missing = [c for c in ("m", "n", "k") if c not in fields]
    rate = [c for c in ("tflops", *TIME_COLUMNS) if c in fields]
    if missing or not rate:
        raise PerfModelError(
            f"{where}: a CSV with columns M, N, K, dtype and tflops (or time_s, time_ms, time_us);"
            f" missing {', '.join(missing + ([] if rate else ['tflops or time']))}"
        )
    default = None if dtype is None else _dtype(dtype, where)
    out = []
    for i, row in enumerate(reader, 2):
        at = f"{where}: line {i}"
        M, N, K = (_whole(row[fields[c]] or "", f"{at}: {c.upper()}") for c in ("m", "n", "k"))
        raw = row.get(fields["dtype"]) if "dtype" in fields else None
        dt = _dtype(raw, at) if raw else default
        if dt is None:
            raise PerfModelError(f"{at}: no dtype (add a dtype column, or dtype: in the YAML)")
        col = rate[0]
        value = _positive(row[fields[col]] or "", f"{at}: {col}")
        seconds = 2.0 * M * N * K / (value * 1e12) if col == "tflops" else value * TIME_COLUMNS[col]
        out.append(GemmPoint(M, N, K, dt, seconds))
    if not out:
        raise PerfModelError(f"{where}: no GEMMs (one line per M, N, K)")
    return out
