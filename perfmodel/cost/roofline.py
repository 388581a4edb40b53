"""Roofline, GEMM cost and the GEMM efficiency model (SPEC section 4; seed 000, 2.6, 3.2, 4.4).

    AI = FLOPs / bytes moved from HBM            (FLOP/byte)
    ridge point = peak / bandwidth               (FLOP/byte)
    attainable  = min(peak, AI * bandwidth)      (FLOP/s)
    time        = max(FLOPs / peak, bytes / bandwidth)   (s)

GEMM (M x K) * (K x N): FLOPs = 2 M K N; minimum bytes = dtype (MK + KN + MN).
Tiling: a T x T block loads 2 T K elements and does 2 T^2 K FLOPs, so its AI is
T / dtype_bytes (fp32: T/4). Wave quantization: tiles = ceil(M/T) ceil(N/T)
run on SMs * resident blocks per SM slots; utilization = tiles / (waves * slots).
"""

from __future__ import annotations

import numpy as np

from perfmodel.cost import Array, Num


def gemm_flops(M: Num, K: Num, N: Num, batch: Num = 1) -> Num:
    """2 M K N FLOPs per GEMM, times a batch of independent GEMMs."""
    return 2.0 * np.asarray(M, dtype=float) * K * N * batch


def gemm_bytes(M: Num, K: Num, N: Num, dtype_bytes: Num, batch: Num = 1) -> Num:
    """Minimum HBM traffic: read A (MK) and B (KN), write C (MN), bytes."""
    M = np.asarray(M, dtype=float)
    return dtype_bytes * (M * K + K * N + M * N) * batch


def arithmetic_intensity(flops: Num, nbytes: Num) -> Num:
    """FLOP per byte."""
    return np.asarray(flops, dtype=float) / nbytes


def ridge_point(peak_flops_per_s: Num, bandwidth_bytes_per_s: Num) -> Num:
    """AI (FLOP/byte) above which a kernel is compute-bound."""
    return peak_flops_per_s / bandwidth_bytes_per_s


def attainable_flops(ai: Num, peak_flops_per_s: Num, bandwidth_bytes_per_s: Num) -> Num:
    """min(peak, AI * BW), FLOP/s."""
    return np.minimum(peak_flops_per_s, np.asarray(ai, dtype=float) * bandwidth_bytes_per_s)


def roofline_time(
    flops: Num, nbytes: Num, peak_flops_per_s: Num, bandwidth_bytes_per_s: Num
) -> Num:
    """max(FLOPs / peak, bytes / BW), seconds."""
    return np.maximum(
        np.asarray(flops, dtype=float) / peak_flops_per_s,
        np.asarray(nbytes, dtype=float) / bandwidth_bytes_per_s,
    )


def is_memory_bound(
    flops: Num, nbytes: Num, peak_flops_per_s: Num, bandwidth_bytes_per_s: Num
) -> Num:
    """True where AI is below the ridge point."""
    return arithmetic_intensity(flops, nbytes) < ridge_point(
        peak_flops_per_s, bandwidth_bytes_per_s
    )


def tile_arithmetic_intensity(tile: Num, dtype_bytes: Num) -> Num:
    """AI of a TILE x TILE block: 2 T^2 K FLOPs over 2 T K dtype bytes = T / dtype (seed 000,
    3.2)."""
    return np.asarray(tile, dtype=float) / dtype_bytes


def tiled_gemm_bytes(M: Num, N: Num, K: Num, tile: Num, dtype_bytes: Num) -> Num:
    """HBM traffic when every T x T output block re-reads its A and B panels (seed 000, 3.2)."""
    tiles = np.ceil(np.asarray(M) / tile) * np.ceil(np.asarray(N) / tile)
    return tiles * 2.0 * tile * K * dtype_bytes


def wave_quantization(
    M: Num, N: Num, tile_m: Num, tile_n: Num, num_sms: Num, blocks_per_sm: Num = 1, batch: Num = 1
) -> tuple[Array, Num, Array, Array]:
    """(tiles, slots, waves (fractional), utilization) of a tiled GEMM (SPEC 4).

    utilization = tiles / (ceil(waves) * slots): the last, partial wave idles SMs.
    """
    tiles = (
        np.ceil(np.asarray(M, dtype=float) / tile_m)
        * np.ceil(np.asarray(N, dtype=float) / tile_n)
        * batch
    )
    slots = float(num_sms * blocks_per_sm)
    waves = tiles / slots
    utilization = tiles / (np.ceil(waves) * slots)
    return tiles, slots, waves, utilization


# Tile shapes a GEMM library chooses among, with the relative throughput of
# each shape on a full wave (bigger tiles reuse more data per load: AI = mn/(m+n)).
# The library picks the shape that finishes first; so do we. Seed 000, 2.6 and 5.
GEMM_TILES = ((256, 128, 1.00), (128, 256, 1.00), (128, 128, 0.92), (128, 64, 0.80), (64, 64, 0.62))


_TILE_M = np.array([tm for tm, _, _ in GEMM_TILES], dtype=float)
_TILE_N = np.array([tn for _, tn, _ in GEMM_TILES], dtype=float)
_TILE_QUALITY = np.array([q for _, _, q in GEMM_TILES], dtype=float)


def gemm_efficiency(
    M: Num,
    N: Num,
    K: Num,
    num_sms: Num,
    base_efficiency: Num,
    k_overhead: Num,
    batch: Num = 1,
    tail_waves: bool = True,
) -> Num:
    """Fraction of peak a GEMM reaches: base x best tile (wave quantization, edge padding) x
    K/(K+k0).

    - wave quantization and partial tiles: a small M (tiny micro-batch) or a
      thin TP shard leaves SMs idle (seed 000, 3.2: 32 blocks on 108 SMs);
      with ``tail_waves`` false (stream-K scheduling) only an under-filled
      first wave costs, the tail is balanced across SMs;
    - K / (K + k0): each tile pays a fixed prologue/epilogue, which thin
      reductions (attention's K = head dim) cannot amortize.
    """
    # every tile shape at once, along a trailing axis; the best one per GEMM
    M = np.asarray(M, dtype=float)[..., None]
    N = np.asarray(N, dtype=float)[..., None]
    ntm, ntn = np.ceil(M / _TILE_M), np.ceil(N / _TILE_N)
    tiles = ntm * ntn * np.asarray(batch, dtype=float)[..., None]
    util = (
        tiles / (np.ceil(tiles / num_sms) * num_sms)
        if tail_waves
        else np.minimum(1.0, tiles / num_sms)
    )
    padding = (M / (ntm * _TILE_M)) * (N / (ntn * _TILE_N))
    best = np.maximum(0.0, np.max(_TILE_QUALITY * util * padding, axis=-1))
    return np.asarray(
        base_efficiency
        * best
        * (np.asarray(K, dtype=float) / (np.asarray(K, dtype=float) + k_overhead))
    )


def kernel_time(
    flops: Num,
    nbytes: Num,
    peak_flops_per_s: Num,
    bandwidth_bytes_per_s: Num,
    compute_efficiency: Num,
    memory_efficiency: Num,
    overhead_s: Num,
    flops_ceiling: Num = np.inf,
    bytes_ceiling: Num = np.inf,
) -> Num:
    """Roofline time with achievable efficiencies, plus a fixed per-kernel overhead, seconds.

    The rates are formed here and only here: peak x efficiency, never above the part's measured
    ceilings (FLOP/s of the format's best matmul, bytes/s of HBM; specs/ceilings.py, issue 39),
    whatever a calibration divided the efficiencies by."""
    return (
        roofline_time(
            flops,
            nbytes,
            np.minimum(peak_flops_per_s * np.asarray(compute_efficiency), flops_ceiling),
            np.minimum(bandwidth_bytes_per_s * np.asarray(memory_efficiency), bytes_ceiling),
        )
        + overhead_s
    )
