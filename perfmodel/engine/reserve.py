"""The memory reserve and the usable line (SPEC 6): what of a GPU's HBM a training process cannot
give to its model states and activations, and what is left, the line the memory verdicts are drawn
against (engine/memory_verdict.py); the caching allocator's reserved peak over its allocated one
(what a published run's logged peak is compared with), and the texts that say both."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from perfmodel.specs import System

DEFAULT_RESERVE_SHARE = 0.05


def reserve_bytes(system: System) -> float:
    """HBM a training process cannot give to weights, gradients, optimizer states and activations,
    bytes: the CUDA context and loaded kernels (several hundred MB per process), NCCL's buffers
    (NCCL_BUFFSIZE, 4 MiB by default, per channel and peer of every communicator: TP, CP, PP, DP and
    EP groups each hold their own; NCCL environment documentation), cuBLAS/cuBLASLt workspaces (32
    MiB per handle and stream on Hopper, 4 MiB before; cuBLAS API reference, cublasSetWorkspace;
    PyTorch pull request 120925), and the caching allocator's fragmentation: memory reserved by
    PyTorch but not usable for a request of the size asked (PyTorch devlog "When does
    fragmentation occur in the CUDA caching allocator?", 2026). The plan's system.memory_reserve
    (a share of HBM, or a size); by default 5% of HBM and never less than the GPU preset's fixed
    reserved_bytes (2 GB unless measured)."""
    capacity = system.gpu.hbm_capacity_bytes
    if system.memory_reserve_bytes is not None:
        return float(system.memory_reserve_bytes)
    if system.memory_reserve is not None:
        return float(system.memory_reserve * capacity)
    return float(max(DEFAULT_RESERVE_SHARE * capacity, system.gpu.reserved_bytes))


def usable_bytes(system: System) -> float:
    """The usable line, bytes: HBM less the reserve (what "fits" is drawn against)."""
    return system.gpu.hbm_capacity_bytes - reserve_bytes(system)


def reserve_text(system: System) -> str:
    """How the reserve was set, for the assumptions an estimate lists."""
    size = reserve_bytes(system)
    capacity = system.gpu.hbm_capacity_bytes
    if system.memory_reserve_bytes is not None or system.memory_reserve is not None:
        how = "system.memory_reserve"
    else:
        how = f"the default, {100 * DEFAULT_RESERVE_SHARE:g}% of HBM"
    return (
        f"memory reserve {size / 1e9:.1f} GB of {capacity / 1e9:.1f} GB ({how}, assumed): CUDA"
        " context, NCCL and cuBLAS workspaces, allocator fragmentation; fits means the allocated"
        " peak within the rest (a reserved peak, as torchtitan logs it, is about"
        f" {RESERVED_OVER_ALLOCATED:g} x allocated: docs/memory.md)"
    )


# PyTorch's caching allocator holds more than its live tensors at the peak: freed blocks stay
# cached, a block split for a small request cannot serve a large one, and blocks of different
# segments never merge (PyTorch DevLog, "When does fragmentation occur in the CUDA caching
# allocator?"; torch.cuda.memory_reserved vs memory_allocated). The ratio of the two peaks,
# fitted by benchmarks/calibrate_memory.py: the median over the 25 published peaks of three
# sources (torchtitan's 2024-12 notes and Trainy's 2025-06 run, reserved; Primus-pipeline's blog,
# the device's) of the measured figure, less what the allocator does not hold, over the
# predicted allocated one; each source left out of the fit is predicted within 14%, 7% on
# average (the script prints it; docs/memory.md).
RESERVED_OVER_ALLOCATED = 1.14
# cuBLAS keeps a workspace per handle and stream, 32 MiB on Hopper and later (PyTorch's
# CUBLAS_WORKSPACE_CONFIG default since pull request 120925; 4 MiB before), allocated through the
# caching allocator; cuBLASLt 1 MiB (CUBLASLT_WORKSPACE_SIZE). Two streams (compute, and the
# communication stream's reductions) are counted.
CUBLAS_WORKSPACE_BYTES = 2 * (32 + 1) * 2**20


# Outside the caching allocator, seen by nvidia-smi or rocm-smi only: the CUDA context with its
# loaded kernels, 287 MB with lazy loading (PyTorch's default since 1.13) and 667 MB with every
# kernel loaded, as PyTorch pull request 86509 measured one process; a training process loads
# more kernels than that test, fewer than all: taken as 512 MiB, inside the measured range.
CUDA_CONTEXT_BYTES = 512 * 2**20


def reserved_peak_bytes(allocated: Any) -> Any:
    """The caching allocator's reserved peak (torch.cuda.max_memory_reserved, torchtitan's
    "memory: X GiB") for an allocated peak, bytes: fragmentation and the cuBLAS workspaces."""
    return np.asarray(allocated) * RESERVED_OVER_ALLOCATED + CUBLAS_WORKSPACE_BYTES


def usable_text(need: float, capacity: float, reserve: float) -> str:
    """A memory need against the line it is judged by: the HBM less the reserve."""
    return (
        f"{need / 1e9:.1f} GB needed, {(capacity - reserve) / 1e9:.1f} GB usable"
        f" ({capacity / 1e9:.1f} GB HBM less a {reserve / 1e9:.1f} GB reserve;"
        " --memory-reserve)"
    )
