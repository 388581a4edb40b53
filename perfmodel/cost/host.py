"""The host's share of a pass (issue 38): in eager PyTorch the CPU issues every kernel of a layer
one by one (the Python module, the autograd engine in the backward, the dispatcher and
cudaLaunchKernel), asynchronously: the GPU runs behind the host until its queue drains. A pass
over a block then takes max(GPU time, host time), and what the host adds is the excess,

    exposed = max(0, launches x host_s - GPU seconds),

``launches`` the kernels the block's op list issues in that pass (cost/ops.py: a GEMM one
forward and two backward, its input and weight gradients; a fused attention one each way; a
pointwise op its ``kernels`` where it moves bytes in that pass; a collective one where it runs),
``host_s`` the host seconds per kernel (Training.kernel_host_s, fitted: specs/framework.py names
the script). This is the overhead-bound regime of small models (Horace He, "Making Deep Learning
Go Brrrr From First Principles", 2022: PyTorch's eager overhead is microseconds per op, so a model
whose kernels run in less is bound by the host; torch.profiler traces show the CPU-side launch of
each kernel ahead of its GPU start until the GPU catches up). A CUDA graph replays a captured
layer with one launch (Training.cuda_graphs: host_s 0 for the layers it captures; Megatron-Core's
--enable-cuda-graph, transformer/cuda_graphs.py).

Units: kernels (counts), seconds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from perfmodel.cost import Array, Num

from .layer import Op
from .ops import Block, Collective, FusedAttention, Gemm, Pointwise


def launches(block: Block, timed: Sequence[Op]) -> tuple[Array, Array]:
    """(forward, backward) kernels a block issues per micro-batch on one rank, read off its op list
    (``timed``: the same ops, timed, in the block's order; a collective runs where it takes time,
    a pointwise op where it has elements)."""
    zero = np.zeros(np.shape(np.asarray(timed[0].fwd_s))) if timed else np.zeros(())
    fwd, bwd = zero.copy(), zero.copy()
    for desc, op in zip(block.ops, timed):
        if isinstance(desc, Gemm):
            fwd, bwd = fwd + 1.0, bwd + 2.0  # forward; input and weight gradients
        elif isinstance(desc, FusedAttention):
            fwd, bwd = fwd + 1.0, bwd + 1.0
        elif isinstance(desc, Pointwise):
            live = np.asarray(desc.elements) > 0
            k = np.asarray(desc.kernels, dtype=float)
            fwd = fwd + np.where(live & bool(desc.fwd_bytes_per_el), k, 0.0)
            bwd = bwd + np.where(live & bool(desc.bwd_bytes_per_el), k, 0.0)
        elif isinstance(desc, Collective):
            fwd = fwd + (np.asarray(op.fwd_s) > 0)
            bwd = bwd + (np.asarray(op.bwd_s) > 0)
    return fwd, bwd


def exposed_host(kernels: Num, host_s: Num, gpu_s: Num) -> Array:
    """Seconds the host adds to a pass whose GPU work takes ``gpu_s``: what issuing ``kernels``
    at ``host_s`` each takes beyond it (the GPU waits on the launch queue)."""
    return np.asarray(np.maximum(np.asarray(kernels) * host_s - np.asarray(gpu_s), 0.0))


def waits(
    block: Block, timed: Sequence[Op], host_s: float, gpu_fwd: Num, gpu_bwd: Num
) -> tuple[Num, Num]:
    """(forward, backward) seconds a block's passes wait on the host beyond their GPU work
    ``gpu_fwd`` and ``gpu_bwd`` (compute and collectives); none without host time."""
    if not host_s:
        return 0.0, 0.0
    kf, kb = launches(block, timed)
    return exposed_host(kf, host_s, gpu_fwd), exposed_host(kb, host_s, gpu_bwd)
