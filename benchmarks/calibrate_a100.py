"""Calibrate the A100-80GB efficiency parameters once, on one fixed set of measurements.

Link efficiencies are not fitted: they come from NCCL's measured bus bandwidth (configs/hardware/
links.yaml cites the reports): NVLink3 0.78 (~235 GB/s all-reduce busbw on 8 A100s of 300 GB/s),
IB HDR 0.90 (85-96 GB/s of 100 GB/s on 4 HDR NICs). Table 4 alone cannot separate GEMM speed from
TP all-reduce speed (a forward is their sum), so the links are pinned from outside.

Calibration set (fitted): Korthikanti et al. 2022, Table 4, forward and backward of one 22B layer
on TP8 under five recompute/SP variants (10 numbers) -> gemm_efficiency, hbm_efficiency and
comm_overlap_penalty of the A100.
Every published step time (Korthikanti Table 5, Narayanan Table 1) only checks the result.

Run: python benchmarks/calibrate_a100.py    (prints the fit; write the values into configs/hardware)
"""

from __future__ import annotations

import itertools

import numpy as np

from perfmodel import presets
from perfmodel.validate import _per_layer, run_case

NVLINK3, IB_HDR = {"efficiency": 0.78}, {"efficiency": 0.90}


def with_hardware(case: dict, gpu: dict, nvlink: dict, ib: dict) -> dict:
    plan = case["plan"]
    system = plan.system.model_copy(update={
        "gpu": plan.system.gpu.model_copy(update=gpu),
        "intra_node_link": plan.system.intra_node_link.model_copy(update=nvlink),
        "inter_node_link": plan.system.inter_node_link.model_copy(update=ib)})
    return {**case, "plan": plan.model_copy(update={"system": system})}


def per_layer_rms(case, gpu, nvlink) -> float:
    rows = _per_layer(with_hardware(case, gpu, nvlink, {}))
    errs = [r[k] for r in rows for k in ("fwd_error_pct", "bwd_error_pct")]
    return float(np.sqrt(np.mean(np.square(errs))))


def main() -> None:
    cases = {c["name"]: c for c in presets.validation_cases()}
    table4 = cases["k22-table4-22b-per-layer"]
    best = None
    grid = itertools.product(np.arange(0.70, 0.86, 0.01), np.arange(0.60, 0.91, 0.05), np.arange(0.0, 1.01, 0.1))
    for ge, he, op in grid:
        gpu = {"gemm_efficiency": round(float(ge), 2), "hbm_efficiency": round(float(he), 2),
               "comm_overlap_penalty": round(float(op), 1)}
        rms = per_layer_rms(table4, gpu, NVLINK3)
        if best is None or rms < best[0]:
            best = (rms, gpu)
    rms, gpu = best
    print(f"A100 from Korthikanti Table 4: {gpu}  (RMS error {rms:.2f}% over 10 per-layer times)")
    print("\nChecks with these values (not fitted):")
    for name, case in cases.items():
        if "measured" in case:
            r = run_case(with_hardware(case, gpu, NVLINK3, IB_HDR))
            print(f"  {name:22s} measured {r.measured_s:8.2f} s  predicted {r.predicted_s:8.2f} s  {r.error_pct:+6.1f}%")


if __name__ == "__main__":
    main()
