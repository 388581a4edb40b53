"""The optimizer's CPU offload (Megatron-Core --optimizer-cpu-offload with
--optimizer-offload-fraction f and --overlap-cpu-optimizer-d2h-h2d; megatron/core/optimizer/
cpu_offloading/hybrid_optimizer.py, HybridDeviceOptimizer): the first fraction f of the parameters a
rank's optimizer owns keep their fp32 master copy and moments in host memory, and torch's AdamW
(torch.optim.AdamW, Megatron-Core's CPUAdam) updates them there. Each step the main gradients of
those parameters go to the host and the updated parameters come back; the GPU's fused optimizer
updates the rest (cost/step.optimizer_time).

    GPU memory                 optimizer states x (1 - f)                                   (B)
    to the host (D2H)          f P x gradient bytes (the main gradients' dtype)              (B)
    back (H2D)                 f P x 4 (the fp32 master copied into the GPU's parameter)     (B)
    host memory traffic        f P x 80 (ADAM_HOST_BYTES)                                    (B)
    the CPU step               traffic / (the host's memory bandwidth a GPU's share)        (s)
    exposed, overlapped        max(D2H, CPU step, H2D)                                      (s)
    exposed, not overlapped    D2H + CPU step + H2D                                         (s)

P: the parameters of the rank's optimizer shard. With the overlap, HybridDeviceOptimizer copies
each parameter group's gradients on a side stream, steps a group on the CPU as soon as its
gradients have arrived and sends it back while the next steps, so the slowest of the three sets
the pace; without it the three run one after the other. The step sits between the last backward
and the next forward, on the critical path, as the GPU's optimizer step does.
"""

from __future__ import annotations

import numpy as np

from perfmodel.cost import Array, Num

# Host memory bytes torch's single-tensor AdamW moves per fp32 parameter on the CPU, each line one
# kernel over the parameter's tensors (torch/optim/adam.py, _single_tensor_adam; on the CPU torch
# takes neither the foreach nor the fused path unless asked): the decoupled weight decay
# param.mul_ (read and write 4 + 4), exp_avg.lerp_(grad) (m and g in, m out: 12),
# exp_avg_sq.mul_ (8) and .addcmul_(grad, grad) (v and g in, v out: 12), the denominator
# exp_avg_sq.sqrt() / bias_correction2_sqrt then .add_(eps) (three passes over a temporary: 24),
# and param.addcdiv_(exp_avg, denom) (p, m and the temporary in, p out: 16).
ADAM_HOST_BYTES = 8.0 + 12.0 + 8.0 + 12.0 + 24.0 + 16.0
# SGD with momentum (torch.optim.SGD): the weight decay, momentum_buffer.mul_().add_(grad) and
# param.add_(buf): 8 + 8 + 12 + 12
SGD_HOST_BYTES = 8.0 + 8.0 + 12.0 + 12.0
MASTER_BYTES = 4.0  # the fp32 master copied back into the GPU's parameter (H2D)


def host_bytes_per_param(optimizer: str) -> float:
    """Host memory bytes the CPU optimizer moves per offloaded parameter, bytes."""
    return ADAM_HOST_BYTES if optimizer == "adam" else SGD_HOST_BYTES


def gpu_state_bytes(optimizer_bytes: Num, fraction: float) -> Array:
    """The optimizer states left in HBM, bytes: the fraction f of them lives on the host."""
    return np.asarray(np.asarray(optimizer_bytes, dtype=float) * (1.0 - fraction))


def step_seconds(
    params: Num,
    fraction: float,
    gradient_bytes: float,
    optimizer: str,
    link_bytes_per_s: float,
    host_memory_bytes_per_s: float,
    overlap: bool,
) -> Array:
    """The offloaded part of one optimizer step on the critical path, seconds: the gradients' copy
    to the host, the CPU's update and the parameters' copy back, for ``params`` parameters of the
    rank's optimizer shard (see the module docstring). ``link_bytes_per_s``: the host link per
    direction, as the collectives reach it (bandwidth x efficiency)."""
    moved = np.asarray(params, dtype=float) * fraction
    d2h = moved * gradient_bytes / link_bytes_per_s
    h2d = moved * MASTER_BYTES / link_bytes_per_s
    cpu = moved * host_bytes_per_param(optimizer) / host_memory_bytes_per_s
    if overlap:
        return np.asarray(np.maximum(np.maximum(d2h, h2d), cpu))
    return np.asarray(d2h + cpu + h2d)
