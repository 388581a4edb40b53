"""The optimizer step of a configuration, seconds a step: the GPU's fused passes over the
parameters it updates (cost/step.optimizer_time) and, with the optimizer's CPU offload, the host's
share (cost/optimizer_offload.step_seconds); the whole gradient buffer is still scaled and zeroed
on the GPU."""

from __future__ import annotations

from perfmodel.cost import Num
from perfmodel.cost import optimizer_offload as oo
from perfmodel.cost import step as stp
from perfmodel.engine.blocks import Setting


def optimizer_seconds(st: Setting, local: Num) -> Num:
    """One optimizer step over ``local`` parameters (the rank's optimizer shard), seconds."""
    tr, gpu, p = st.plan.training, st.plan.system.gpu, st.precision
    f = tr.optimizer_cpu_offload
    on_gpu = stp.optimizer_time(
        local * (1.0 - f), p, gpu.hbm_bandwidth_bytes_per_s, gpu.hbm_efficiency,
        tr.fp8_param_gather,
    )  # fmt: skip
    if not f:
        return on_gpu
    sys = st.plan.system
    link, host = sys.host_link, sys.host_memory_bandwidth_bytes_per_s
    if link is None or host is None:  # the plan's validation asks for both (specs/plan.py)
        raise ValueError("the optimizer's CPU offload needs a host link and host memory")
    # the offloaded parameters' gradient buffer is still divided by dp and zeroed on the GPU
    hbm = gpu.hbm_bandwidth_bytes_per_s * gpu.hbm_efficiency
    buffer = local * f * stp.gradient_buffer_bytes(p) / hbm
    host_step = oo.step_seconds(
        local, f, p.gradient_bytes, tr.optimizer,
        link.bandwidth_bytes_per_s * link.efficiency, host, tr.optimizer_offload_overlap,
    )  # fmt: skip
    return on_gpu + buffer + host_step
