"""The memory reserve and the usable line (SPEC 6): what of a GPU's HBM a training process cannot
give to its model states and activations, and what is left, the line the memory verdicts are drawn
against (engine/memory_verdict.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
