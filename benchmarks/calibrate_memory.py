"""Fit the caching allocator's reserved-over-allocated ratio (engine/reserve.py
RESERVED_OVER_ALLOCATED) on the published runs whose source printed a reserved or a device peak,
and judge it leaving one source out: the ratio refitted without that source's runs, each of them
predicted with it.

One figure for the allocator, none per run or per source: the median over the runs of (measured
less what the allocator does not hold: the cuBLAS workspaces, and for a device reading the CUDA
context) / predicted allocated at the reading (validate_memory.reading_allocated). A source is a
benchmark table, its runs sharing their software and their transcription: torchtitan's 2024-12
notes (reserved; the validation cases and the memory runs of its other rows), Trainy's 2025-06 run
(reserved), Primus-pipeline's blog (device, rocm-smi).

The memory band (engine/memory_verdict.py MEMORY_BAND) is the split-conformal 68% rank of those
leave-one-source-out errors (engine/uncertainty.conformal, as the step-time bands take theirs): the
relative half-width that holds about 68% of peaks the ratio was not fitted to. --write stores it
(engine/memory_verdict.py) and the ratio (engine/reserve.py) where the fitted figures live.

Run: python benchmarks/calibrate_memory.py [--write]
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np

from perfmodel.engine import memory_verdict
from perfmodel.engine import reserve as engine_reserve
from perfmodel.engine.uncertainty import TYPICAL, conformal
from perfmodel.review.validate_memory import MemoryRow, memory_validation


def source_of(row: MemoryRow) -> str:
    """The table a peak comes from: its record id's first two fields (TORCHTITAN-2412, TRAINY-2506,
    PRIMUSPIPE-LLAMA2_7B_16L)."""
    return "-".join(row.record.split("-")[:2])


def held_bytes(row: MemoryRow) -> float:
    """What of the measured peak the caching allocator held, bytes."""
    outside = engine_reserve.CUBLAS_WORKSPACE_BYTES
    if row.quantity == "device":
        outside += engine_reserve.CUDA_CONTEXT_BYTES
    return row.measured_bytes - outside


def predicted(row: MemoryRow, ratio: float) -> float:
    out = row.allocated_bytes * ratio + engine_reserve.CUBLAS_WORKSPACE_BYTES
    if row.quantity == "device":
        out += engine_reserve.CUDA_CONTEXT_BYTES
    return out


def rows_and_ratios() -> tuple[list[MemoryRow], np.ndarray]:
    rows = [r for r in memory_validation()[0] if r.quantity in ("reserved", "device")]
    return rows, np.array([held_bytes(r) / r.allocated_bytes for r in rows])


def out_of_sample(
    rows: list[MemoryRow], ratios: np.ndarray
) -> list[tuple[MemoryRow, float, float]]:
    """(run, its ratio, its error in percent with its source left out of the ratio's fit)."""
    out = []
    for source in sorted({source_of(r) for r in rows}):
        inside = np.array([source_of(r) == source for r in rows])
        rest = float(np.median(ratios[~inside]))
        for r, ratio in zip(np.array(rows, dtype=object)[inside], ratios[inside]):
            out.append(
                (r, float(ratio), 100 * (predicted(r, rest) - r.measured_bytes) / r.measured_bytes)
            )
    return out


def band(errors_pct: list[float]) -> float:
    """The memory band: the 68% split-conformal rank of the |errors|, rounded up to 0.1%."""
    q = conformal(np.asarray(errors_pct) / 100, TYPICAL)
    if q is None:
        raise SystemExit("too few measured peaks for a 68% band")
    return math.ceil(q * 1000 - 1e-9) / 1000


def write(ratio: float, width: float) -> None:
    """Store the fitted figures in engine/reserve.py."""
    for module, name, value in (
        (engine_reserve, "RESERVED_OVER_ALLOCATED", f"{ratio:.2f}"),
        (memory_verdict, "MEMORY_BAND", f"{width:g}"),
    ):
        path = Path(str(module.__file__))
        text = re.sub(rf"(?m)^{name} = .*$", f"{name} = {value}", path.read_text())
        path.write_text(text)
        print(f"wrote {name} = {value} in {path}")


def main() -> None:
    rows, ratios = rows_and_ratios()
    sources = sorted({source_of(r) for r in rows})
    ratio = float(np.median(ratios))
    print(f"RESERVED_OVER_ALLOCATED = {ratio:.2f} (median of {ratios.size} runs,")
    print(f"  {len(sources)} sources)")
    oos = out_of_sample(rows, ratios)
    for r, ratio_r, err in oos:
        print(f"  {source_of(r):26s} {r.case:44s} ratio {ratio_r:.3f}  error {err:+.1f}%")
    e = np.abs([err for _, _, err in oos])
    width = band([err for _, _, err in oos])
    inside = float(np.mean(e <= 100 * width + 1e-9))
    print(f"leave-one-source-out |error|: mean {e.mean():.1f}%, max {e.max():.1f}%")
    print(
        f"MEMORY_BAND = {width:g} (68% rank of the leave-one-source-out |error|;"
        f" holds {100 * inside:.0f}% of {e.size})"
    )
    print(f"the mean |error| as a band would hold {100 * np.mean(e <= e.mean()):.0f}%")
    if "--write" in sys.argv[1:]:
        write(ratio, width)


if __name__ == "__main__":
    main()
