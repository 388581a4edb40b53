"""Per-step terms outside the layers: recompute, pipeline sends, data-parallel gradient traffic,
ZeRO gathers and the optimizer step (SPEC 6-8). Seconds and bytes; arrays or floats."""

from __future__ import annotations

import numpy as np

from ..specs.precision import Precision
from . import collectives as coll


def layer_recompute(fwd_compute, fwd_comm, selective_compute, recompute, selective_comm=0.0):
    """(compute, comm) seconds one layer spends recomputing in backward (Korthikanti 2022, Sec. 5).

    Full recompute repeats the whole forward, its collectives included; selective repeats the forward of
    the chosen modules: by default the attention core (scores, softmax, dropout, attention x V), which
    has no collective (Megatron-Core --recompute-modules may add, e.g., the MoE layer and its
    all-to-alls). ``recompute`` is a code of RECOMPUTE_CODES (array or scalar): 0 none, 1 selective, 2 full.
    """
    rc = np.asarray(recompute)
    compute = np.where(rc == 2, fwd_compute, np.where(rc == 1, selective_compute, 0.0))
    return compute, np.where(rc == 2, fwd_comm, np.where(rc == 1, selective_comm, 0.0))


def p2p_time(message, tp, sp, pp_link, tp_link):
    """One pipeline crossing of a b s h activation (``message`` bytes) with the scatter/gather
    optimization (Narayanan 2021, Sec. 4.1): each TP rank sends 1/t of it to the next stage, which
    all-gathers it over the TP link. Under SP each rank already holds its s/t slice and sends it as
    is: no all-gather (Megatron-LM p2p_communication.py skips scatter/gather with sequence_parallel)."""
    send = sum(coll.collective_time("p2p", message / tp, 2, pp_link.bandwidth, pp_link.latency))
    gather = sum(coll.collective_time("all-gather", message, tp, tp_link.bandwidth, tp_link.latency))
    return send + np.where(sp, 0.0, gather)


def pipeline_comm(p2p_s, pp, m, vp):
    """2 v crossings per micro-batch sit on the 1F1B critical path (forward activation and backward
    gradient; with equal stages even when the sends overlap compute, as the schedule simulator
    shows). Seconds per step."""
    return np.where(pp > 1, 2.0 * m * vp * p2p_s, 0.0)


def data_parallel_comm(groups, zero, precision: Precision, window_s, overlap: bool, penalty: float):
    """(exposed gradient reduction plus ZeRO's parameter all-gathers, those all-gathers alone) in seconds.

    ``groups``: (parameters on this GPU, group size, Link) for each set of parameters reduced over its
    own data-parallel group: the dense ones over dp x cp, the routed experts' over the expert-data-
    parallel ranks (Megatron-Core). Gradients (``precision.gradient_bytes`` each) are all-reduced
    (ring, SPEC 3), or reduce-scattered under ZeRO >= 1 (Rajbhandari 2020); the reduction can hide
    behind the last micro-batch's backward (``window_s``), at the contention cost of any overlapped
    collective; ZeRO's all-gather of the updated 16-bit parameters comes after the optimizer step
    and cannot."""
    reduce, gather, gather_exposed = 0.0, 0.0, 0.0
    for params, n, link in groups:
        grads = params * precision.gradient_bytes
        t_ar = sum(coll.collective_time("all-reduce", grads, n, link.bandwidth, link.latency))
        t_rs = sum(coll.collective_time("reduce-scatter", grads, n, link.bandwidth, link.latency))
        t_ag = sum(coll.collective_time("all-gather", params * precision.weight_bytes, n, link.bandwidth,
                                        link.latency))
        active = (n > 1) & (params > 0)
        reduce = reduce + np.where(active, np.where(zero >= 1, t_rs, t_ar), 0.0)
        gather = gather + np.where(active, t_ag, 0.0)
        gather_exposed = gather_exposed + np.where(active & (zero >= 1), t_ag, 0.0)
    if overlap:
        reduce = coll.overlapped_time(reduce, window_s, penalty)
    return reduce + gather_exposed, gather


def zero3_comm(t_gather, zero, m):
    """ZeRO-3 gathers the weights again for every micro-batch's forward and backward. Seconds per step."""
    return np.where(zero >= 3, 2.0 * m * t_gather, 0.0)


def optimizer_step_bytes(p: Precision) -> float:
    """HBM bytes per parameter of one optimizer step, as Megatron-LM's mixed-precision optimizer runs
    it (megatron/optimizer/optimizer.py, apex multi-tensor kernels), each pass a separate kernel:
    16-bit gradients are first copied into fp32 main gradients (2 + 4); fp16 unscales them and
    checks for inf/nan in place (4 + 4); the global grad norm reads them (4); the update reads
    them (4) and reads and writes the fp32 states; the fp32 master is copied to the 16-bit weights
    (4 + 2); the gradient buffer is zeroed (its width). fp32 training has no master copy.
    Before all that, the data-parallel reduction divides the whole gradient buffer by the DP size in
    its own pass, read and write at the buffer's width, even at dp = 1 (megatron/model/distributed.py,
    allreduce_gradients: `buffer_.data /= dp`; Megatron Core scales each bucket the same way unless
    the collective averages; PyTorch DDP fuses the division into its copy into the buckets)."""
    grad = float(p.gradient_bytes)
    dp_scale = 2 * grad
    copy_in = 6.0 if grad == 2 else 0.0
    unscale = 8.0 if p.loss_scaling else 0.0
    master_out = 4.0 + p.weight_bytes if p.master_weights else 0.0
    states = 2 * p.optimizer_bytes  # read and write every fp32 state
    return dp_scale + states + copy_in + unscale + 4.0 + 4.0 + master_out + grad  # the last: zeroing


def optimizer_time(local_params, p: Precision, hbm_bandwidth: float, hbm_efficiency: float):
    """The optimizer step over this GPU's shard: HBM-bound, seconds."""
    return local_params * optimizer_step_bytes(p) / (hbm_bandwidth * hbm_efficiency)
