"""Fit the caching allocator's reserved-over-allocated ratio (engine/memory.py
RESERVED_OVER_ALLOCATED) on the published runs whose source printed a reserved or a device peak,
and judge it leaving one source out: the ratio refitted without that source's runs, each of them
predicted with it.

One figure for the allocator, none per run or per source: the median over the runs of (measured
less what the allocator does not hold: the cuBLAS workspaces, and for a device reading the CUDA
context) / predicted allocated at the reading (validate_memory.reading_allocated). A source is a
benchmark table, its runs sharing their software and their transcription: torchtitan's 2024-12
notes (reserved; the validation cases and the memory runs of its other rows), Trainy's 2025-06 run
(reserved), Primus-pipeline's blog (device, rocm-smi).

Run: python benchmarks/calibrate_memory.py
"""

from __future__ import annotations

import numpy as np

from perfmodel.engine import memory as engine_memory
from perfmodel.review.validate_memory import MemoryRow, memory_validation


def source_of(row: MemoryRow) -> str:
    """The table a peak comes from: its record id's first two fields (TORCHTITAN-2412, TRAINY-2506,
    PRIMUSPIPE-LLAMA2_7B_16L)."""
    return "-".join(row.record.split("-")[:2])


def held_bytes(row: MemoryRow) -> float:
    """What of the measured peak the caching allocator held, bytes."""
    outside = engine_memory.CUBLAS_WORKSPACE_BYTES
    if row.quantity == "device":
        outside += engine_memory.CUDA_CONTEXT_BYTES
    return row.measured_bytes - outside


def predicted(row: MemoryRow, ratio: float) -> float:
    out = row.allocated_bytes * ratio + engine_memory.CUBLAS_WORKSPACE_BYTES
    if row.quantity == "device":
        out += engine_memory.CUDA_CONTEXT_BYTES
    return out


def main() -> None:
    rows = [r for r in memory_validation()[0] if r.quantity in ("reserved", "device")]
    ratios = np.array([held_bytes(r) / r.allocated_bytes for r in rows])
    sources = sorted({source_of(r) for r in rows})
    print(f"RESERVED_OVER_ALLOCATED = {np.median(ratios):.2f} (median of {ratios.size} runs,")
    print(f"  {len(sources)} sources)")
    errs = []
    for source in sources:
        inside = np.array([source_of(r) == source for r in rows])
        rest = float(np.median(ratios[~inside]))
        print(f"  without {source}: ratio {rest:.3f}")
        for r, ratio in zip(np.array(rows, dtype=object)[inside], ratios[inside]):
            err = 100 * (predicted(r, rest) - r.measured_bytes) / r.measured_bytes
            errs.append(err)
            print(f"    {r.case:38s} ratio {ratio:.3f}  leave-source-out error {err:+.1f}%")
    e = np.abs(errs)
    print(f"leave-one-source-out |error|: mean {e.mean():.1f}%, max {e.max():.1f}%")
    print(f"MEMORY_BAND = {e.mean() / 100:.2f} (the mean leave-one-source-out |error|)")


if __name__ == "__main__":
    main()
