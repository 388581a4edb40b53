"""Model vs measurement for one GPU: every GEMM, flash attention and HBM stream measured by
hopper_kernels.py, against the roofline and efficiency model of a GPU preset.

Run: python benchmarks/device/compare.py benchmarks/device/results/h200-2026-11-30.json h200 [--fit]
--fit also searches gemm_efficiency and gemm_k_overhead for that GPU (what set the preset).
"""

from __future__ import annotations

import itertools
import json
import sys

import numpy as np

from perfmodel.cost.roofline import gemm_bytes, gemm_efficiency, gemm_flops, kernel_time
from perfmodel.inputs import presets

LAUNCH_BOUND_M = 64  # measured from a Python loop: ~20 us per call is host dispatch, not the GPU


def gemm_errors(data, gpu, base, k0, tail):
    out = []
    for r in data["gemm"]:
        M, K, N = r["M"], r["K"], r["N"]
        if M <= LAUNCH_BOUND_M:
            continue
        eff = gemm_efficiency(M, N, K, gpu.num_sms, base, k0, 1, tail)
        t = float(
            kernel_time(
                gemm_flops(M, K, N),
                gemm_bytes(M, K, N, 2),
                gpu.peak("bf16"),
                gpu.hbm_bandwidth_bytes_per_s,
                eff,
                gpu.hbm_efficiency,
                gpu.kernel_overhead_s,
            )
        )
        out.append((r["label"], r["time_s"], t, 100 * (t - r["time_s"]) / r["time_s"]))
    return out


def main() -> None:
    with open(sys.argv[1]) as fh:
        data = json.load(fh)
    gpu = presets.gpu(sys.argv[2])
    if "--fit" in sys.argv:
        best = min(
            (
                float(np.sqrt(np.mean([e[3] ** 2 for e in gemm_errors(data, gpu, b, k, False)]))),
                b,
                k,
            )
            for b, k in itertools.product(np.arange(0.65, 0.86, 0.01), (0, 32, 64, 128, 256))
        )
        print(
            f"fit (tail_waves off): gemm_efficiency {best[1]:.2f}, gemm_k_overhead {best[2]}, RMS"
            f" {best[0]:.1f}%"
        )
    errs = gemm_errors(data, gpu, gpu.gemm_efficiency, gpu.gemm_k_overhead, gpu.gemm_tail_waves)
    for label, meas, pred, e in errs:
        print(f"{label:40s} measured {meas * 1e6:8.1f} us  model {pred * 1e6:8.1f} us  {e:+6.1f}%")
    e = np.array([x[3] for x in errs])
    print(
        f"\nGEMMs ({len(e)}, M > {LAUNCH_BOUND_M}): mean {e.mean():+.1f}%, RMS"
        f" {np.sqrt((e ** 2).mean()):.1f}%, max |error| {np.abs(e).max():.1f}%"
    )
    for h in data["hbm"]:
        print(
            f"HBM {h['label']}: {h['gb_per_s']:.0f} GB/s ="
            f" {h['gb_per_s'] * 1e9 / gpu.hbm_bandwidth_bytes_per_s:.2f} of the data sheet (preset"
            f" hbm_efficiency {gpu.hbm_efficiency})"
        )
    for a in data["attention"]:
        print(
            f"flash attention s={a['seq']} heads={a['heads']} causal={a['causal']}: forward"
            f" {a['fwd_tflops'] * 1e12 / gpu.peak('bf16'):.2f}, backward"
            f" {a['bwd_tflops'] * 1e12 / gpu.peak('bf16'):.2f} of peak (preset attention_efficiency"
            f" {gpu.attention_efficiency})"
        )


if __name__ == "__main__":
    main()
